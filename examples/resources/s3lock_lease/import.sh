# Adopt the lock's current lease, e.g. one taken by an earlier pipeline step.
# The ID is <bucket>/<name>/<epoch>: the bucket ends at the first slash, the
# epoch follows the last one, and the lock name (which may contain slashes)
# is in between. Only the current, held epoch can be imported.
terraform import s3lock_lease.migrations acme-locks/db/migrations/42
