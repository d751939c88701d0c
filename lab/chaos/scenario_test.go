//go:build linux

package chaos

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// Timings of a run. Each says why it is what it is; none is an assertion on
// speed except orphanBound, which the protocol derives.
const (
	// defaultLease is every holder's lease unless the scenario sets one:
	// short, so that every pause, kill and partition leads to a takeover
	// within seconds, and above the minimum (2 s) so that the safety margin
	// (0.3 s) and the store's one-second clock resolution leave room for
	// renewals.
	defaultLease = 3 * time.Second
	// longLease is the long-lease scenario's: long enough that the store's
	// clock slack (2 s) and the safety margin (1.2 s) are less than half of
	// it, so that a mistake in the lapse or trust arithmetic that takes
	// away half a lease breaks the rules the store's record checks
	// (internal/witness) instead of vanishing in the slack.
	longLease = 12 * time.Second
	// workMax is the longest pause of a critical section between its read
	// and its write: long enough that pauses, kills and partitions often
	// strike in the middle of one.
	workMax = 400 * time.Millisecond
	// runWait is how long an `s3lock run` waits for the lock before it
	// gives up (exit 3) and its slot starts another: longer than any
	// outage the suite causes.
	runWait = 20 * time.Second
	// strayGrace is how long the watchdogs and commands of `s3lock run`s may
	// outlive them: a watchdog kills its group as soon as s3lock is gone.
	strayGrace = 3 * time.Second
	// heldWithin bounds the wait, at the end of a run, for someone to hold
	// the lock, whose holder the suite then kills to leave an orphan.
	heldWithin = 15 * time.Second
	// slotPause is how long a slot waits before it starts its next
	// process, so that a slot whose process fails at once does not spin.
	slotPause = 100 * time.Millisecond
	// clockJump is the step of the jumping clock, forward and back by
	// turns, every clockJumpEvery.
	clockJump      = 2 * time.Hour
	clockJumpEvery = 15 * time.Second
)

// The lock, the register and the bucket of every run.
const (
	bucket      = "s3lock-chaos"
	lockName    = "chaos/lock"
	registerKey = "chaos/register.json"
)

// workerSpec is one slot of SDK workers: a worker process, started again
// whenever it dies.
type workerSpec struct {
	slot        string
	proxied     bool          // talks to the store through a fault proxy
	clockOffset time.Duration // its lock client's wall clock is this far off
	jumps       bool          // its lock client's wall clock jumps during the run
	broken      bool
	shared      float64 // the share of its leases it takes shared (read-only sections)
}

// runnerSpec is one slot of `s3lock run`s, started one after the other.
type runnerSpec struct {
	slot    string
	proxied bool
}

// scenario is what a run does.
type scenario struct {
	duration time.Duration
	lease    time.Duration // every holder's lease (0: defaultLease)
	workers  []workerSpec
	runners  []runnerSpec
	faults   bool // inject faults (pauses, kills, proxies, store restarts)
	seed     uint64
	// directory puts the s3test.DirectoryBuckets emulation between the
	// witness and the store, and names the bucket as a directory bucket:
	// every process lists it as s3lock lists S3 directory buckets.
	directory bool
	// latency puts a proxy between the witness and the store (or the
	// directory bucket emulation) that holds every request for a delay
	// drawn from this profile: every process, and the suite itself, meets
	// a cloud store's latency. nil: none, the store answers on loopback.
	latency *latency.Profile
}

// bucketName is the run's bucket.
func (sc scenario) bucketName() string {
	if sc.directory {
		return bucket + s3test.DirectoryBucketSuffix
	}
	return bucket
}

// leaseDuration is every holder's lease.
func (sc scenario) leaseDuration() time.Duration {
	if sc.lease == 0 {
		return defaultLease
	}
	return sc.lease
}

// runHangLimit: an `s3lock run` that lasts longer than its wait, its
// command's critical section and its release, with room to spare, hangs.
func (sc scenario) runHangLimit() time.Duration {
	return runWait + 4*sc.leaseDuration() + 10*time.Second
}

// exitGrace is how long a process has to exit after SIGTERM at the end of
// the run: a worker abandons its critical section and releases (bounded by
// its trust deadline); an `s3lock run` forwards the signal to its command
// and releases.
func (sc scenario) exitGrace() time.Duration { return 3*sc.leaseDuration() + 5*time.Second }

// orphanBound is how soon after its holder was killed a lease must be free
// (PROTOCOL.md §6): an observer judges it lapsed once the store's Date is
// lease + serverSlack (2 s) past its Last-Modified, Date lags real time by
// up to 2 s, and a second covers the one-second resolution and the suite's
// polling.
func (sc scenario) orphanBound() time.Duration { return sc.leaseDuration() + 5*time.Second }

// maxDelay is the longest delay of one request: half a lease, so that
// renewals arrive late but not all of them too late.
func (sc scenario) maxDelay() time.Duration { return sc.leaseDuration() / 2 }

func (sc scenario) skewed(slot string) bool {
	for _, w := range sc.workers {
		if w.slot == slot {
			return w.clockOffset != 0 || w.jumps
		}
	}
	return false
}

// binaries are the executables a run starts.
type binaries struct {
	dir, worker, s3lock string
}

var (
	binDir   string // created by TestMain
	binOnce  sync.Once
	bins     binaries
	binsErr  error
	buildCmd = func(out, pkg string) *exec.Cmd { return exec.Command("go", "build", "-o", out, pkg) }
)

// buildBinaries builds the worker and the s3lock CLI once per test binary.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	binOnce.Do(func() {
		b := binaries{dir: binDir, worker: filepath.Join(binDir, "worker"), s3lock: filepath.Join(binDir, "s3lock")}
		// The CLI builds in the main module (the repository's root), whose
		// go.mod has its requirements: the lab's module imports none of it.
		for _, p := range []struct{ out, dir, pkg string }{
			{b.worker, ".", "./cmd/worker"},
			{b.s3lock, filepath.Join("..", ".."), "./cmd/s3lock"},
		} {
			cmd := buildCmd(p.out, p.pkg)
			cmd.Dir = p.dir
			if msg, err := cmd.CombinedOutput(); err != nil {
				binsErr = fmt.Errorf("go build %s: %w\n%s", p.pkg, err, msg)
				return
			}
		}
		bins = b
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins
}
