#!/usr/bin/env bash
# make cross-vet: builds the provider and the CLI for the systems CI cannot
# run them on, and go vets what ships there, tests included: macOS on Apple
# silicon and Windows on x86-64 (the other architectures differ in no source
# file of ours). One go build of both binaries and one go vet per system: the
# second compiles nothing the first did not. Compiled without optimizations
# (-N -l): what is checked is that the code builds and vets there, and that
# compiles a quarter faster.
# GO names the go command (default go).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
# The packages that make up the provider and the CLI.
ship=(. ./cmd/s3lock/... ./internal/provider/... ./internal/runguard/... ./internal/procfacts/... ./internal/runenv/... ./internal/awsclient/... ./s3lock)
flags="-gcflags=all=-N -l"
for target in darwin/arm64 windows/amd64; do
	export GOOS=${target%/*} GOARCH=${target#*/}
	echo "=== GOOS=$GOOS GOARCH=$GOARCH: build and vet the provider and the CLI"
	"$GO" build "$flags" -o /dev/null . ./cmd/s3lock
	"$GO" vet "$flags" "${ship[@]}"
done
