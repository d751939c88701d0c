//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The command never outlives the lease, whatever happens to s3lock: these
// are the faults that once let it (issue "work stops at the lease's
// deadline"). Each runs s3lock as a separate process with a 3s lease and a
// command that ignores SIGTERM (as Terraform does the first time), with a
// rival that goes to the store directly and takes the lock the moment it
// can.

// stubbornCommand is a shell script that ignores SIGTERM, writes its pid
// (and its parent's: the watchdog) to $0, and keeps working.
const stubbornCommand = `trap '' TERM; echo "$$ $PPID" > "$0.tmp" && mv "$0.tmp" "$0"; while :; do sleep 0.05; done`

// startStubborn starts `s3lock run` of stubbornCommand on name and returns
// the process and the command's pid, having checked that the command runs
// under a watchdog.
func startStubborn(t *testing.T, c *cli, name string, args ...string) (*exec.Cmd, *testkit.Buffer, int) {
	t.Helper()
	pidFile := filepath.Join(c.dir, "pids")
	var stderr testkit.Buffer
	argv := append(append([]string{}, args...), "run", "--lease", "3s", name, "--", "sh", "-c", stubbornCommand, pidFile)
	cmd := c.command(t.Context(), argv...)
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a job of its own, as a CI runner starts it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(pidFile, "\n") })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pid, _ := strconv.Atoi(f[0])
	watchdog, _ := strconv.Atoi(f[1])
	if watchdog == cmd.Process.Pid {
		t.Fatalf("the command's parent is s3lock itself (pid %d): there is no watchdog", watchdog)
	}
	return cmd, &stderr, pid
}

// rivalTakes starts an SDK client that takes the lock as soon as it can and
// returns when it did.
func rivalTakes(t *testing.T, c *cli, name string) <-chan time.Time {
	t.Helper()
	rival, err := s3lock.New(c.ns.Client, c.ns.Bucket, s3lock.WithHolder("rival"), s3lock.WithPollInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	took := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), processLimit)
		defer cancel()
		l, err := rival.Acquire(ctx, name)
		if err != nil {
			t.Errorf("rival: %v", err)
			close(took)
			return
		}
		took <- time.Now()
		_ = l.Release(ctx)
	}()
	return took
}

// diesBeforeRival polls until pid is no longer running and fails the test
// if the rival takes the lock first. It returns when the death was seen,
// once the rival has taken the lock.
func diesBeforeRival(t *testing.T, pid int, took <-chan time.Time) (dead time.Time) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for dead.IsZero() {
		select {
		case at, ok := <-took:
			if !ok {
				t.Fatal("the rival could not take the lock")
			}
			if alive(pid) {
				t.Fatalf("the rival took the lock at %s while the holder's command (pid %d) still ran",
					at.Format(time.StampMilli), pid)
			}
			return time.Now() // died between two polls, just before
		case <-tick.C:
			if !alive(pid) {
				dead = time.Now()
			}
		}
	}
	if _, ok := <-took; !ok {
		t.Fatal("the rival could not take the lock")
	}
	return dead
}

// A holder whose network swallows its requests (accepts, never answers):
// the command is dead by the lease's trust deadline (plus noise), before the
// rival can take the lock, and s3lock itself exits then, not when its hanging
// renewal gives up. The trust deadline — last confirmed renewal's send time +
// 2.7s — is not visible from outside; the store's view of the lease
// (Last-Modified, one-second resolution, + 3s + 2s slack) is 1.3s to 3.3s
// later. So the test asserts the command dead 0.8s before the store's lapse:
// within 0.5s of the deadline in the worst case, within 2.5s in the best. The
// SDK's own tests (s3lock/deadline_test.go) hold the lease to 0.5s of its
// exact deadline.
func TestRunDeadline_BlackholedHolderKillsCommandAtDeadline(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if !c.ns.Target.Local {
		t.Skip("needs the local server behind a proxy of the test's own")
	}
	p := s3test.NewProxy(t, c.ns.Target.Endpoint)
	name := c.name("blackholed")
	cmd, stderr, pid := startStubborn(t, c, name, "--endpoint", p.URL)
	type exit struct {
		code int
		at   time.Time
	}
	exited := make(chan exit, 1)
	go func() { code := waitExit(t, cmd); exited <- exit{code, time.Now()} }()
	time.Sleep(1500 * time.Millisecond) // a renewal or two
	p.Blackhole()
	holed := time.Now()
	lapse := c.current(name).ExpiresAt
	took := rivalTakes(t, c, name)

	dead := diesBeforeRival(t, pid, took)
	if limit := lapse.Add(-800 * time.Millisecond); dead.After(limit) {
		t.Errorf("the command died at %s, more than 0.5s after its lease's trust deadline (at the latest %s)",
			dead.Format(time.StampMilli), limit.Add(-500*time.Millisecond).Format(time.StampMilli))
	}
	// s3lock's own lease ends by its timer, not when the hanging renewal
	// gives up: it reports the loss and exits before the lease could lapse.
	e := <-exited
	t.Logf("blackholed at %s; command dead at %s; s3lock exited at %s; the store's lapse %s",
		holed.Format(time.StampMilli), dead.Format(time.StampMilli), e.at.Format(time.StampMilli), lapse.Format(time.StampMilli))
	if !e.at.Before(lapse) {
		t.Errorf("s3lock exited at %s, after its lease could lapse at %s: it waited for a request, not its deadline",
			e.at.Format(time.StampMilli), lapse.Format(time.StampMilli))
	}
	if e.code != exitLost {
		t.Errorf("s3lock exited %d, want %d (lease lost); stderr: %s", e.code, exitLost, stderr.String())
	}
}

