#!/usr/bin/env bash
# What make test runs, and in which order on two cores (.ci/run runs make test).
#
#   tools/test.sh all               make test: every test of the main module and of
#                                   the lab's (lab/, a module of its own)
#   tools/test.sh cli NAME-VERSION  make testcli-NAME-VERSION: the tests that run a real
#                                   CLI, on one pinned in tools/tfmatrix/versions.txt
#                                   (built if needed: tools/tfmatrix/build.sh)
#   tools/test.sh cli path          the same on the terraform on PATH (TF_ACC_TERRAFORM_PATH)
#   tools/test.sh directory         make test-directory: the SDK's suite as on an S3
#                                   directory bucket (PROTOCOL.md §8)
#
# GO names the go command (default go). TESTARGS adds go test flags to every
# pass, quoted as on a shell's command line: TESTARGS="-run 'TestA|TestB'".
# TESTCLI_PKGS (main module) and TESTCLI_LAB_PKGS (lab) replace the packages a
# pinned CLI runs: TESTCLI_PKGS=./internal/provider runs only the acceptance tests.
#
# make test is three jobs at once. The CLI passes run one after another and
# keep both cores busy with terraform processes; alongside them, from the
# start, the SDK under the race detector followed by the packages that run no
# terraform, and the SDK's suite on the directory bucket emulation: they wait
# on timers and processes more than they compute. Their output follows the
# CLI passes'. The time this takes is CI's budget (CONTRIBUTING.md).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
eval "testargs=(${TESTARGS:-})" || { echo "tools/test.sh: $TESTARGS: not words a shell can read (quote a regexp with |: TESTARGS=\"-run 'A|B'\")" >&2; exit 2; }

# The packages that run the provider under a real CLI (the acceptance tests,
# the root package's tests of the built provider, the end-to-end tests): the
# main module's and the lab's. Every CLI of the matrix runs them; a version
# marked e2e in versions.txt only the root and end-to-end ones.
cli_pkgs=". ./internal/provider"
lab_cli_pkgs="./e2e"

# cli runs the CLI packages on one CLI: the main module's one test binary
# after another (-p 1) beside the lab's, two binaries at a time as one go test
# of them all would on two cores (three terraform-heavy binaries at once made
# each far slower). The lab's output follows.
cli() (
	local which=$1 bin host= pkgs=$cli_pkgs labpkgs=$lab_cli_pkgs start=$SECONDS rc=0 labout lab
	if [ "$which" = path ]; then
		bin=${TF_ACC_TERRAFORM_PATH:-$(command -v terraform)}
		export TF_ACC=1
	else
		local name=${which%%-*} version=${which#*-}
		bin=$(tools/tfmatrix/build.sh "$name" "$version") || return 1
		case $name in tofu) host=registry.opentofu.org ;; *) host=registry.terraform.io ;; esac
		case " $(sed -n "s/^$name $version[[:space:]]*//p" tools/tfmatrix/versions.txt) " in
		*" e2e "*) pkgs="." labpkgs="./e2e" ;;
		esac
		if [ -n "${TESTCLI_PKGS:-}${TESTCLI_LAB_PKGS:-}" ]; then
			pkgs=${TESTCLI_PKGS:-} labpkgs=${TESTCLI_LAB_PKGS:-}
		fi
		export TF_ACC=1 TF_ACC_TERRAFORM_PATH=$bin TF_ACC_PROVIDER_HOST=$host
	fi
	echo "=== $pkgs and lab/ $labpkgs on $(TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 "$bin" version | grep -m1 -E '^(Terraform|OpenTofu) v') ($bin)"
	labout=$(mktemp)
	{ [ -z "$labpkgs" ] || "$GO" -C lab test -count=1 -timeout 30m "${testargs[@]}" $labpkgs; } >"$labout" 2>&1 &
	lab=$!
	[ -z "$pkgs" ] || "$GO" test $([ -z "$labpkgs" ] || echo -p 1) -count=1 -timeout 30m "${testargs[@]}" $pkgs || rc=1
	wait $lab || rc=1
	cat "$labout"
	rm -f "$labout"
	echo "=== $([ "$which" = path ] && echo "terraform on PATH" || echo "$which"): $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - start))s"
	return $rc
)

# directory runs the SDK's suite with every namespace a bucket named
# BASE--use1-az4--x-s3, reached through s3test.DirectoryBuckets in front of
# versitygw; not under the race detector (the first pass is), to keep the budget.
directory() {
	S3LOCK_TEST_DIRECTORY_BUCKETS=1 "$GO" test -count=1 -timeout 30m "${testargs[@]}" ./s3lock/
}

# others lists the packages of the module in $1 but those named after it.
others() {
	local dir=$1 p leave=()
	shift
	for p in "$@"; do leave+=(-e "$("$GO" -C "$dir" list "$p")"); done
	"$GO" -C "$dir" list ./... | grep -vxF "${leave[@]}"
}

# without_terraform runs the SDK under the race detector, the OpenTelemetry
# adapter (its own module, so that SDK users never fetch OpenTelemetry), then
# the packages that run no terraform: the main module's, then the lab's.
without_terraform() {
	"$GO" test -count=1 -race -timeout 30m "${testargs[@]}" ./s3lock/ &&
		"$GO" -C s3lockotel test -count=1 -race -timeout 10m "${testargs[@]}" ./... &&
		"$GO" test -count=1 -timeout 30m "${testargs[@]}" $(others . ./s3lock $cli_pkgs) &&
		"$GO" -C lab test -count=1 -timeout 30m "${testargs[@]}" $(others lab $lab_cli_pkgs)
}

all() {
	local side dir failed= which
	sidelog=$(mktemp) # not local: the trap reads them at exit
	dirlog=$(mktemp)
	trap 'rm -f "$sidelog" "$dirlog"' EXIT
	directory >"$dirlog" 2>&1 &
	dir=$!
	without_terraform >"$sidelog" 2>&1 &
	side=$!
	cli path || failed=" terraform-on-PATH"
	# The pinned CLIs but those marked manual: terraform-1.16.0 tofu-1.12.6.
	for which in $(sed -n '/ manual/d; s/^\(terraform\|tofu\) \([^ ]*\).*$/\1-\2/p' tools/tfmatrix/versions.txt); do
		cli "$which" || failed="$failed $which"
	done
	echo "=== run alongside: the SDK (under the race detector), the OpenTelemetry adapter (its own module, so SDK users never fetch OpenTelemetry) and the packages that run no terraform (the main module's, then the lab's):"
	wait $side || failed="$failed SDK-and-packages-without-terraform"
	cat "$sidelog"
	echo "=== run alongside: the SDK again, as on an S3 directory bucket (the s3test.DirectoryBuckets emulation in front of versitygw):"
	wait $dir || failed="$failed SDK-on-the-directory-bucket-emulation"
	cat "$dirlog"
	if [ -n "$failed" ]; then
		echo "=== make test failed:$failed"
		return 1
	fi
	echo "=== make test passed"
}

case ${1:-} in
all) all ;;
cli) cli "${2:?tools/test.sh cli: name a CLI: path, or NAME-VERSION from tools/tfmatrix/versions.txt}" ;;
directory) directory ;;
*)
	sed -n '2,11s/^# \{0,1\}//p' "$0" >&2
	exit 2
	;;
esac
