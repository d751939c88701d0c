# Credentials come from the standard AWS chain (environment, shared files,
# instance roles) unless set here.
provider "s3lock" {
  region = "eu-west-1"
}

# An S3-compatible store (MinIO, Ceph, versitygw, ...): the same settings as
# Terraform's S3 backend.
provider "s3lock" {
  alias = "minio"

  region                      = "us-east-1"
  endpoints                   = { s3 = "https://minio.example.com:9000" }
  use_path_style              = true
  skip_credentials_validation = true
  access_key                  = var.minio_access_key
  secret_key                  = var.minio_secret_key

  # Shown to whoever finds a lock held by this configuration.
  holder = "ci@${var.pipeline}"
}

# Locks in another account, through a role.
provider "s3lock" {
  alias = "shared"

  region                = "eu-west-1"
  expected_bucket_owner = "123456789012"

  assume_role = {
    role_arn     = "arn:aws:iam::123456789012:role/terraform-locks"
    session_name = "terraform"
  }
}

# A bucket whose policy denies unencrypted writes, in another account that
# must own the objects. For SSE-C instead, set AWS_SSE_CUSTOMER_KEY (the
# base64 of 32 bytes) and leave encrypt unset.
provider "s3lock" {
  alias = "encrypted"

  region     = "eu-west-1"
  encrypt    = true
  kms_key_id = "alias/terraform-locks"
  acl        = "bucket-owner-full-control"
}

variable "minio_access_key" {
  type = string
}

variable "minio_secret_key" {
  type      = string
  sensitive = true
}

variable "pipeline" {
  type    = string
  default = "local"
}
