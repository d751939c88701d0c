#!/usr/bin/env bash
# The s3lock GitHub Action's step (action.yml): holds a lock in an S3
# bucket the way the mode input says.
#
#   run      runs the command input under the lock (s3lock run): the lock
#            is held, and renewed, while the command runs, and released
#            when it ends; the command gets S3LOCK_EPOCH, the fencing token.
#   acquire  takes the lock for the following steps of the job (s3lock
#            acquire): the lease token goes into S3LOCK_TOKEN for them, as a
#            masked secret; a later step with mode release frees it.
#   release  frees the lock acquire took (s3lock release of S3LOCK_TOKEN).
#
# The epoch output is the lease's epoch (run, acquire). Inputs come as
# INPUT_* variables; GitHub's files GITHUB_OUTPUT and GITHUB_ENV take the
# results.
set -euo pipefail

fail() { echo "::error title=s3lock::$*" >&2; exit 2; }

: "${GITHUB_OUTPUT:?not run by GitHub Actions: GITHUB_OUTPUT is not set}"
args=()
[[ -n ${INPUT_BUCKET:-} ]] && args+=(--bucket "$INPUT_BUCKET")
[[ -n ${INPUT_LEASE:-} ]] && args+=(--lease "$INPUT_LEASE")
wait_args=()
[[ -n ${INPUT_ORDER:-} ]] && wait_args+=(--order "$INPUT_ORDER")
[[ -n ${INPUT_WAIT:-} ]] && wait_args+=(--wait "$INPUT_WAIT")
# Who holds the lock, as s3lock status and waiting jobs show it.
export S3LOCK_HOLDER="${S3LOCK_HOLDER:-${GITHUB_REPOSITORY:-repository} run ${GITHUB_RUN_ID:-?} attempt ${GITHUB_RUN_ATTEMPT:-1} job ${GITHUB_JOB:-?}}"

case ${INPUT_MODE:-run} in
run)
	[[ -n ${INPUT_LOCK:-} ]] || fail "the lock input is required"
	[[ -n ${INPUT_COMMAND:-} ]] || fail "mode run needs the command input: what to run under the lock"
	export INPUT_COMMAND
	# The command runs with bash -eo pipefail, as a run step does.
	exec s3lock run "${args[@]}" "${wait_args[@]}" "$INPUT_LOCK" -- \
		bash -c 'echo "epoch=$S3LOCK_EPOCH" >>"$GITHUB_OUTPUT" && exec bash -eo pipefail -c "$INPUT_COMMAND"'
	;;
acquire)
	[[ -n ${INPUT_LOCK:-} ]] || fail "the lock input is required"
	: "${GITHUB_ENV:?not run by GitHub Actions: GITHUB_ENV is not set}"
	token=$(s3lock acquire "${args[@]}" "${wait_args[@]}" "$INPUT_LOCK")
	# The token releases (and renews) the lease: keep it out of the logs.
	echo "::add-mask::$token"
	echo "S3LOCK_TOKEN=$token" >>"$GITHUB_ENV"
	epoch=$(sed -n 's/.*"epoch":\([0-9]*\).*/\1/p' <<<"$token")
	echo "epoch=$epoch" >>"$GITHUB_OUTPUT"
	echo "s3lock: holding $INPUT_LOCK, epoch $epoch, for the following steps (release it with mode: release)"
	;;
release)
	[[ -n ${S3LOCK_TOKEN:-} ]] || fail "mode release frees the lease an earlier step with mode acquire took, but S3LOCK_TOKEN is not set"
	exec s3lock release
	;;
*)
	fail "mode is '$INPUT_MODE'; want run, acquire or release"
	;;
esac
