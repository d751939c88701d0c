# Every lock under "deploy/", for a dashboard or a policy check.
data "s3lock_leases" "deploy" {
  bucket = "acme-locks"
  prefix = "deploy/"
}

output "held_deploy_locks" {
  value = {
    for l in data.s3lock_leases.deploy.leases : l.name => {
      holder     = l.holder
      epoch      = l.epoch
      expires_at = l.expires_at
      waiting    = l.waiter_count
    } if l.held
  }
}
