#!/usr/bin/env bash
# check.sh: model-check the s3lock protocol with Spin (`make model`).
#
# Four models: s3lock.pml (the lock, §5-§7), line.pml (ordered waiting,
# §13), slots.pml (slot locks, §14) and shared.pml (shared and exclusive
# leases, §17; its design: SHARED-DESIGN.md; line.pml -DSHARED checks the line with shared waiters). Each must verify with no errors over its whole state space; every
# mutant (the same file with one -D define removing one mechanism) and every
# boundary run (one timing constant a tick short) must yield a counterexample
# to the property it breaks, checked alone; every variant of line.pml (a
# mechanism that (f) turns out not to need, removed) must verify, and its
# claim CLAIM_ONE_HEAD (not a property of §13) must have a counterexample.
# Each run generates the verifier with `spin -a`, compiles it with gcc and
# runs ./pan in a temporary directory. One line per run, then each
# counterexample as the trail replay prints it. Exits non-zero if any run is
# not as expected.
#
# A check whose inputs did not change is not run again: the model files,
# this script, and the versions of spin and the C compiler are hashed, and
# the report of a check that came out as expected is kept under that hash
# in the tools cache ($S3LOCK_TOOLS_CACHE, or $XDG_CACHE_HOME/s3lock-tools,
# or ~/.cache/s3lock-tools), as go test keeps a test's result. A search of
# the whole state space over the same model, options and tools finds the
# same thing: the kept report is printed instead (with the hash), which
# saves a warm CI run five minutes of CPU. FORCE=1 checks anyway.
#
# Environment: CC (gcc), JOBS (runs at a time, 2), KEEP=1 keeps the
# temporary directory (and prints it; it checks, kept report or not),
# FORCE=1 ignores a kept report.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-gcc}
jobs=${JOBS:-2}

if ! command -v spin >/dev/null 2>&1; then
	echo "check.sh: spin is not installed. Install it with: apt-get install spin" >&2
	echo "  (or build it from https://github.com/nimble-code/Spin)" >&2
	exit 1
fi
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "check.sh: no C compiler ($cc); install one with: apt-get install gcc" >&2
	exit 1
fi

