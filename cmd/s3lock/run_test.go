//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestRun_CommandSeesTheLease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("migrations")
	script := `printf '%s|%s|%s|%s|%s' "$S3LOCK_EPOCH" "$S3LOCK_KEY" "$S3LOCK_HOLDER" "$S3LOCK_BUCKET" "$S3LOCK_NAME"`
	for epoch := uint64(1); epoch <= 2; epoch++ {
		r := c.mustRun("run", "--holder", "ci-job-7", "--metadata", "commit=abc123", name, "--", "sh", "-c", script)
		want := fmt.Sprintf("%d|%s|ci-job-7|%s|%s", epoch, s3lock.Token{Name: name, Epoch: epoch}.Key(), c.ns.Bucket, name)
		if r.stdout != want {
			t.Fatalf("the command printed %q, want %q", r.stdout, want)
		}
		st := c.current(name)
		if st.Epoch != epoch || !st.Released || st.Holder != "ci-job-7" || st.Metadata["commit"] != "abc123" {
			t.Fatalf("after run %d the lock is %+v, want epoch %d released by ci-job-7 with the metadata", epoch, st, epoch)
		}
	}
}

// TestRun_CommandDoesNotSeeS3locksSecrets: run passed its whole
// environment on to the command, S3LOCK_SSE_CUSTOMER_KEY and S3LOCK_TOKEN
// with it. s3lock still uses the SSE-C key (every request of the run
// carries it); the command gets neither.
func TestRun_CommandDoesNotSeeS3locksSecrets(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("secrets")
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	env := append(c.without(envSSECKey, envToken), envSSECKey+"="+key, envToken+`={"bucket":"b","name":"n","epoch":1,"nonce":"00"}`)
	script := `printf '%s|%s|%s' "${` + envSSECKey + `-unset}" "${` + envToken + `-unset}" "$` + runenv.Epoch + `"`
	r := c.runWith(env, "", "run", "--quiet", name, "--", "sh", "-c", script)
	if r.code != 0 || r.stdout != "unset|unset|1" {
		t.Fatalf("got %s; want the command to print unset|unset|1: no SSE-C key, no token, the lease's epoch", r)
	}
}

func TestRun_ExitCodePropagates(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("job")
	for _, tc := range []struct {
		name string
		argv []string
		code int
	}{
		{"success", []string{"true"}, 0},
		{"failure", []string{"sh", "-c", "exit 7"}, 7},
		{"code 3, like s3lock's own held code", []string{"sh", "-c", "exit 3"}, 3},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"not found", []string{"./no-such-command"}, exitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run(append([]string{"run", "--quiet", name, "--"}, tc.argv...)...)
			if r.code != tc.code {
				t.Fatalf("got %s, want exit %d", r, tc.code)
			}
			if st := c.current(name); !st.Released {
				t.Fatalf("the lock was not released after the command exited: %+v", st)
			}
		})
	}
}

// A holder killed with SIGKILL leaves its lease behind; the next `s3lock
// run` waits and takes the next epoch only once that lease has lapsed.
func TestRun_KilledHolderLeaseLapsesBeforeTakeover(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("deploy")
	pidFile := filepath.Join(c.dir, "first.pid")
	// A short lease keeps the test short; 5s leaves the first holder's
	// renewals (every 1.7s) room on a loaded machine.
	first := c.command(t.Context(), "run", "--quiet", "--lease", "5s", "--holder", "first", name, "--",
		"sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 120`, pidFile)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the first command to start", func() bool { return fileHas(pidFile, "\n") })
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	held := c.current(name)
	if !held.Held || held.Holder != "first" {
		t.Fatalf("after SIGKILL the lock is %+v, want it still held by the first run", held)
	}

	r := c.mustRun("run", "--lease", "5s", "--wait", "1m", "--holder", "second", name, "--", "sh", "-c", `printf %s "$S3LOCK_EPOCH"`)
	if r.stdout != strconv.FormatUint(held.Epoch+1, 10) {
		t.Fatalf("the second run got epoch %q, want %d", r.stdout, held.Epoch+1)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("held by first (epoch %d)", held.Epoch)) {
		t.Fatalf("the second run did not report waiting for the first: %s", r.stderr)
	}
	second := c.current(name)
	// held.ExpiresAt and the second run's judgement that the lease lapsed
	// are both derived from the store's Last-Modified and Date, which have
	// one-second resolution: they can disagree by up to two seconds. The
	// first holder itself stopped trusting its lease earlier still (its
	// last renewal plus 90% of the lease).
	t.Logf("first lease (epoch %d) lapses at %s by the store's clock; second acquired at %s",
		held.Epoch, held.ExpiresAt.Format(time.StampMilli), second.AcquiredAt.Format(time.StampMilli))
	if earliest := held.ExpiresAt.Add(-2 * time.Second); second.AcquiredAt.Before(earliest) {
		t.Fatalf("the second run acquired at %s, before the first lease lapsed at %s",
			second.AcquiredAt.Format(time.StampMilli), held.ExpiresAt.Format(time.StampMilli))
	}

	// Linux also stops the first command when its s3lock dies.
	if b, err := os.ReadFile(pidFile); err == nil && isLinux() {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		testkit.Eventually(t, 30*time.Second, "the orphaned command to be stopped", func() bool { return !alive(pid) })
	}
}

