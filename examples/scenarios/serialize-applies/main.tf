# Serialize concurrent applies of different root modules that change the same
# system. Every root module that touches the shared network takes the same
# lock with an ephemeral lease; whichever run comes second waits for the
# first to finish.
#
# Each Terraform run takes the lock for its own duration: `terraform plan`
# holds it while it plans, `terraform apply` holds it while it applies (a
# saved plan does not keep it in between). Terraform renews the lease while
# the run lasts and releases it when the run ends, also when the run fails.
# If the run is killed, the lease lapses after lease_duration.

terraform {
  required_version = ">= 1.10" # ephemeral resources

  required_providers {
    s3lock = {
      source = "s3lock/s3lock"
    }
  }
}

variable "lock_bucket" {
  type        = string
  description = "Bucket that holds the locks."
  default     = "acme-locks"
}

variable "root_module" {
  type        = string
  description = "Name of this root module, written into the lease for whoever waits for it."
  default     = "app-frontend"
}

provider "s3lock" {
  region = "eu-west-1"
}

ephemeral "s3lock_lease" "network" {
  bucket = var.lock_bucket
  name   = "shared/network"

  # How long another run waits if this one dies without releasing the lock.
  lease_duration = "2m"
  # How long this run waits for another to finish.
  wait_timeout = "20m"
  # Waiting runs of the different root modules take turns in the order they
  # queued (the default): each has its own changes to make.
  order = "fifo"

  metadata = {
    root_module = var.root_module
  }
}

# The changes that must not run concurrently with another root module's
# depend on the lease. Terraform opens the lease before them and closes it
# only after all of them are done.
resource "terraform_data" "route_table_entry" {
  input = {
    destination = "10.42.0.0/16"
    owner       = var.root_module
  }

  depends_on = [ephemeral.s3lock_lease.network]
}

resource "terraform_data" "firewall_rule" {
  input = {
    port  = 443
    owner = var.root_module
  }

  depends_on = [ephemeral.s3lock_lease.network]
}

# Modules can depend on the lease as a whole.
module "dns" {
  source = "./dns"
  owner  = var.root_module

  depends_on = [ephemeral.s3lock_lease.network]
}
