//go:build linux

package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

const (
	// defaultDuration is how long the chaos run injects faults: with the
	// builds, the broken-worker run and the wind-down, `make chaos` takes
	// about six minutes on two cores.
	defaultDuration = 4*time.Minute + 30*time.Second
	// brokenDuration is the broken-worker run's: several of its leases,
	// each outlived by its critical section.
	brokenDuration = 45 * time.Second
	// longLeaseDuration is the long-lease run's: a few pauses and kills of
	// a holder, each taken over after a 12 s lease lapses.
	longLeaseDuration = 90 * time.Second
	// directoryDuration is the directory bucket run's: TestChaos's cast,
	// shorter, for the listing that differs, not for the faults.
	directoryDuration = 60 * time.Second
	// sharedDuration is the shared run's: enough leases of each kind, and
	// shared ones overlapping, under every kind of fault.
	sharedDuration = 60 * time.Second
)

var duration = flag.Duration("chaos.duration", envDuration("S3LOCK_CHAOS_DURATION", defaultDuration),
	"how long TestChaos injects faults (or set S3LOCK_CHAOS_DURATION)")

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "s3lock-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// requireChaos skips a chaos run unless S3LOCK_CHAOS=1: they take minutes.
func requireChaos(t *testing.T) {
	t.Helper()
	if os.Getenv("S3LOCK_CHAOS") != "1" {
		t.Skip("chaos runs take minutes; set S3LOCK_CHAOS=1 (make chaos)")
	}
}

// envProfile returns the latency profile $S3LOCK_CHAOS_PROFILE names, nil
// (none) when it is unset.
func envProfile(t *testing.T) *latency.Profile {
	t.Helper()
	name := os.Getenv("S3LOCK_CHAOS_PROFILE")
	if name == "" {
		return nil
	}
	p, err := latency.Lookup(name)
	if err != nil {
		t.Fatalf("S3LOCK_CHAOS_PROFILE: %v", err)
	}
	return p
}