// When s3lock itself is killed, the command and everything it started are
// killed too (Linux): nothing else would stop them once the lease lapses.
func TestRun_KilledS3lockTakesTheCommandsChildrenWithIt(t *testing.T) {
	t.Parallel()
	if !isLinux() {
		t.Skip("needs a parent-death signal (Linux)")
	}
	c := newCLI(t)
	name := c.name("forks")
	pidFile := filepath.Join(c.dir, "grandchild.pid")
	cmd := c.command(t.Context(), "run", "--quiet", "--lease", "5s", name, "--",
		"sh", "-c", `sleep 300 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait`, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the command to fork", func() bool { return fileHas(pidFile, "\n") })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testkit.Eventually(t, 10*time.Second, "the command's own child to be killed", func() bool { return !alive(grandchild) })
}

// A force-released lease means someone else may hold the lock at once: the
// command is killed without delay, and s3lock exits 4.
func TestRun_ForceReleasedLeaseKillsCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("forced")
	marker := filepath.Join(c.dir, "marker")
	var stderr testkit.Buffer
	script := `trap 'echo terminated >> "$0"; exit 0' TERM; echo ready >> "$0"; while :; do sleep 0.1; done`
	cmd := c.command(t.Context(), "run", "--stats", "--lease", "3s", name, "--", "sh", "-c", script, marker)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
	if err := c.sdk.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: c.current(name).Epoch}); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != exitLost {
		t.Fatalf("s3lock exited %d, want %d (lease lost); stderr: %s", code, exitLost, stderr.String())
	}
	if b, _ := os.ReadFile(marker); strings.Contains(string(b), "terminated") {
		t.Fatalf("the command was asked to stop gracefully after its lease was force-released: %q", b)
	}
	if !strings.Contains(stderr.String(), "force-released") || !strings.Contains(stderr.String(), "killing the command") {
		t.Fatalf("stderr does not explain the lost lease: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `s3lock: stats: lock "`+name+`": waited `) || !strings.Contains(stderr.String(), "; lost (force-released)\n") {
		t.Fatalf("--stats does not report the lost lease: %s", stderr.String())
	}
}

