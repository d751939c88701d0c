# Who holds the lock now? A lock that never existed reads as not held, epoch 0.
data "s3lock_lease" "migrations" {
  bucket = "acme-locks"
  name   = "db/migrations"
}

output "migrations_lock" {
  value = data.s3lock_lease.migrations.held ? "held by ${data.s3lock_lease.migrations.holder} until ${data.s3lock_lease.migrations.expires_at} (epoch ${data.s3lock_lease.migrations.epoch})" : "free"
}

# Who waits for it, in the order they will be served.
output "migrations_queue" {
  value = [for w in data.s3lock_lease.migrations.waiters : "${w.position}. ${w.holder} (${w.order}, since ${w.joined_at})"]
}