// seed returns $S3LOCK_CHAOS_SEED, or one from the clock; the figures print
// it, so a run's fault schedule can be repeated (the processes' timing
// cannot).
func seed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("S3LOCK_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("S3LOCK_CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// TestChaos is the chaos run: four SDK workers (two behind fault proxies;
// clocks 3 h ahead, 5 h behind, and one that jumps by 2 h) and two `s3lock
// run` slots (one behind a proxy) contend for one lock while the monkey
// pauses, kills and partitions them and restarts the store. The store
// answers on loopback, or with the latency of the profile
// S3LOCK_CHAOS_PROFILE names.
func TestChaos(t *testing.T) {
	requireChaos(t)
	sc := scenario{
		duration: *duration,
		seed:     seed(t),
		faults:   true,
		latency:  envProfile(t),
	}
	sc.workers, sc.runners = chaosCast()
	f := runChecked(t, sc)
	if m := f.missing(); len(m) > 0 {
		t.Errorf("faults injected zero times, so the run proves nothing about them: %s", strings.Join(m, "; "))
	}
}

// TestChaos_LongLease is a shorter chaos run with leases of production
// proportions (longLease, 12 s) among three SDK workers (clocks 3 h ahead
// and 5 h behind, one behind a fault proxy) and an `s3lock run` slot: with
// the 3 s leases of TestChaos, the store's clock slack (2 s) hides a lapse
// judged at half the lease, and the safety margin (0.3 s) a holder that
// trusts its lease from the answer without it; here both break the rules
// the store's record checks. Production-sized leases meet production-like
// latency: the store answers as S3 Standard would (latency.S3Standard). At
// least one lease must lapse and be taken over, or the succession rule was
// never put to the test.
func TestChaos_LongLease(t *testing.T) {
	requireChaos(t)
	sc := scenario{
		duration: longLeaseDuration,
		lease:    longLease,
		seed:     seed(t),
		faults:   true,
		latency:  latency.S3Standard,
		workers: []workerSpec{
			{slot: "w1", proxied: true, clockOffset: 3 * time.Hour},
			{slot: "w2", clockOffset: -5 * time.Hour},
			{slot: "w3"},
		},
		runners: []runnerSpec{{slot: "run1"}},
	}
	f := runChecked(t, sc)
	if f.takeovers == 0 {
		t.Error("no lease lapsed and was taken over: the run proves nothing about when a lapsed lease may be taken over")
	}
	if f.claims == 0 {
		t.Error("no trust deadline was recorded: the run proves nothing about how long a holder trusts its lease")
	}
}

// TestChaos_DirectoryBucket is TestChaos's cast, shorter, on a bucket named
// as an S3 directory bucket behind the s3test.DirectoryBuckets emulation
// (listings in no key order, no StartAfter, prefixes that end in "/",
// sessions): every SDK worker and `s3lock run` lists the lock whole
// (PROTOCOL.md §8), under the same pauses, kills, partitions, store
// restarts and skewed clocks, and the same checks of the history and of
// the store's record. A directory bucket is S3 Express One Zone, so the
// store answers with its latency (latency.S3Express).
func TestChaos_DirectoryBucket(t *testing.T) {
	requireChaos(t)
	sc := scenario{
		duration:  directoryDuration,
		seed:      seed(t),
		faults:    true,
		directory: true,
		latency:   latency.S3Express,
	}
	sc.workers, sc.runners = chaosCast()
	f := runChecked(t, sc)
	if f.acquisitions == 0 || f.witnessed == 0 {
		t.Errorf("%d acquisitions, %d writes witnessed: the run did not use the directory bucket", f.acquisitions, f.witnessed)
	}
}

// chaosCast is TestChaos's processes: four SDK workers (two behind fault
// proxies; clocks 3 h ahead, 5 h behind, and one that jumps) and two
// `s3lock run` slots (one behind a proxy).
func chaosCast() ([]workerSpec, []runnerSpec) {
	return []workerSpec{
			{slot: "w1", proxied: true, clockOffset: 3 * time.Hour},
			{slot: "w2", proxied: true, jumps: true},
			{slot: "w3", clockOffset: -5 * time.Hour},
			{slot: "w4"},
		},
		[]runnerSpec{{slot: "run1"}, {slot: "run2", proxied: true}}
}

// TestChaos_Shared: four SDK workers (one behind a fault proxy, clocks 3 h
// ahead and 5 h behind) take two in three of their leases shared
// (PROTOCOL.md §17) — their sections read the register, the exclusive
// ones read and write it — and an `s3lock run` slot takes exclusive ones,
// while the monkey pauses, kills and partitions them and restarts the
// store. No exclusive section may overlap any other (CheckExclusive), the
// register stays linearizable, and shared sections of two processes must
// have overlapped, or the run proves nothing about sharing.
func TestChaos_Shared(t *testing.T) {
	requireChaos(t)
	sc := scenario{
		duration: sharedDuration,
		seed:     seed(t),
		faults:   true,
		workers: []workerSpec{
			{slot: "w1", proxied: true, shared: 0.67},
			{slot: "w2", clockOffset: 3 * time.Hour, shared: 0.67},
			{slot: "w3", clockOffset: -5 * time.Hour, shared: 0.67},
			{slot: "w4", shared: 0.67},
		},
		runners: []runnerSpec{{slot: "run1"}},
	}
	f := runChecked(t, sc)
	if f.sharedOverlaps == 0 {
		t.Errorf("no two shared sections overlapped (%d shared sections): the run proves nothing about sharing", f.sharedSections)
	}
	if f.sharedSections == f.sections {
		t.Error("every section was shared: the run proves nothing about exclusion")
	}
}

// runChecked runs sc, prints its figures and fails t on every check of the
// history and of the store's record that found a violation, and if the
// scenario's latency profile delayed no request.
func runChecked(t *testing.T, sc scenario) figures {
	t.Helper()
	l := newLab(t, sc)
	o := l.run()
	f := l.figures(o)
	fmt.Print(f)
	for _, err := range []error{o.linearizable, o.exclusive, o.epochOrder, o.storeClock} {
		if err != nil {
			t.Error(err)
		}
	}
	if sc.latency != nil && !sc.latency.Delayless() && f.latent == 0 {
		t.Errorf("the %s latency profile delayed no request: the run did not meet it", sc.latency.Name)
	}
	return f
}

// TestChaos_BrokenWorkerIsCaught runs a deliberately broken worker (it
// trusts its lease past the deadline and writes without the fence) among
// correct ones, without faults: the checks must flag it.
func TestChaos_BrokenWorkerIsCaught(t *testing.T) {
	requireChaos(t)
	sc := scenario{
		duration: brokenDuration,
		seed:     seed(t),
		workers:  []workerSpec{{slot: "broken", broken: true}, {slot: "w1"}, {slot: "w2"}},
		runners:  []runnerSpec{{slot: "run1"}},
	}
	l := newLab(t, sc)
	o := l.run()
	fmt.Print(l.figures(o))
	if o.exclusive == nil {
		t.Error("the broken worker's critical sections outlived its lease, yet CheckExclusive found no overlap")
	} else {
		t.Logf("caught, as it should be:\n%v", o.exclusive)
	}
	if o.linearizable == nil {
		t.Error("the broken worker wrote without the fence after a takeover, yet CheckLinearizable found no lost update")
	} else {
		t.Logf("caught, as it should be:\n%v", o.linearizable)
	}
	if o.storeClock != nil {
		t.Logf("the store's record caught it too:\n%v", o.storeClock)
	}
	if o.epochOrder != nil {
		// A worker that trusts its lease forever also begins sections
		// under its old epoch after newer ones: caught too, but not
		// required (it depends on how many sections its lease gets).
		t.Logf("also caught:\n%v", o.epochOrder)
	}
}

// TestChaos_FaketimeDoesNotReachGo shows why the workers' clocks are skewed
// through s3lock.WithClock: libfaketime shifts what C programs see, but a Go
// program (the worker, like s3lock, is built with cgo and dynamically
// linked) reads the clock through the vDSO and sees the real time.
func TestChaos_FaketimeDoesNotReachGo(t *testing.T) {
	requireChaos(t)
	faketime, err := exec.LookPath("faketime")
	if err != nil {
		t.Skip("faketime (libfaketime) is not installed")
	}
	const shift, spec = -3 * time.Hour, "-3h" // faketime's syntax for the shift
	worker := buildBinaries(t).worker
	// off returns how far the clock that the program prints is from ours.
	off := func(name string, args ...string) time.Duration {
		t.Helper()
		now := time.Now()
		out, err := exec.Command(faketime, append([]string{"-f", spec, name}, args...)...).Output()
		if err != nil {
			t.Fatalf("faketime %s: %v", name, err)
		}
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("faketime %s printed %q: %v", name, out, err)
		}
		return at.Sub(now.Truncate(time.Second))
	}
	date := off("date", "-u", "+%Y-%m-%dT%H:%M:%SZ")
	goClock := off(worker, "-print-clock")
	t.Logf("under faketime %s: date(1) is %s off, the Go worker %s", spec, date.Round(time.Second), goClock.Round(time.Second))
	if date > shift+time.Minute || date < shift-time.Minute {
		t.Fatalf("faketime did not shift date(1) by %s (off by %s): libfaketime does not work here", shift, date)
	}
	if goClock < -time.Minute || goClock > time.Minute {
		t.Errorf("faketime shifted the Go worker's clock by %s: skewed clocks could use it after all", goClock)
	}
}
