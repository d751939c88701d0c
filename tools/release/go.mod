// Module release builds s3lock's release artifacts (make release): the
// provider's Terraform Registry zips, SHA256SUMS, the registry manifest and
// their signatures, and the CLI's archives. It is a module of its own, with
// nothing but the standard library, so that building a release never
// changes what the main module requires.
module github.com/s3lock/terraform-provider-s3lock/tools/release

go 1.26
