#!/usr/bin/env bash
# Installs a pinned s3lock CLI from its release, for CI jobs (the GitHub
# Action in action.yml and the GitLab CI template in gitlab/ run it): it
# downloads the archive for this machine's OS and architecture, refuses it
# unless its SHA-256 is the one pinned for that version in checksums.txt
# beside this script (the copy at the ref the action or the template is
# pinned to, written when the release was made) or given in S3LOCK_SHA256,
# unpacks s3lock into a new directory only this user may write, and
# prints that directory. A failed install leaves nothing behind.
#
# An s3lock already on PATH is used instead only if no one else can
# change it: the file (symbolic links followed) is named s3lock, is this
# user's or root's and not writable by group or others, so is the
# directory it is in, and each directory above that is this user's or
# root's and not writable by others unless sticky (/tmp); and it is the
# binary pinned for the version. The directory printed is then that real
# directory. Else the release is installed afresh.
#
#   S3LOCK_VERSION       the release to install, like 0.1.0 (required)
#   S3LOCK_SHA256        the SHA-256 of the release's archive for this
#                        machine, for a version checksums.txt does not pin
#                        (take it from the release's signed SHA256SUMS)
#   S3LOCK_CHECKSUMS     the pins (default: checksums.txt beside this script)
#   S3LOCK_DOWNLOAD_URL  where its files are (default: the GitHub release)
#   S3LOCK_INSTALL_DIR   where s3lock goes: a directory of this user's that
#                        no one else may write, nor rename (the directories
#                        above it as for an s3lock on PATH), not a symbolic
#                        link, made if missing (default: a new one, mktemp
#                        -d, under RUNNER_TEMP, else TMPDIR, else /tmp: the
#                        runner's own temporary directory, not checked)
#
# SHA-256s are hex in either case.
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
# system, in lower case (nothing if they give none).
pinned() {
	[[ -r $pins ]] || return 0
	awk -v v="$version" -v p="$os/$arch" -v f="$1" '$1 == v && $2 == p && $4 == f { print tolower($3); exit }' "$pins"
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

# Where s3lock goes, or is: checked before it is trusted.

# mode PATH prints PATH's mode, as ls shows it.
mode() { ls -ld -- "$1" | awk '{ print $1 }'; }
# ours PATH says whether PATH is this user's or root's (root may change
# any file anyway).
ours() { [[ -O $1 || -n $(find "$1" -prune -user 0) ]]; }
# private PATH says whether no one but its owner may write PATH.
private() { [[ -z $(find "$1" -prune \( -perm -020 -o -perm -002 \)) ]]; }
# physical DIR prints DIR with no symbolic link in it.
physical() { (cd -P -- "$1" && pwd -P); }
# unsafe_above DIR prints why someone else could rename DIR, or a
# directory above it, and put another in its place (nothing if no one
# can): each must be this user's or root's, and not writable by group or
# others unless sticky. DIR has no symbolic link in it.
unsafe_above() {
	local d=$1
	while [[ $d != / ]]; do
		d=$(dirname -- "$d")
		ours "$d" || { echo "$d, above it, belongs to another user"; return; }
		[[ -z $(find "$d" -prune \( -perm -020 -o -perm -002 \) ! -perm -1000) ]] ||
			{ echo "$d, above it, may be written by other users and is not sticky (mode $(mode "$d"))"; return; }
	done
}
# resolve FILE prints FILE with its symbolic links followed.
resolve() {
	local f=$1 to d n=0
	while [[ -L $f ]]; do
		((++n <= 40)) || return 1
		to=$(readlink -- "$f") || return 1
		[[ $to == /* ]] || to=$(dirname -- "$f")/$to
		f=$to
	done
	[[ -f $f ]] || return 1
	d=$(physical "$(dirname -- "$f")") || return 1
	printf '%s/%s\n' "${d%/}" "$(basename -- "$f")"
}
# unsafe_bin FILE prints why the s3lock at FILE (no symbolic link) could
# be changed by someone else (nothing if it could not).
unsafe_bin() {
	local dir why
	dir=$(dirname -- "$1")
	[[ $(basename -- "$1") == "s3lock$exe" ]] || { echo "it is named $(basename -- "$1"), not s3lock$exe"; return; }
	ours "$1" || { echo "it belongs to another user"; return; }
	private "$1" || { echo "others may write it (mode $(mode "$1"))"; return; }
	ours "$dir" || { echo "$dir belongs to another user"; return; }
	private "$dir" || { echo "others may write $dir (mode $(mode "$dir"))"; return; }
	why=$(unsafe_above "$dir")
	[[ -z $why ]] || echo "$why"
}

# An s3lock on PATH (installed by an earlier step, or in the runner's
# image) is used only if no one else can change it and it is the binary
# the pins name: checked in that order, so that it cannot change between
# its check and its use.
if bin=$(command -v "s3lock$exe") && [[ $bin == /* ]]; then
	bin_want=$(pinned "s3lock$exe")
	if [[ -n $bin_want ]]; then
		if ! real=$(resolve "$bin"); then
			why="it is not a file"
		else
			why=$(unsafe_bin "$real")
		fi
		if [[ -n $why ]]; then
			echo "s3lock install: not using $bin, on PATH: $why; installing s3lock $version" >&2
		elif [[ $(sha256 "$real") == "$bin_want" ]]; then
			echo "s3lock install: $bin is s3lock $version as pinned; using it" >&2
			dirname -- "$real"
			exit 0
		else
			echo "s3lock install: $bin, on PATH, is not s3lock $version as pinned; installing it" >&2
		fi
	fi
fi

tmproot=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
made= # a directory this run made, removed if it fails
installed=
cleanup() {
	[[ -z ${tmp:-} ]] || rm -rf -- "$tmp"
	[[ -n $installed || -z $made ]] || rm -rf -- "$made"
}
trap cleanup EXIT

if [[ -n ${S3LOCK_INSTALL_DIR:-} ]]; then
	dir=$S3LOCK_INSTALL_DIR
	[[ $dir == /* ]] || dir=$PWD/$dir
	# dir/ is a symbolic link's target, not the link: not dir.
	while [[ $dir == */ && $dir != / ]]; do dir=${dir%/}; done
	if ! [[ -e $dir || -L $dir ]]; then
		mkdir -m 0700 -- "$dir" || fail "cannot make S3LOCK_INSTALL_DIR $dir"
		made=$dir
	fi
	# Another user's directory, one others may write, or one below a
	# directory others may write (and so rename), could have s3lock
	# swapped for their own between this install and its use.
	[[ -d $dir && ! -L $dir ]] || fail "S3LOCK_INSTALL_DIR $dir is not a directory (or is a symbolic link)"
	dir=$(physical "$dir") || fail "cannot enter S3LOCK_INSTALL_DIR $dir"
	[[ -O $dir ]] || fail "S3LOCK_INSTALL_DIR $dir belongs to another user: not installing s3lock into it"
	private "$dir" || fail "S3LOCK_INSTALL_DIR $dir may be written by other users (mode $(mode "$dir")): not installing s3lock into it"
	why=$(unsafe_above "$dir")
	[[ -z $why ]] || fail "S3LOCK_INSTALL_DIR $dir: $why, so others could put another directory in its place: not installing s3lock into it"
fi

tmp=$(mktemp -d "$tmproot/s3lock-download.XXXXXXXX") || fail "cannot make a directory under $tmproot"
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
if [[ -z ${S3LOCK_INSTALL_DIR:-} ]]; then
	dir=$(mktemp -d "$tmproot/s3lock.XXXXXXXX") || fail "cannot make a directory under $tmproot"
	made=$dir
fi
cp "$tmp/unpacked/s3lock$exe" "$dir/s3lock$exe"
chmod 0755 "$dir/s3lock$exe"
version_line=$("$dir/s3lock$exe" --version) || fail "the s3lock installed into $dir does not run"
installed=1
echo "s3lock install: installed $version_line into $dir" >&2
echo "$dir"
