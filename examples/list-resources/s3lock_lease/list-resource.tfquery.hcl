# The leases held under pipeline/, e.g. taken by earlier pipeline steps or the
# s3lock CLI. `terraform query` lists them; with -generate-config-out it
# writes a resource block and an import block (by identity) for each:
#
#   terraform query -generate-config-out=imports.tf
#   terraform apply   # imports them, changing nothing
list "s3lock_lease" "pipeline" {
  provider = s3lock

  # Show each lease's attributes too (-generate-config-out fetches them
  # anyway, for the resource blocks it writes).
  include_resource = true

  config {
    bucket = "acme-locks"
    prefix = "pipeline/"
  }
}
