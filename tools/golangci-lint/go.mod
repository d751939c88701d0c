// Module golangci-lint pins the linter run by `make lint`, kept apart from the
// main module so its dependencies never reach SDK users.
module github.com/s3lock/terraform-provider-s3lock/tools/golangci-lint

go 1.26
