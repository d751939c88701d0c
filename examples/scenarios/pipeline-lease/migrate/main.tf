# A middle step of the pipeline: refuses to run unless the pipeline still
# holds the lock with the epoch step 1 acquired.

terraform {
  required_providers {
    s3lock = {
      source = "s3lock/s3lock"
    }
  }
}

variable "lock_bucket" {
  type    = string
  default = "acme-locks"
}

variable "epoch" {
  type        = number
  description = "The epoch step 1 acquired (terraform -chdir=lock output -raw epoch)."
}

provider "s3lock" {
  region = "eu-west-1"
}

data "s3lock_lease" "migrations" {
  bucket = var.lock_bucket
  name   = "db/migrations"

  lifecycle {
    postcondition {
      condition     = self.held && self.epoch == var.epoch
      error_message = "The lock db/migrations is no longer held by this pipeline (epoch ${var.epoch}): it is at epoch ${self.epoch}, held: ${self.held}, holder: ${coalesce(self.holder, "none")}."
    }
  }
}

# The work that needs the lock. The epoch travels with it, so the database
# can refuse changes from an older holder.
resource "terraform_data" "schema_migration" {
  input = {
    version = "2024-06-01-add-orders-index"
    epoch   = data.s3lock_lease.migrations.epoch
  }
}
