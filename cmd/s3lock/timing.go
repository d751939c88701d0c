package main

import (
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Defaults and timing of the command-line tool. The SDK's defaults are for
// programs that live as long as their lease; these are for shell steps. The
// watchdog's own timing (Linux only) is with it in watchdog_linux.go.
const (
	// defaultWait is how long run and acquire wait for a held lock: long
	// enough to queue behind another pipeline's short step, short enough that
	// a stuck holder fails the job rather than hanging it until the CI
	// timeout. --wait 0 tries once.
	defaultWait = 5 * time.Minute
	// defaultRunLease is the lease of `s3lock run`, renewed in the
	// background every third of it: a crashed runner blocks others for a
	// minute.
	defaultRunLease = s3lock.DefaultLeaseDuration
	// defaultTokenLease is the lease of `s3lock acquire`: nothing renews it
	// between pipeline steps unless they call `s3lock renew`, so it must
	// cover the steps until release.
	defaultTokenLease = 10 * time.Minute
	// defaultGrace caps how long before its lease could run out run sends a
	// command SIGTERM when renewals keep failing (by default a quarter of
	// the lease, see defaultGraceShare).
	defaultGrace = 10 * time.Second
	// defaultGraceShare: the default grace is a quarter of the lease, so
	// SIGTERM comes only once the renewals due at a third and at two thirds
	// of the lease have both failed.
	defaultGraceShare = 4
	// defaultStatusTimeout bounds status (--timeout): a few requests for
	// a lock, about one per lock for a prefix (eight at a time), so a
	// minute is far more than a store that answers needs, and a store that
	// does not (or whose listing would not end) fails the step instead of
	// hanging it until the CI timeout.
	defaultStatusTimeout = time.Minute
	// releaseTimeout bounds the release after the command has exited (or
	// s3lock was interrupted): a release that cannot be confirmed leaves the
	// lease to lapse.
	releaseTimeout = 30 * time.Second
	// runWatchInterval is how often run checks the lease's deadline for
	// SIGTERM and tells the watchdog a renewed deadline: a renewal reaches the
	// watchdog at most this late, far inside the third of a lease between two
	// renewals.
	runWatchInterval = 50 * time.Millisecond
	// groupKillLimit bounds how long run waits for the command's process
	// group to die after SIGKILL before it releases the lease.
	groupKillLimit = 5 * time.Second
	// plainInterval is how often a wait that changes nothing is reported
	// when stderr is not a terminal: often enough to show a CI log is
	// alive, rarely enough not to flood it.
	plainInterval = 5 * time.Second
)

// expiryHelp explains why a token's expires_at and status's EXPIRES differ:
// they are the two sides of one lease, judged by two clocks (PROTOCOL.md §6).
const expiryHelp = `Two figures for one lease, on purpose: the holder trusts its lease until its
token's expires_at, the lease duration from when its last write was sent, less
a safety margin (a tenth of the duration, at most 5s, plus 100 ppm for clock
drift); everyone else sees the lock held until status's EXPIRES, the lease
duration from the store's time of that write, plus 2s of slack for the store's
clock. A 5m lease: expires_at about 4m55s after acquire, EXPIRES about 5m2s.
In between, no one else can take the lock and the holder no longer trusts it:
that gap keeps two holders from trusting one lock at once.`
