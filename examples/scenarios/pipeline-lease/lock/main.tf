# Step 1 (and last step) of the pipeline: hold the lock "db/migrations" for
# the whole pipeline. `terraform apply` acquires it, `terraform destroy`
# releases it. Re-applying between long steps renews it.

terraform {
  required_providers {
    s3lock = {
      source = "s3lock/s3lock"
    }
  }

  # Keep this state where every step of *this pipeline run* can reach it,
  # and give each run its own state: a key or workspace named by the run
  # (e.g. `terraform workspace select -or-create "$CI_PIPELINE_ID"`). Two
  # runs sharing one state would share one lease, and the second would
  # replace the first's instead of waiting for it.
  # backend "s3" { ... }
}

variable "lock_bucket" {
  type    = string
  default = "acme-locks"
}

variable "pipeline_run" {
  type        = string
  description = "Identifier of the pipeline run, recorded in the lease."
}

provider "s3lock" {
  region = "eu-west-1"
  holder = "pipeline ${var.pipeline_run}"
}

resource "s3lock_lease" "migrations" {
  bucket = var.lock_bucket
  name   = "db/migrations"

  # The longest gap between two applies of this module. Nothing renews the
  # lease in between.
  lease_duration = "2h"
  # Re-applying within 90 minutes of the expiry renews the lease in place.
  renew_before = "90m"

  metadata = {
    pipeline_run = var.pipeline_run
  }

  # Pipelines that wait for the lock run their migrations in the order they
  # queued, which is release order (the default).
  order = "fifo"

  # Wait up to an hour for another pipeline to finish.
  timeouts {
    create = "1h"
  }
}

output "epoch" {
  description = "Fencing token of this pipeline's lease."
  value       = s3lock_lease.migrations.epoch
}

output "expires_at" {
  value = s3lock_lease.migrations.expires_at
}
