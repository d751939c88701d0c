# The state of this root module lives in S3, under the key the s3 backend
# would use, locked by an s3lock lease and written fenced. Needs a Terraform
# with pluggable state storage (see the guide) and
# TF_ENABLE_PLUGGABLE_STATE_STORAGE=1.
terraform {
  required_providers {
    s3lock = { source = "s3lock/s3lock" }
  }

  state_store "s3lock_s3" {
    # The connection, credentials and encryption of the state objects.
    provider "s3lock" {
      region  = "eu-west-1"
      encrypt = true
    }

    bucket = "my-terraform-states"
    key    = "network/terraform.tfstate"

    # A run that dies leaves a lock that lapses after this (no force-unlock).
    lease_duration = "2m"
    # A second run waits this long for the first, in the order they came.
    wait_timeout = "15m"
    order        = "fifo"
  }
}

resource "terraform_data" "network" {
  input = "10.0.0.0/16"
}
