#!/usr/bin/env bash
# The store matrix's tests (make test-stores, make test-stores-ci), on stores
# already built or installed (make stores; tools/stores/build.sh,
# tools/s3rver/install.sh):
#
#   tools/stores/test.sh STORE...   for each store (versitygw, minio, seaweedfs),
#                                   lab/compat's suite: the SDK suite twice on one
#                                   shared bucket, s3lock verify, the benchmarks;
#                                   then s3rver refused by Verify and s3lock verify,
#                                   and every store started and stopped
#
# GO names the go command (default go). STOREARGS adds flags to each suite,
# quoted as on a shell's command line (go -C lab run ./compat suite -h lists
# them: -runs 1 -benchtime 1x -record=false is CI's reduced pass).
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
eval "storeargs=(${STOREARGS:-})" || { echo "tools/stores/test.sh: $STOREARGS: not words a shell can read (quote a regexp with |: STOREARGS=\"-run 'A|B'\")" >&2; exit 2; }
[ $# -gt 0 ] || { sed -n '2,14s/^# \{0,1\}//p' "$0" >&2; exit 2; }

failed=
for store in "$@"; do
	"$GO" -C lab run ./compat suite -store "$store" "${storeargs[@]}" || failed="$failed $store"
done
echo "=== s3rver: refused by Verify and s3lock verify; every store starts and stops"
stores=$(IFS=,; echo "$*,s3rver")
S3LOCK_TEST_S3RVER=1 S3LOCK_TEST_STORES=$stores \
	"$GO" test -count=1 -run 'TestStore_|TestVerify_RefusesAStoreThatIgnoresConditionalWrites' ./internal/testkit/s3server/ ./cmd/s3lock/ ||
	failed="$failed s3rver"
if [ -n "$failed" ]; then
	echo "=== the store matrix failed on:$failed"
	exit 1
fi
echo "=== the store matrix passed"
