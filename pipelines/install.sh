#!/usr/bin/env bash
# Installs a pinned s3lock CLI from its release, for CI jobs (the GitHub
# Action in action.yml and the GitLab CI template in gitlab/ run it): it
# downloads the archive for this machine's OS and architecture, refuses it
# unless its SHA-256 is the one pinned for that version in checksums.txt
# beside this script (the copy at the ref the action or the template is
# pinned to, written when the release was made) or given in S3LOCK_SHA256,
# unpacks s3lock into a new directory only this user may write, and
# prints that directory. An s3lock already on PATH is used instead only if
# it is the pinned binary.
#
#   S3LOCK_VERSION       the release to install, like 0.1.0 (required)
#   S3LOCK_SHA256        the SHA-256 of the release's archive for this
#                        machine, for a version checksums.txt does not pin
#                        (take it from the release's signed SHA256SUMS)
#   S3LOCK_CHECKSUMS     the pins (default: checksums.txt beside this script)
#   S3LOCK_DOWNLOAD_URL  where its files are (default: the GitHub release)
#   S3LOCK_INSTALL_DIR   where s3lock goes: a directory of this user's that
#                        no one else may write, made if missing (default: a
#                        new one, mktemp -d, under RUNNER_TEMP, else TMPDIR,
#                        else /tmp)
set -euo pipefail

fail() { echo "s3lock install: $*" >&2; exit 1; }

version=${S3LOCK_VERSION:-}
version=${version#v}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	fail "no version to install (got '${S3LOCK_VERSION:-}'): set the version input, or S3LOCK_VERSION, to a release like 0.1.0"
base=${S3LOCK_DOWNLOAD_URL:-https://github.com/s3lock/terraform-provider-s3lock/releases/download/v$version}
base=${base%/}
pins=${S3LOCK_CHECKSUMS:-$(dirname "$0")/checksums.txt}

case $(uname -s) in
Linux) os=linux ;;
Darwin) os=darwin ;;
MINGW* | MSYS* | CYGWIN*) os=windows ;;
*) fail "no s3lock release for $(uname -s) (there are for Linux, macOS and Windows)" ;;
esac
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "no s3lock release for $(uname -m) (there are for amd64 and arm64)" ;;
esac
ext=tar.gz exe=
[[ $os == windows ]] && ext=zip exe=.exe
archive=s3lock_${version}_${os}_${arch}.$ext

# pinned FILE prints the SHA-256 the pins give FILE of this version and
# system (nothing if they give none).
pinned() {
	[[ -r $pins ]] || return 0
	awk -v v="$version" -v p="$os/$arch" -v f="$1" '$1 == v && $2 == p && $4 == f { print $3; exit }' "$pins"
}
sha256() {
	if command -v sha256sum >/dev/null; then
		sha256sum "$1" | awk '{ print $1 }'
	else
		shasum -a 256 "$1" | awk '{ print $1 }'
	fi
}

want=$(pinned "$archive")
given=$(tr 'A-F' 'a-f' <<<"${S3LOCK_SHA256:-}")
if [[ -n $given ]]; then
	[[ $given =~ ^[0-9a-f]{64}$ ]] || fail "S3LOCK_SHA256 (the sha256 input) is '$S3LOCK_SHA256', not a SHA-256 (64 hex digits)"
	[[ -z $want || $want == "$given" ]] ||
		fail "S3LOCK_SHA256 (the sha256 input) is $given, but $pins pins $want for $archive: not installing it"
	want=$given
fi
[[ -n $want ]] ||
	fail "$pins pins no SHA-256 for s3lock $version on $os/$arch, so its archive cannot be checked: use a ref of the action (or of the template) that pins it (the release's tag or a later commit), or give the SHA-256 of $archive as the sha256 input (S3LOCK_SHA256), from the release's signed SHA256SUMS"

# An s3lock on PATH (installed by an earlier step, or in the runner's
# image) is used only if it is the binary the pins name.
if bin=$(command -v "s3lock$exe"); then
	bin_want=$(pinned "s3lock$exe")
	if [[ -n $bin_want && $(sha256 "$bin") == "$bin_want" ]]; then
		echo "s3lock install: $bin is s3lock $version as pinned; using it" >&2
		dirname "$bin"
		exit 0
	fi
fi

tmproot=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
if [[ -n ${S3LOCK_INSTALL_DIR:-} ]]; then
	dir=$S3LOCK_INSTALL_DIR
	[[ -e $dir || -L $dir ]] || mkdir -m 0700 -- "$dir" || fail "cannot make S3LOCK_INSTALL_DIR $dir"
	# Another user's directory, or one others may write, could swap s3lock
	# for their own between this install and its use.
	[[ -d $dir && ! -L $dir ]] || fail "S3LOCK_INSTALL_DIR $dir is not a directory (or is a symbolic link)"
	[[ -O $dir ]] || fail "S3LOCK_INSTALL_DIR $dir belongs to another user: not installing s3lock into it"
	[[ -z $(find "$dir" -prune \( -perm -020 -o -perm -002 \)) ]] ||
		fail "S3LOCK_INSTALL_DIR $dir may be written by other users (mode $(ls -ld "$dir" | awk '{ print $1 }')): not installing s3lock into it"
else
	dir=$(mktemp -d "$tmproot/s3lock.XXXXXXXX") || fail "cannot make a directory under $tmproot"
fi

tmp=$(mktemp -d "$tmproot/s3lock-download.XXXXXXXX") || fail "cannot make a directory under $tmproot"
trap 'rm -rf "$tmp"' EXIT
curl --fail --silent --show-error --location --retry 3 --output "$tmp/$archive" "$base/$archive" ||
	fail "downloading $base/$archive failed (is $version released, and is S3LOCK_DOWNLOAD_URL right?)"
got=$(sha256 "$tmp/$archive")
[[ $got == "$want" ]] || fail "$archive has SHA-256 $got, but $want was expected (pinned in $pins, or given in S3LOCK_SHA256): not installing it"

mkdir "$tmp/unpacked"
if [[ $ext == zip ]]; then
	unzip -q "$tmp/$archive" -d "$tmp/unpacked"
else
	tar -xzf "$tmp/$archive" -C "$tmp/unpacked"
fi
cp "$tmp/unpacked/s3lock$exe" "$dir/s3lock$exe"
chmod 0755 "$dir/s3lock$exe"
echo "s3lock install: installed $("$dir/s3lock$exe" --version) into $dir" >&2
echo "$dir"