// A stopped s3lock can neither renew nor kill: its watchdog, which it tells each
// renewed deadline, kills the command when the deadline passes unrenewed —
// whether s3lock alone or its whole process group (the command has its own)
// is stopped, as a CI runner pausing a job does.
func TestRunDeadline_StoppedS3lockCannotLetCommandOutliveLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		group bool
	}{{"s3lock alone", false}, {"s3lock's process group", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			name := c.name("stopped")
			cmd, stderr, pid := startStubborn(t, c, name)
			target := cmd.Process.Pid
			if tc.group {
				target = -target
			}
			if err := syscall.Kill(target, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			diesBeforeRival(t, pid, rivalTakes(t, c, name))
			// The lease lapsed: s3lock's timer fires as soon as it runs again.
			if err := syscall.Kill(target, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd); code != exitLost {
				t.Errorf("s3lock exited %d, want %d (lease lost); stderr: %s", code, exitLost, stderr.String())
			}
			if !strings.Contains(stderr.String(), "watchdog killed the command") && !strings.Contains(stderr.String(), "killing the command") {
				t.Errorf("stderr does not say why the command was killed: %s", stderr.String())
			}
		})
	}
}

// Killing the watchdog must not orphan the command or anything it started:
// s3lock kills the command's process group before it releases the lease,
// and exits with the watchdog-died code.
func TestRunDeadline_KilledWatchdogTakesCommandDownBeforeRelease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("watchdog-killed")
	pidFile := filepath.Join(c.dir, "pids")
	var stderr testkit.Buffer
	// The command starts a child of its own, which the kernel's parent-death
	// signal of the command would not reach.
	script := `trap '' TERM; sleep 300 & echo "$$ $PPID $!" > "$0.tmp" && mv "$0.tmp" "$0"; while :; do sleep 0.05; done`
	cmd := c.command(t.Context(), "run", "--lease", "3s", name, "--", "sh", "-c", script, pidFile)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(pidFile, "\n") })
	t.Cleanup(func() { // in case the test fails before s3lock killed them
		for _, pid := range readPids(t, pidFile) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	pids := readPids(t, pidFile)
	command, watchdog, grandchild := pids[0], pids[1], pids[2]
	if watchdog == cmd.Process.Pid {
		t.Fatalf("the command's parent is s3lock itself (pid %d): there is no watchdog", watchdog)
	}
	if err := syscall.Kill(watchdog, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Read the lock first, then the processes: a lock seen free while a
	// process is still running means the release came first.
	for limit := time.Now().Add(processLimit); ; {
		if time.Now().After(limit) {
			t.Fatalf("the lease was not released within %s of the watchdog's death; stderr: %s", processLimit, stderr.String())
		}
		free := !c.current(name).Held
		running := alive(command) || alive(grandchild)
		if free && running {
			t.Fatalf("the lease was released while the command (pid %d) or its child (pid %d) still ran", command, grandchild)
		}
		if free {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := waitExit(t, cmd); code != exitWatchdogDied {
		t.Errorf("s3lock exited %d, want %d (watchdog died); stderr: %s", code, exitWatchdogDied, stderr.String())
	}
	if !strings.Contains(stderr.String(), "watchdog process") {
		t.Errorf("stderr does not explain the watchdog's death: %s", stderr.String())
	}
}

// readPids reads the pids a test command wrote to path.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %q is not a pid", path, f)
		}
		pids = append(pids, n)
	}
	return pids
}

// What a command leaves running in its process group when it exits would
// outlive the lease: s3lock kills it, and says so, before releasing.
func TestRun_LeftoverProcessesKilledBeforeRelease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("leftovers")
	pidFile := filepath.Join(c.dir, "pids")
	r := c.run("run", name, "--", "sh", "-c", `sleep 300 & echo $! > "$0"`, pidFile)
	pids := readPids(t, pidFile)
	if alive(pids[0]) {
		_ = syscall.Kill(pids[0], syscall.SIGKILL)
		t.Fatalf("the command's background process (pid %d) outlived the lease; %s", pids[0], r)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "left processes running") {
		t.Fatalf("got %s; want exit 0 and a word about the processes killed", r)
	}
}

// Descriptors s3lock inherited (a make jobserver's, say) reach the command
// as they did before there was a watchdog; the watchdog's own do not.
func TestRun_InheritedDescriptorsReachTheCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := filepath.Join(c.dir, "fd3")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := c.command(t.Context(), "run", "--quiet", c.name("fds"), "--", "sh", "-c",
		`echo inherited >&3; ls /proc/self/fd | wc -l >&3; env | grep -c S3LOCK_GUARD >&3 || true`)
	cmd.ExtraFiles = []*os.File{f}
	if code := func() int { _ = cmd.Start(); return waitExit(t, cmd) }(); code != 0 {
		t.Fatalf("s3lock exited %d", code)
	}
	b, _ := os.ReadFile(out)
	lines := strings.Fields(string(b))
	if len(lines) != 3 || lines[0] != "inherited" {
		t.Fatalf("the command's descriptor 3 got %q; want s3lock's own descriptor 3", b)
	}
	// As many as the same shell started directly with the same descriptor 3
	// has (the test process's own inherited ones included): nothing of the
	// watchdog's.
	plain := exec.Command("sh", "-c", "ls /proc/self/fd | wc -l")
	plain.ExtraFiles = []*os.File{f}
	want, err := plain.Output()
	if err != nil {
		t.Fatal(err)
	}
	if lines[1] != strings.TrimSpace(string(want)) || lines[2] != "0" {
		t.Errorf("the command has %s descriptors (want %s, as without s3lock) and %s S3LOCK_GUARD variables (want 0)",
			lines[1], strings.TrimSpace(string(want)), lines[2])
	}
}
