# An operator's unlock of deploy/prod, whose holder is gone for good: look up
# the epoch (s3lock status deploy/prod, or the s3lock_lease data source),
# then release exactly that epoch:
#
#   terraform apply -invoke=action.s3lock_force_release.deploy_prod -var stuck_epoch=42
#
# A newer lease of the lock is never touched, and an epoch the lock does not
# have is refused.
variable "stuck_epoch" {
  type        = number
  description = "The epoch of deploy/prod to release."
  default     = null
}

action "s3lock_force_release" "deploy_prod" {
  config {
    bucket = "acme-locks"
    name   = "deploy/prod"
    epoch  = var.stuck_epoch
  }
}
