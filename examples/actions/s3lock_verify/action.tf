# Check the bucket before relying on it, on demand:
#
#   terraform apply -invoke=action.s3lock_verify.deploy_locks
#
# The probes write under deploy/s3lock-probe/, where these credentials may
# write.
action "s3lock_verify" "deploy_locks" {
  config {
    bucket = "acme-locks"
    prefix = "deploy/"
  }
}

# Or every time before the lease is first acquired (and again whenever it is
# replaced): the apply stops if the store cannot hold a lock.
resource "s3lock_lease" "deploy" {
  bucket = "acme-locks"
  name   = "deploy/prod"

  lifecycle {
    action_trigger {
      events  = [before_create]
      actions = [action.s3lock_verify.deploy_locks]
    }
  }
}
