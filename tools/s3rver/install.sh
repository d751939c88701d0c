#!/usr/bin/env bash
# Installs s3rver (pinned in package.json and package-lock.json here) from the
# npm registry with `npm ci`, once per machine, into the tools cache, and
# prints the path of its entry point (run it with node). A second call only
# prints the path.
#
# s3rver is an S3 emulator that accepts If-None-Match and If-Match and
# ignores them: the store s3lock's Verify and `s3lock verify` must refuse.
#
#   tools/s3rver/install.sh              -> installs if needed, prints the path
#   tools/s3rver/install.sh --installed  -> prints the path only if installed
#
# Exit status 3 means s3rver cannot be had on this machine (node or npm is
# missing, the npm registry cannot be reached, or --installed and it is not
# installed yet), as opposed to 1 for a failed install; the message says
# which.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${S3LOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/s3lock-tools}"

version=$(sed -n 's/^[[:space:]]*"s3rver": "\(.*\)"$/\1/p' "$here/package.json")
lock=$(sha256sum "$here/package-lock.json" | cut -c1-12)
dest="$cache/s3rver-$version-$lock"
entry="$dest/node_modules/s3rver/bin/s3rver.js"
if [[ -f $entry ]]; then
	echo "$entry"
	exit 0
fi
if [[ ${1:-} == --installed ]]; then
	echo "install.sh: s3rver $version is not installed yet (make stores installs it from the npm registry, once)" >&2
	exit 3
fi
for tool in node npm; do
	if ! command -v "$tool" >/dev/null; then
		echo "install.sh: $tool is not installed, so s3rver cannot run here (install Node.js 18 or later)" >&2
		exit 3
	fi
done
registry=$(npm config get registry 2>/dev/null || echo "the npm registry")
echo "install.sh: installing s3rver $version from $registry with npm ci (once per machine) into $dest" >&2
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.s3rver-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$tmp/"
if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
	if ! npm ping --fetch-timeout=10000 --fetch-retries=0 >/dev/null 2>&1; then
		echo "install.sh: the npm registry ($registry) is unreachable from this machine, so s3rver $version cannot be installed; the s3rver checks need it once (then it is cached in $cache)" >&2
		exit 3
	fi
	echo "install.sh: npm ci of s3rver $version failed (the registry answers; see npm's output above)" >&2
	exit 1
fi
if [[ ! -f $tmp/node_modules/s3rver/bin/s3rver.js ]]; then
	echo "install.sh: npm ci did not install node_modules/s3rver/bin/s3rver.js" >&2
	exit 1
fi
# Another install may have finished meanwhile; either copy is complete.
mv -T "$tmp" "$dest" 2>/dev/null || true
echo "$entry"