// When the store becomes unreachable, the command must be stopped before its
// lease could lapse, so that the next holder never overlaps it: SIGTERM with
// --grace-period left, SIGKILL when the lease runs out.
func TestRun_StoreOutageStopsCommandBeforeLapse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string // $0 is a marker file
		want   string // in stderr
	}{
		{"exits on SIGTERM", `trap 'echo terminated >> "$0"; exit 0' TERM; echo ready >> "$0"; while :; do sleep 0.1; done`, "SIGTERM now"},
		{"ignores SIGTERM and is killed", `trap '' TERM; echo $$ >> "$0.pid"; echo ready >> "$0"; while :; do sleep 0.1; done`, "killing the command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			if !c.ns.Target.Local {
				t.Skip("needs the local server behind a proxy")
			}
			p := s3test.NewProxy(t, c.ns.Target.Endpoint)
			name := c.name("outage")
			marker := filepath.Join(c.dir, "marker")
			var stderr testkit.Buffer
			cmd := c.command(t.Context(), "--endpoint", p.URL, "run", "--lease", "4s", name, "--", "sh", "-c", tc.script, marker)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
			p.Cut() // the store is gone for this runner only
			st := c.current(name)
			// By the store's clock, nobody else can take the lock before this.
			lapse := st.ExpiresAt
			code := waitExit(t, cmd)
			exited := time.Now()
			if code != exitLost {
				t.Fatalf("s3lock exited %d, want %d; stderr: %s", code, exitLost, stderr.String())
			}
			if !exited.Before(lapse) {
				t.Fatalf("s3lock and its command were still running at %s, after the lease could lapse at %s",
					exited.Format(time.StampMilli), lapse.Format(time.StampMilli))
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr lacks %q: %s", tc.want, stderr.String())
			}
			if b, err := os.ReadFile(marker + ".pid"); err == nil {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if alive(pid) {
					t.Fatalf("the command (pid %d) survived its lease", pid)
				}
			}
		})
	}
}

func TestRun_GracePeriodMustFitTheLease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("run", "--lease", "1m", "--grace-period", "2m", c.name("x"), "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--grace-period 2m0s is too long for --lease 1m0s") {
		t.Fatalf("got %s; want a usage error about the grace period", r)
	}
}

func TestRun_ForwardsSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			name := c.name("signals")
			marker := filepath.Join(c.dir, "marker")
			script := `trap 'echo "got $1" >> "$0"; exit 42' ` + strings.TrimPrefix(signalName(sig), "SIG") +
				`; echo ready >> "$0"; while :; do sleep 0.1; done`
			cmd := c.command(t.Context(), "run", "--quiet", name, "--", "sh", "-c", script, marker, signalName(sig))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd); code != 42 {
				t.Fatalf("s3lock exited %d, want the command's 42", code)
			}
			if !fileHas(marker, "got "+signalName(sig)) {
				b, _ := os.ReadFile(marker)
				t.Fatalf("the command did not get %s: %q", signalName(sig), b)
			}
			if st := c.current(name); !st.Released {
				t.Fatalf("the lock was not released: %+v", st)
			}
		})
	}
}

// An interrupted wait exits 128+signal and leaves no lease behind, nor a
// place in the lock's line.
func TestRun_InterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("queue")
	lease, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	var stderr testkit.Buffer
	cmd := c.command(t.Context(), "run", "--stats", "--wait", "10m", name, "--", "true")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the wait to be reported", func() bool { return strings.Contains(stderr.String(), "waiting for lock") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 128+int(syscall.SIGINT) {
		t.Fatalf("s3lock exited %d, want %d; stderr: %s", code, 128+int(syscall.SIGINT), stderr.String())
	}
	statsNotAcquired(t, stderr.String(), name)
	if st := c.current(name); st.Epoch != lease.Token().Epoch || !st.Held {
		t.Fatalf("the lock changed: %+v", st)
	}
	if ws := c.line(name); len(ws) != 0 {
		t.Fatalf("the interrupted run is still in the lock's line: %+v", ws)
	}
}

