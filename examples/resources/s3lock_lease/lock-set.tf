# A maintenance window on two systems: held from the pipeline step that
# opens it to the one that destroys it, both locks or neither.
resource "s3lock_lease" "maintenance" {
  bucket         = "acme-locks"
  names          = ["net/prod", "db/prod"]
  lease_duration = "4h"

  timeouts {
    create = "30m"
  }
}

output "fences" {
  # In the set's order (the names sorted): db/prod, then net/prod.
  value = { for l in s3lock_lease.maintenance.leases : l.name => l.epoch }
}
