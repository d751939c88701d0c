// Package buildinfo says which s3lock a binary is: the provider and the CLI
// report the same version the same way.
package buildinfo

import "runtime/debug"

// Unknown is the version of a binary that records none: built from a
// directory that is not a module version and not a git checkout.
const Unknown = "dev"

// Version is the version a binary reports. set is what its release build
// linked in (-X main.version=v0.1.0, make release); without it, the version
// of the module the binary was built from, as Go recorded it: v0.1.0 for
// `go install …@v0.1.0`, a pseudo-version for a build in a git checkout
// (v0.1.1-0.20261205…-abcdef012345, +dirty when it has uncommitted
// changes); else Unknown.
func Version(set string) string {
	if set != "" {
		return set
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		return fromModule(info.Main.Version)
	}
	return Unknown
}

// fromModule maps a module version Go recorded to the one reported: Go
// records "(devel)" when it knows none.
func fromModule(v string) string {
	if v == "" || v == "(devel)" {
		return Unknown
	}
	return v
}
