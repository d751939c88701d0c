#!/usr/bin/env bash
# Installs a pinned s3lock CLI from its release, for CI jobs (the GitHub
# Action in action.yml and the GitLab CI template in gitlab/ run it): it
# downloads the archive for this machine's OS and architecture and the
# release's SHA256SUMS, refuses an archive whose SHA-256 is not the one
# listed, unpacks s3lock into a directory and prints that directory.
#
#   S3LOCK_VERSION       the release to install, like 0.1.0 (required)
#   S3LOCK_DOWNLOAD_URL  where its files are (default: the GitHub release)
#   S3LOCK_INSTALL_DIR   where s3lock goes (default: a directory per
#                        version under RUNNER_TEMP, else TMPDIR, else /tmp)
set -euo pipefail

fail() { echo "s3lock install: $*" >&2; exit 1; }

version=${S3LOCK_VERSION:-}
version=${version#v}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	fail "no version to install (got '${S3LOCK_VERSION:-}'): set the version input, or S3LOCK_VERSION, to a release like 0.1.0"
base=${S3LOCK_DOWNLOAD_URL:-https://github.com/s3lock/terraform-provider-s3lock/releases/download/v$version}
base=${base%/}

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
sums=s3lock_${version}_SHA256SUMS
dir=${S3LOCK_INSTALL_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/s3lock-$version}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$archive" "$sums"; do
	curl --fail --silent --show-error --location --retry 3 --output "$tmp/$f" "$base/$f" ||
		fail "downloading $base/$f failed (is $version released, and is S3LOCK_DOWNLOAD_URL right?)"
done
want=$(awk -v f="$archive" '$2 == f { print $1 }' "$tmp/$sums")
[[ -n $want ]] || fail "$sums does not list $archive"
if command -v sha256sum >/dev/null; then
	got=$(sha256sum "$tmp/$archive" | awk '{ print $1 }')
else
	got=$(shasum -a 256 "$tmp/$archive" | awk '{ print $1 }')
fi
[[ $got == "$want" ]] || fail "$archive has SHA-256 $got, but $sums lists $want: not installing it"

mkdir -p "$tmp/unpacked" "$dir"
if [[ $ext == zip ]]; then
	unzip -q "$tmp/$archive" -d "$tmp/unpacked"
else
	tar -xzf "$tmp/$archive" -C "$tmp/unpacked"
fi
cp "$tmp/unpacked/s3lock$exe" "$dir/s3lock$exe"
chmod 0755 "$dir/s3lock$exe"
echo "s3lock install: installed $("$dir/s3lock$exe" --version) into $dir" >&2
echo "$dir"
