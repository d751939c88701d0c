# Adopt the lock's current lease, e.g. one taken by an earlier pipeline step.
# The ID is <bucket>/<name>/<epoch>: the bucket ends at the first slash, the
# epoch follows the last one, and the lock name (which may contain slashes)
# is in between. Only the current, held epoch can be imported.
#
# The imported lease keeps its own lease_duration and metadata: write the same
# values in the configuration, or the next apply replaces the lease (releases
# it and acquires a new epoch), which defeats the handoff.
terraform import s3lock_lease.migrations acme-locks/db/migrations/42
