# A pool of three build runners shared by pipelines: while this resource
# exists it holds one of them (one of the lock's three slots), and a fourth
# pipeline waits until a runner frees. Every holder of "ci/runners" must ask
# for the same number of slots.
resource "s3lock_lease" "runner" {
  bucket = "acme-locks"
  name   = "ci/runners"
  slots  = 3

  timeouts {
    create = "1h"
  }
}

# Which runner this pipeline has, 1 to 3; the epoch is that runner's fencing
# token.
output "runner" {
  value = "runner-${s3lock_lease.runner.slot} (epoch ${s3lock_lease.runner.epoch})"
}
