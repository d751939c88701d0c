# Hold the lock "db/migrations" while this resource exists: apply acquires it
# (waiting up to 30 minutes while someone else holds it), destroy releases it.
resource "s3lock_lease" "migrations" {
  bucket = "acme-locks"
  name   = "db/migrations"

  # Nothing renews the lease between Terraform runs: it must outlast the
  # time between the applies that rely on it.
  lease_duration = "2h"

  # A plan made less than 30 minutes before the lease expires proposes an
  # in-place renewal.
  renew_before = "30m"

  # Pipelines that wait for the lock take it in the order they queued, so
  # migrations apply in release order (the default; "newest" would let only
  # the latest of the waiting pipelines run).
  order = "fifo"

  metadata = {
    pipeline = "release-2024-06"
    owner    = "platform-team"
  }

  timeouts {
    create = "30m"
  }
}

# The epoch is the fencing token: pass it to whatever the lock protects.
output "migration_epoch" {
  value = s3lock_lease.migrations.epoch
}