# The inputs' hash, and where a report of them is kept.
# Each file is hashed by name (sha256sum's lines), so that no edit can move
# text from one file to the next unseen. Without a hash (no sha256sum),
# nothing is kept or reused; KEEP=1 wants a work directory: it checks.
key=$( {
	(cd "$here" && sha256sum ./*.pml check.sh)
	spin -V 2>&1
	"$cc" --version 2>&1
	uname -m
} | sha256sum | cut -c1-16)
printf '%s' "$key" | grep -qE '^[0-9a-f]{16}$' || key=
kept="${S3LOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/s3lock-tools}/model/$key.report"
if [ -n "$key" ] && [ "${FORCE:-}" != 1 ] && [ "${KEEP:-}" != 1 ] && [ -s "$kept" ]; then
	echo "check.sh: the model files, check.sh, spin and $cc are as when they last checked out as expected (inputs $key, $(date -u -r "$kept" '+%Y-%m-%d %H:%M UTC')): that check's report follows; FORCE=1 checks again"
	cat "$kept"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/s3lock-model.XXXXXX")
if [ "${KEEP:-}" = 1 ]; then
	echo "check.sh: keeping $work"
else
	trap 'rm -rf "$work"' EXIT
fi

# model | name | expected: pass, or the property whose assertion must fail
# (a, b, c of s3lock.pml; f, h, and the claim one-head of line.pml; s1, s2
# of slots.pml; x, y of shared.pml) | gcc
# defines for pan | pan options | spin -D defines
#
# s3lock.pml's mutants search depth-first and then for shorter and shorter
# counterexamples (-i); line.pml's breadth-first (-DBFS), which stops at a
# shortest one, and whose few states make an unoptimised pan (-O0) quicker
# to build than to run. line.pml's runs are capped at 2 GB (-DMEMLIM; a run
# that hits the cap reports "out of memory"). Its variants check the smaller
# configuration of one ordered Acquire per waiter (-DACQUIRES=1).
# shared.pml's runs are capped at 6 GB; its mutants search breadth-first.
# It verifies twice: two readers and a writer over four epochs, and two
# readers and two writers over three (README.md lists the larger runs).
lm='-DMEMLIM=2048'
sm='-DMEMLIM=6000'
runs="s3lock|model|pass|||
s3lock|model NC=2 NE=5|pass|||-DNC=2 -DNE=5
line|model|pass|-DNOBOUNDCHECK $lm|-m3000000 -w25|
line|model SHARED|pass|$lm|-m3000000 -w24|-DSHARED -DACQUIRES=1
slots|model|pass||-w24|
slots|MUTANT_MARKER_LAPSES|s1||-w24|-DMUTANT_MARKER_LAPSES -DPROPERTY=1
slots|MUTANT_NO_MARKER|s1||-w24|-DMUTANT_NO_MARKER -DPROPERTY=1
slots|MUTANT_NO_N_CHECK|s2||-w24|-DMUTANT_NO_N_CHECK -DPROPERTY=2
slots|MUTANT_ABANDON_MARKER|s1||-w24|-DMUTANT_ABANDON_MARKER -DPROPERTY=1
s3lock|MUTANT_NO_LAPSE_CHECK|a||-i|-DMUTANT_NO_LAPSE_CHECK -DPROPERTY=1
s3lock|MUTANT_NO_READBACK|c||-i|-DMUTANT_NO_READBACK -DPROPERTY=3
s3lock|MUTANT_NO_RELIST|a||-i|-DMUTANT_NO_RELIST -DPROPERTY=1
s3lock|MUTANT_NO_RELIST|b||-i|-DMUTANT_NO_RELIST -DPROPERTY=2
s3lock|MUTANT_NO_CLEANUP_AGE|b||-i|-DMUTANT_NO_CLEANUP_AGE -DPROPERTY=2
s3lock|MUTANT_ABANDON_NO_CREATE|c||-i|-DMUTANT_ABANDON_NO_CREATE -DPROPERTY=3
s3lock|MUTANT_DIRECT_NO_LIST|a||-i|-DMUTANT_DIRECT_NO_LIST -DNC=2 -DNE=4 -DPROPERTY=1
s3lock|boundary MARGIN=0|a||-i|-DMARGIN=0 -DPROPERTY=1
s3lock|boundary SLACK=0 CA=2|a||-i|-DSLACK=0 -DCA=2 -DPROPERTY=1
line|MUTANT_NO_LINE_CHECK|f|-DBFS -O0 $lm|-w23|-DMUTANT_NO_LINE_CHECK -DPROPERTY=1
line|MUTANT_EARLY_LAPSE|f|-DBFS -O0 $lm|-w23|-DMUTANT_EARLY_LAPSE -DPROPERTY=1
line|MUTANT_NO_LIST_NUMBER|f|-DBFS -O0 $lm|-w23|-DMUTANT_NO_LIST_NUMBER -DPROPERTY=1
line|MUTANT_TRUST_FROM_ANSWER|f|-DBFS -O0 $lm|-w23|-DMUTANT_TRUST_FROM_ANSWER -DPROPERTY=1
line|MUTANT_TRUST_FROM_RESEND|f|-DBFS -O0 $lm|-w23|-DMUTANT_TRUST_FROM_RESEND -DMAXTRY=1 -DNT=2 -DNO_UNORDERED -DPROPERTY=1
line|MUTANT_NO_READBACK|f|-DBFS -O0 $lm|-w23|-DMUTANT_NO_READBACK -DPROPERTY=1
line|MUTANT_EARLY_DELETE|f|-DBFS -O0 $lm|-w23|-DMUTANT_EARLY_DELETE -DPROPERTY=1
line|MUTANT_NO_TURN|f|-DBFS -O0 $lm|-w23|-DMUTANT_NO_TURN -DPROPERTY=1
line|MUTANT_EARLY_LAPSE|h|-DBFS -O0 $lm|-w23|-DMUTANT_EARLY_LAPSE -DPROPERTY=2
line|boundary MARGIN=0|f|-DBFS -O0 $lm|-w23|-DMARGIN=0 -DPROPERTY=1
line|CLAIM_ONE_HEAD|one-head|-DBFS -O0 $lm|-w23|-DCLAIM_ONE_HEAD
line|MUTANT_SHARED_PASSES_WRITER|f|-DBFS -O0 $lm|-w23|-DSHARED -DMUTANT_SHARED_PASSES_WRITER -DPROPERTY=1
line|VARIANT_LIVE_NUMBER|pass|$lm|-m3000000 -w24|-DVARIANT_LIVE_NUMBER -DACQUIRES=1
line|VARIANT_NO_TIE_BREAK|pass|$lm|-m3000000 -w24|-DVARIANT_NO_TIE_BREAK -DACQUIRES=1
line|VARIANT_NO_LAPSE_DELETE|pass|$lm|-m3000000 -w24|-DVARIANT_NO_LAPSE_DELETE -DACQUIRES=1
shared|model|pass|$sm||
shared|model NW=2 NE=3|pass|$sm||-DNW=2 -DNE=3
shared|MUTANT_NO_RECHECK|x|-DBFS $sm||-DMUTANT_NO_RECHECK -DPROPERTY=1
shared|MUTANT_NO_RECHECK|y|-DBFS $sm||-DMUTANT_NO_RECHECK -DPROPERTY=2
shared|MUTANT_CHECK_BESIDE_CREATE|x|-DBFS $sm||-DMUTANT_CHECK_BESIDE_CREATE -DPROPERTY=1
shared|MUTANT_NO_SHARE_WAIT|x|-DBFS $sm||-DMUTANT_NO_SHARE_WAIT -DPROPERTY=1
shared|MUTANT_EARLY_SHARE_LAPSE|x|-DBFS $sm||-DMUTANT_EARLY_SHARE_LAPSE -DPROPERTY=1
shared|MUTANT_READERS_PASS_PENDING|y|-DBFS $sm||-DMUTANT_READERS_PASS_PENDING -DPROPERTY=2
shared|MUTANT_FREE_AS_TODAY|x|-DBFS $sm||-DMUTANT_FREE_AS_TODAY -DPROPERTY=1
shared|MUTANT_SHARES_OF_N_ONLY|x|-DBFS $sm||-DMUTANT_SHARES_OF_N_ONLY -DPROPERTY=1
shared|MUTANT_MARK_EARLY|x|-DBFS $sm||-DMUTANT_MARK_EARLY -DPROPERTY=1
shared|MUTANT_DELETE_LIVE_SHARES|x|-DBFS $sm||-DMUTANT_DELETE_LIVE_SHARES -DPROPERTY=1
shared|boundary MARGIN=0|x|-DBFS $sm||-DMARGIN=0 -DPROPERTY=1"

# The assertion text pan reports for each property.
assertion() {
	case $1 in
	a) echo 'trusted_leases<=1' ;;
	b) echo 'e>last_acquired' ;;
	c) echo '!(orphaned)' ;;
	f) echo 'overtaken==0' ;;
	h) echo 'jumped==0' ;;
	one-head) echo 'heads<=1' ;;
	s1) echo 'mixed==0' ;;
	s2) echo 'overfull==0' ;;
	x) echo 'overlap==0' ;;
	y) echo 'passed==0' ;;
	esac
}

now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }

# run N MODEL NAME EXPECT CCOPTS PANOPTS DEFINES: one run, in $work/N;
# writes $work/N/line (the report line) and $work/N/ok (if as expected).
run() {
	n=$1 model=$2 name=$3 expect=$4 ccopts=$5 panopts=$6 defines=$7
	file=$model.pml
	dir=$work/$n
	mkdir -p "$dir"
	cp "$here/$file" "$dir/$file"
	cd "$dir"
	start=$(now)
	result=
	# shellcheck disable=SC2086 # defines, ccopts and panopts are word lists
	if ! spin -a $defines "$file" >spin.out 2>&1; then
		result="spin -a failed: $(head -n 3 spin.out | tr '\n' ' ')"
	elif ! "$cc" -O2 -DSAFETY $ccopts -w -o pan pan.c >cc.out 2>&1; then
		result="gcc failed: $(head -n 3 cc.out | tr '\n' ' ')"
	else
		# Exhaustive search (no bitstate); -m: a depth the model never
		# reaches, so the search is complete; -w26: a 64M-slot hash table.
		# (A run's own options come after these and win.)
		./pan -m1000000 -w26 $panopts >pan.out 2>&1 || true
	fi
	secs=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	states=$(awk '/states, stored/ { print $1; exit }' pan.out 2>/dev/null || true)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out 2>/dev/null | head -n 1)
	ok=
	if [ -n "$result" ]; then
		:
	elif [ -z "$errors" ]; then
		result="no verdict: $(tail -n 2 pan.out | tr '\n' ' ')"
	elif grep -q 'max search depth too small' pan.out; then
		result="INCOMPLETE: max search depth too small (raise -m)"
	elif grep -q -e 'out of memory' -e 'MEMLIM bound' pan.out; then
		result="INCOMPLETE: out of memory"
	elif ! grep -q 'Full statespace search' pan.out; then
		result="INCOMPLETE: not a full state-space search"
	elif [ "$expect" = pass ]; then
		if [ "$errors" = 0 ] && grep -q 'Search not completed' pan.out; then
			result="INCOMPLETE: search not completed"
		elif [ "$errors" = 0 ]; then
			result="verified, errors: 0"
			ok=1
		else
			result="FAILED: errors: $errors ($(grep -m1 'assertion violated' pan.out || true))"
		fi
	else
		want=$(assertion "$expect")
		got=$(grep -m1 'assertion violated' pan.out || true)
		if [ "$errors" -ge 1 ] && [ -f "$file.trail" ] && [ "${got#*"$want"}" != "$got" ]; then
			result="counterexample to ($expect), errors: $errors"
			ok=1
		elif [ "$errors" -ge 1 ]; then
			result="FAILED: wanted ($expect) [$want], got: $got"
		else
			result="FAILED: no counterexample to ($expect), errors: 0"
		fi
	fi
	label="$file $name"
	[ "$expect" = pass ] || label="$label ($expect)"
	mem=$(awk '/total actual memory usage/ { printf "%d", $1; exit }' pan.out 2>/dev/null || true)
	printf '%-44s %10s states %6s MB  %-40s %6ss\n' "$label" "${states:-?}" "${mem:-?}" "$result" "$secs" >line
	if [ -n "$ok" ]; then
		: >ok
	fi
	if [ -n "$ok" ] && [ "$expect" != pass ]; then
		# The counterexample, one protocol step a line (the model's printf),
		# runs of ticks folded.
		echo "counterexample, $label: spin -T -t $defines $file" >trail
		# shellcheck disable=SC2086
		spin -T -t $defines "$file" 2>&1 |
			sed -n '/^#processes/q;p' |
			grep -v -e '^Starting ' -e '^[[:space:]]*$' -e '^spin: text of failed' -e 'is newer than' |
			awk '$0 == "tick" { t++; next }
			     { if (t) print "  " (t > 1 ? "tick x" t : "tick"); t = 0; print "  " $0 }' |
			awk '{ l[NR] = $0 }
			     END { if (NR <= 40) { for (i = 1; i <= NR; i++) print l[i]; exit }
			           for (i = 1; i <= 10; i++) print l[i]
			           print "  ... (" NR - 38 " steps left out)"
			           for (i = NR - 27; i <= NR; i++) print l[i] }' >>trail
	fi
}

echo "s3lock model check: spin $(spin -V 2>/dev/null | sed -n 's/^Spin Version \([^ ]*\).*/\1/p'), $jobs at a time"
n=0
running=0
while IFS='|' read -r model name expect ccopts panopts defines; do
	n=$((n + 1))
	(run "$n" "$model" "$name" "$expect" "$ccopts" "$panopts" "$defines") &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done <<EOF
$runs
EOF
wait

status=0
i=1
while [ "$i" -le "$n" ]; do
	[ -f "$work/$i/ok" ] || status=1
	i=$((i + 1))
done
# report prints the runs' lines, then their counterexamples.
report() {
	i=1
	while [ "$i" -le "$n" ]; do
		cat "$work/$i/line"
		i=$((i + 1))
	done
	i=1
	while [ "$i" -le "$n" ]; do
		if [ -f "$work/$i/trail" ]; then
			echo
			cat "$work/$i/trail"
		fi
		i=$((i + 1))
	done
	echo
}
report >"$work/report"
cat "$work/report"
if [ "$status" = 0 ]; then
	echo "check.sh: as expected: the four models and the variants verify; every mutant, boundary run and claim has its counterexample" | tee -a "$work/report"
	# Kept for the next check of the same inputs (see the top), through a
	# file of this run's own: two checks at once never mix their reports.
	if [ -n "$key" ] && mkdir -p "$(dirname "$kept")" && tmp=$(mktemp "$(dirname "$kept")/.report.XXXXXX") &&
		cp "$work/report" "$tmp"; then
		mv -f "$tmp" "$kept" || rm -f "$tmp"
	fi
else
	echo "check.sh: NOT as expected (lines without 'verified' or 'counterexample')" >&2
fi
exit "$status"
