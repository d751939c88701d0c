# Take the lock "shared/network" for the duration of each Terraform run:
# `terraform plan` and `terraform apply` each acquire it when they start
# (waiting up to 15 minutes while another run holds it) and release it when
# they end. Terraform renews it while the run lasts.
ephemeral "s3lock_lease" "network" {
  bucket         = "acme-locks"
  name           = "shared/network"
  lease_duration = "2m"
  wait_timeout   = "15m"
  # No run holds it longer than an hour, even one that hangs: at the cap the
  # run is stopped as at a lost lease, and the lock is released.
  max_hold = "1h"
  # Runs that wait take the lock in the order they queued (the default).
  order = "fifo"

  metadata = {
    root_module = "app-frontend"
  }
}

# Everything that must happen under the lock depends on the lease.
resource "terraform_data" "route_update" {
  input = "10.0.42.0/24"

  depends_on = [ephemeral.s3lock_lease.network]
}
