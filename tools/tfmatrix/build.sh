#!/usr/bin/env bash
# Builds the Terraform and OpenTofu binaries the tests run on, from the Go
# module proxy (no release download site is reachable here), once per
# machine: each binary is cached outside the repository, by version, and a
# second call only prints its path.
#
#   tools/tfmatrix/build.sh terraform 1.15.0   -> prints the terraform binary's path
#   tools/tfmatrix/build.sh tofu 1.12.6        -> prints the tofu binary's path
#   tools/tfmatrix/build.sh all                -> builds every pinned version make test runs
#                                                 (versions.txt; not those marked manual)
#
# A version whose line in versions.txt ends in "experiments" is linked with
# experiments allowed (-X main.experimentsAllowed=yes), as Terraform's alpha
# builds are: such a build runs experimental features (pluggable state
# storage, with TF_ENABLE_PLUGGABLE_STATE_STORAGE=1) when a configuration or
# a flag asks for them, and behaves as the release otherwise, so one build
# serves both the matrix and the tests of experimental features.
#
# Terraform's module zip lacks its remote-state backends (nested modules of
# their own): in a writable copy, the backends that are not in the zip are
# removed from internal/backend/init/init.go and go.mod before building. The
# resulting binary works with the local backend, which is all the tests use.
#
# Both are linked as releases (version.dev=no), as their release builds are:
# otherwise they call themselves 1.15.0-dev and allow experimental language
# features. A cached binary that does not report exactly its version (one
# built before that flag) is rebuilt; Go's build cache makes that a relink.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${S3LOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/s3lock-tools}"

build() { # build NAME VERSION: prints the binary's path
	local name=$1 version=$2 module out dir src ldflags built recipe
	ldflags="-s -w -X $(module_of "$name")/version.dev=no"
	built="$ldflags" # of a binary cached before build.sh recorded its flags
	if [[ $(flags_of "$name" "$version") == *experiments* ]]; then
		ldflags+=" -X main.experimentsAllowed=yes"
	fi
	case $name in
	terraform) module=github.com/hashicorp/terraform ;;
	tofu) module=github.com/opentofu/opentofu ;;
	*) echo "build.sh: unknown binary $name (terraform or tofu)" >&2; return 2 ;;
	esac
	out="$cache/$name-$version/$name"
	# recipe is what the cached binary records of how it was built: a tofu
	# built with every backend (before strip_unused_backends) is rebuilt.
	recipe="$ldflags"
	[[ $name == tofu ]] && recipe+=" (backends: $tofu_backends)"
	[[ -f $out.ldflags ]] && built=$(cat "$out.ldflags")
	if [[ -x $out ]] && [[ $(reported_version "$out") == "$version" ]] && [[ $built == "$recipe" ]]; then
		echo "$out"
		return
	fi
	echo "build.sh: building $name $version from the Go module proxy (a few minutes, once per machine) into $out" >&2
	dir=$(go mod download -json "$module@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ -z $dir ]]; then
		echo "build.sh: go mod download $module@v$version gave no module directory" >&2
		return 1
	fi
	src=$(mktemp -d "${TMPDIR:-/tmp}/s3lock-$name-$version.XXXXXX")
	# Remove the source copy however the build ends (set -e exits without
	# running a RETURN trap).
	trap 'if [[ -n ${src:-} ]]; then chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"; fi' RETURN EXIT
	cp -r "$dir/." "$src"
	chmod -R u+w "$src"
	mkdir -p "$(dirname "$out")"
	case $name in
	terraform)
		strip_missing_backends "$src"
		(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$out.tmp" .)
		;;
	tofu)
		strip_unused_backends "$src"
		(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp" ./cmd/tofu)
		;;
	esac
	if [[ $(reported_version "$out.tmp") != "$version" ]]; then
		echo "build.sh: the $name built from $module@v$version reports version '$(reported_version "$out.tmp")'" >&2
		return 1
	fi
	mv "$out.tmp" "$out"
	printf '%s' "$recipe" >"$out.ldflags"
	echo "$out"
}

