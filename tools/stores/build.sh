#!/usr/bin/env bash
# Builds the S3-compatible stores of the store matrix (make test-stores) from
# the Go module proxy, once per machine: each binary is cached outside the
# repository by version, and a second call only prints its path.
#
#   tools/stores/build.sh minio       -> prints the MinIO server's path
#   tools/stores/build.sh seaweedfs   -> prints the weed binary's path
#   tools/stores/build.sh version minio -> prints the pinned version
#
# The pinned module versions are in versions.txt. A module with replace
# directives (SeaweedFS) cannot be built from the read-only module cache, so
# it is built from a writable copy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${S3LOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/s3lock-tools}"

# pinned NAME prints "MODULE VERSION PACKAGE" from versions.txt.
pinned() {
	local line
	line=$(awk -v n="$1" '$1 == n { print $2, $3, $4 }' "$here/versions.txt")
	if [[ -z $line ]]; then
		echo "build.sh: unknown store $1 (one of: $(awk '!/^#/ && NF { printf "%s ", $1 }' "$here/versions.txt"))" >&2
		return 2
	fi
	echo "$line"
}

build() { # build NAME: prints the binary's path
	local name=$1 module version pkg out dir src
	read -r module version pkg < <(pinned "$name") || return 2
	[[ -n ${module:-} ]] || return 2
	out="$cache/$name-$version/$name"
	if [[ -x $out ]]; then
		echo "$out"
		return
	fi
	echo "build.sh: building $name $version from the Go module proxy (minutes, once per machine) into $out" >&2
	dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ -z $dir ]]; then
		echo "build.sh: go mod download $module@$version gave no module directory" >&2
		return 1
	fi
	mkdir -p "$(dirname "$out")"
	if grep -q '^replace' "$dir/go.mod"; then
		src=$(mktemp -d "${TMPDIR:-/tmp}/s3lock-$name.XXXXXX")
		# Remove the source copy however the build ends.
		trap 'if [[ -n ${src:-} ]]; then chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"; fi' RETURN EXIT
		cp -r "$dir/." "$src"
		chmod -R u+w "$src"
		dir=$src
	fi
	(cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$pkg")
	mv "$out.tmp" "$out"
	echo "$out"
}

case ${1:-} in
version)
	[[ $# -eq 2 ]] || { echo "usage: build.sh version NAME" >&2; exit 2; }
	read -r _ version _ < <(pinned "$2") || exit 2
	echo "$version"
	;;
"" | -*)
	echo "usage: build.sh NAME | version NAME (NAME: minio, seaweedfs)" >&2
	exit 2
	;;
*)
	[[ $# -eq 1 ]] || { echo "usage: build.sh NAME | version NAME" >&2; exit 2; }
	build "$1"
	;;
esac
