# The scenario `make demo` runs: a deployment step that must never run twice
# at once, guarded by an ephemeral lease. Start this root module in several
# working directories at the same moment; each apply waits for the lock,
# runs the step, and releases the lock when the run ends.
#
# It talks to any S3 endpoint; the demo points it at a local versitygw.

terraform {
  required_version = ">= 1.10" # ephemeral resources

  required_providers {
    s3lock = {
      source = "s3lock/s3lock"
    }
  }
}

variable "endpoint" {
  type        = string
  description = "S3 endpoint URL, e.g. http://127.0.0.1:7070."
}

variable "bucket" {
  type        = string
  description = "Bucket that holds the locks."
}

variable "access_key" {
  type        = string
  description = "Access key for the endpoint."
}

variable "secret_key" {
  type        = string
  description = "Secret key for the endpoint."
  sensitive   = true
}

variable "lock_name" {
  type        = string
  description = "The lock every participant takes."
  default     = "demo/deploy"
}

variable "who" {
  type        = string
  description = "Name of this run, written into the lease and the timeline."
}

variable "step_command" {
  type        = string
  description = "The guarded step: a command that gets the lease's epoch in S3LOCK_EPOCH."
}

provider "s3lock" {
  region                      = "us-east-1"
  access_key                  = var.access_key
  secret_key                  = var.secret_key
  endpoints                   = { s3 = var.endpoint }
  use_path_style              = true
  skip_credentials_validation = true
  holder                      = var.who
}

ephemeral "s3lock_lease" "deploy" {
  bucket         = var.bucket
  name           = var.lock_name
  lease_duration = "30s"
  wait_timeout   = "5m"

  metadata = {
    run = var.who
  }
}

# The guarded step runs on every apply (its trigger is always new) while the
# run holds the lease.
resource "terraform_data" "guarded_step" {
  triggers_replace = [timestamp()]

  provisioner "local-exec" {
    command = var.step_command
    environment = {
      S3LOCK_EPOCH = ephemeral.s3lock_lease.deploy.epoch
      S3LOCK_WHO   = var.who
    }
  }

  depends_on = [ephemeral.s3lock_lease.deploy]
}

output "lock" {
  description = "The lock this run took."
  value       = var.lock_name
}
