#!/usr/bin/env bash
# The part of make release that CI runs (make release-ci), so that it cannot
# rot: a snapshot release for linux/amd64 (the provider's zip, its manifest,
# the CLI's archive and image, SHA256SUMS), built twice, which must be the
# same bytes. The other systems' builds differ from it only in GOOS/GOARCH
# (make cross-vet builds those).
# GO names the go command (default go).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
release() { "$GO" -C tools/release run . -repo "$PWD" "$@"; }
a=$(release -out "$tmp/a" -targets linux/amd64)
b=$(release -out "$tmp/b" -targets linux/amd64 2>/dev/null)
(cd "$a" && ls -l && sha256sum -c --quiet ./*_SHA256SUMS)
if ! diff -r "$a" "$b"; then
	echo "make release-ci: two builds of one commit differ: the release is not reproducible"
	exit 1
fi
echo "=== release: two snapshot builds for linux/amd64 are the same bytes"
