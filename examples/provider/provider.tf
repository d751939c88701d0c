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

# CI without static keys: the runner's OIDC token is exchanged for a role's
# credentials (AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE work too).
provider "s3lock" {
  alias = "ci"

  region = "eu-west-1"

  assume_role_with_web_identity = {
    role_arn                = "arn:aws:iam::123456789012:role/ci-locks"
    web_identity_token_file = "/var/run/secrets/ci/token"
    session_name            = "pipeline"
  }
}

# A private store with a certificate of the company's CA, reached through
# the company's proxy.
provider "s3lock" {
  alias = "private"

  region                      = "us-east-1"
  endpoints                   = { s3 = "https://s3.internal.example.com" }
  use_path_style              = true
  skip_credentials_validation = true
  custom_ca_bundle            = "/etc/ssl/company-ca.pem"
  https_proxy                 = "http://proxy.internal.example.com:3128"
  no_proxy                    = ".svc.cluster.local"
  skip_s3_checksum            = true
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
