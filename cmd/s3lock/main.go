// Command s3lock holds locks in an S3 bucket from the shell: it runs a
// command while holding a lock (s3lock run), hands a lease from one pipeline
// step to the next (acquire, renew, release), follows a lock as it changes
// hands (watch), and inspects and repairs locks (status, force-release,
// verify). See README.md beside this file, or
// `s3lock --help`.
package main

import (
	"os"
)

// version is what a release build links in (make release: -X
// main.version=v0.1.0); without it `s3lock --version` reports the module
// version Go recorded (buildinfo.Version).
var version string

func main() {
	if len(os.Args) > 2 && os.Args[1] == watchdogArg && os.Args[2] == "--" {
		os.Exit(runWatchdog(os.Args[3:]))
	}
	if len(os.Args) > 2 && os.Args[1] == relayArg && os.Args[2] == "--" {
		os.Exit(runRelay(os.Args[3:]))
	}
	os.Exit(newApp(os.Stdin, os.Stdout, os.Stderr).execute(os.Args[1:]))
}
