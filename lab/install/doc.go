// Package install holds tests of how users install s3lock the way they
// install other tools: `go install …@version` from a module proxy, and the
// CLI's container image. It has no code of its own.
package install
