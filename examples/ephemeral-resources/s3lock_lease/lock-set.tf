# A change that touches the network and the database holds both locks for
# the whole run, all or none. Another run that takes them in the other order
# (or `s3lock run db/prod net/prod -- ...`) waits for this one, never in a
# cycle: every lock set takes its locks in one order, the names sorted.
ephemeral "s3lock_lease" "network_and_db" {
  bucket       = "acme-locks"
  names        = ["net/prod", "db/prod"]
  wait_timeout = "15m"
}

resource "terraform_data" "migrate" {
  provisioner "local-exec" {
    # Each lock's epoch fences the writes to what it guards.
    command = "./migrate.sh --fence \"$FENCES\""
    environment = {
      FENCES = join(",", [for l in ephemeral.s3lock_lease.network_and_db.leases : "${l.name}=${l.epoch}"])
    }
  }

  depends_on = [ephemeral.s3lock_lease.network_and_db]
}
