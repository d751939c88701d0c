# Up to four runs load-test the shared staging database at once, each with
# its own test account: one of the lock's four slots, held for the run.
ephemeral "s3lock_lease" "load_test" {
  bucket       = "acme-locks"
  name         = "staging/load-test"
  slots        = 4
  wait_timeout = "30m"
}

resource "terraform_data" "load_test" {
  provisioner "local-exec" {
    command = "./load-test.sh --account \"loadtest-$SLOT\""
    environment = {
      SLOT = ephemeral.s3lock_lease.load_test.slot
    }
  }

  depends_on = [ephemeral.s3lock_lease.load_test]
}