func isLinux() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// Regression: signals that arrived after the command exited, while s3lock
// released the lease, filled the forwarding queue and blocked the signal
// router, and s3lock hung on exit.
func TestRun_SignalBurstDoesNotHang(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("burst")
	marker := filepath.Join(c.dir, "marker")
	cmd := c.command(t.Context(), "run", "--quiet", name, "--", "sh", "-c",
		`trap 'exit 5' HUP; echo ready >> "$0"; while :; do sleep 0.1; done`, marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
	done := make(chan int, 1)
	go func() { done <- waitExit(t, cmd) }()
	for {
		select {
		case code := <-done:
			if code != 5 {
				t.Fatalf("s3lock exited %d, want the command's 5", code)
			}
			return
		default:
			_ = cmd.Process.Signal(syscall.SIGHUP)
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// Several names are a lock set, taken all or none in the order of the names
// sorted: the command sees each lock's name, epoch and key (S3LOCK_LOCKS,
// S3LOCK_NAME_i, ...), the first's in the single-lock variables, and every
// lock is released when it exits.
func TestRun_ALockSetIsTakenWholeAndSeenByTheCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a, b := c.name("set/a"), c.name("set/b")
	script := `printf '%s|%s|%s=%s|%s=%s|%s' "$S3LOCK_LOCKS" "$S3LOCK_NAME" "$S3LOCK_NAME_1" "$S3LOCK_EPOCH_1" "$S3LOCK_NAME_2" "$S3LOCK_EPOCH_2" "$S3LOCK_KEY_2"`
	r := c.mustRun("run", b, a, "--", "sh", "-c", script)
	want := fmt.Sprintf("2|%s|%s=1|%s=1|%s", a, a, b, s3lock.Token{Name: b, Epoch: 1}.Key())
	if r.stdout != want {
		t.Fatalf("the command printed %q, want %q", r.stdout, want)
	}
	for _, name := range []string{a, b} {
		if st := c.current(name); !st.Released {
			t.Errorf("after the run, %s is %+v; want released", name, st)
		}
	}
}

// A set with a held member takes nothing with --wait 0: it exits with the
// held code, naming the held lock, and leaves the other lock free.
func TestRun_ALockSetWithAHeldMemberTakesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a, b := c.name("held-set/a"), c.name("held-set/b")
	l, err := c.sdk.TryAcquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	r := c.run("run", "--wait", "0", a, b, "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, fmt.Sprintf("lock %q", b)) || !strings.Contains(r.stderr, "is released") {
		t.Fatalf("got %s; want exit %d naming %s and saying what it released", r, exitHeld, b)
	}
	if st := c.current(a); st.Held {
		t.Errorf("%s after the set gave up: %+v; want not held", a, st)
	}
	if r := c.run("run", "--slots", "2", a, b, "--", "true"); r.code != exitUsage || !strings.Contains(r.stderr, "--slots takes one lock name") {
		t.Errorf("--slots with a set: got %s; want a usage error", r)
	}
}

// Two runs taking the same locks in opposite orders never deadlock and never
// run their commands at once (each command takes a directory that exists
// only while one runs), round after round.
func TestRun_LockSetsInOppositeOrdersNeitherDeadlockNorOverlap(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a, b := c.name("opposite/a"), c.name("opposite/b")
	inUse := filepath.Join(c.dir, "in-use")
	script := fmt.Sprintf(`mkdir %q || exit 9; sleep 0.05; rmdir %q`, inUse, inUse)
	var wg sync.WaitGroup
	for i, names := range [][]string{{a, b}, {b, a}} {
		wg.Go(func() {
			for round := range 5 {
				args := append(append([]string{"run", "--wait", "1m", "--quiet"}, names...), "--", "sh", "-c", script)
				if r := c.run(args...); r.code != 0 {
					t.Errorf("run %d, round %d: %s; want exit 0 (9: both commands ran at once)", i, round, r)
				}
			}
		})
	}
	wg.Wait()
}

// Losing one lease of a lock set stops the command as losing the lease
// does (SIGKILL, exit 4), and the set's other lock is released.
func TestRun_ALockSetsLostMemberKillsTheCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a, b := c.name("lost-set/a"), c.name("lost-set/b")
	marker := filepath.Join(c.dir, "marker")
	var stderr testkit.Buffer
	script := `echo ready >> "$0"; while :; do sleep 0.1; done`
	cmd := c.command(t.Context(), "run", "--lease", "3s", a, b, "--", "sh", "-c", script, marker)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
	if err := c.sdk.ForceRelease(t.Context(), s3lock.Token{Name: b, Epoch: c.current(b).Epoch}); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != exitLost || !strings.Contains(stderr.String(), "killing the command") {
		t.Fatalf("s3lock exited %d, want %d (lease lost) saying it killed the command; stderr: %s", code, exitLost, stderr.String())
	}
	if st := c.current(a); st.Held {
		t.Errorf("%s after the run: %+v; want released", a, st)
	}
}