module_of() {
	case $1 in
	terraform) echo github.com/hashicorp/terraform ;;
	tofu) echo github.com/opentofu/opentofu ;;
	esac
}

# flags_of prints what follows NAME VERSION on its line of versions.txt.
flags_of() {
	sed -n "s/^$1 $2[[:space:]]*\(.*\)$/\1/p" "$here/versions.txt"
}

# reported_version prints the version a terraform or tofu binary reports
# (`version -json`; no checkpoint, no CLI configuration read).
reported_version() {
	CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null "$1" version -json 2>/dev/null |
		sed -n 's/^[[:space:]]*"terraform_version": "\(.*\)",$/\1/p'
}

# strip_missing_backends removes from a Terraform source tree every
# remote-state backend whose nested module the module zip does not contain.
strip_missing_backends() {
	local src=$1 init="$1/internal/backend/init/init.go" path alias key
	while read -r alias path; do
		[[ -d $src/${path#github.com/hashicorp/terraform/} ]] && continue
		key=$(sed -n "s/^[[:space:]]*\"\([a-z0-9]*\)\":[[:space:]]*func() backend.Backend { return $alias\.New.*/\1/p" "$init")
		sed -i "/^[[:space:]]*$alias \"${path//\//\\/}\"$/d" "$init"
		sed -i "/return $alias\.New/d" "$init"
		sed -i "\#^[[:space:]]*${path} v#d; \#^replace ${path} =>#d" "$src/go.mod"
		echo "build.sh: terraform: left out the $key backend (not in the module zip)" >&2
	done < <(sed -n 's/^[[:space:]]*\(backend[A-Za-z0-9]*\) "\(github.com\/hashicorp\/terraform\/internal\/backend\/remote-state\/[a-z0-9]*\)"$/\1 \2/p' "$init")
	# Nested modules the zip also lacks.
	for path in github.com/hashicorp/terraform/internal/legacy; do
		[[ -d $src/${path#github.com/hashicorp/terraform/} ]] && continue
		sed -i "\#^[[:space:]]*${path} v#d; \#^replace ${path} =>#d" "$src/go.mod"
	done
}

# strip_unused_backends removes from an OpenTofu source tree the
# remote-state backends that bring in other clouds' SDKs (Azure, GCS,
# Kubernetes, Alibaba's OSS, Tencent's COS, Consul, PostgreSQL): the tests
# use the local backend only, and these take a large part of the build.
# tofu_backends are those that stay.
tofu_backends="local remote cloud http inmem s3"
strip_unused_backends() {
	local init="$1/internal/backend/init/init.go" alias
	for alias in backendAzure backendConsul backendCos backendGCS backendKubernetes backendOSS backendPg; do
		grep -q "^[[:space:]]*$alias \"" "$init" || { echo "build.sh: tofu: no $alias in $init" >&2; return 1; }
		sed -i "/^[[:space:]]*$alias \"/d; /return $alias\.New/d" "$init"
	done
	echo "build.sh: tofu: left out the azurerm, consul, cos, gcs, kubernetes, oss and pg backends (the tests use local)" >&2
}

case ${1:-} in
all)
	# The versions build at once, each by a call of this script of its own:
	# one's module download and link (a single core's work) overlap the
	# others' compiles.
	names=() pids=()
	while read -r name version flags; do
		[[ -z $name || $name == \#* || " $flags " == *" manual "* ]] && continue
		"$0" "$name" "$version" >/dev/null &
		names+=("$name $version") pids+=($!)
	done <"$here/versions.txt"
	failed=0
	for i in "${!pids[@]}"; do
		rc=0
		wait "${pids[$i]}" || rc=$?
		if [[ $rc != 0 ]]; then
			echo "build.sh: building ${names[$i]} failed (exit $rc)" >&2
			failed=1
		fi
	done
	exit $failed
	;;
terraform | tofu)
	[[ $# -eq 2 ]] || { echo "usage: build.sh terraform|tofu VERSION | all" >&2; exit 2; }
	build "$1" "$2"
	;;
*)
	echo "usage: build.sh terraform|tofu VERSION | all" >&2
	exit 2
	;;
esac
