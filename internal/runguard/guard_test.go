//go:build unix

package runguard

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The guard's decisions, against the local S3 server, with a stand-in for
// terraform: a process of the test's own whose end is the run's end. The
// test binary is also the guard (TestMain), as the provider binary is.
//
// The test process plays the provider processes, but it is an ancestor of
// terraform, not its child: the guards it starts (they inherit
// testAcceptAncestorsEnv) also admit the ancestors of the run's terraform.
// TestGuard_RefusesProcessesOfOtherRuns checks the admission itself with a
// process that is neither.

// testAcceptAncestorsEnv makes a guard started by this test binary admit the
// ancestors of the run's terraform (acceptRunAncestors).
const testAcceptAncestorsEnv = "S3LOCK_RUNGUARD_TEST_ACCEPT_ANCESTORS"

// dialArg makes this test binary a stranger to a run: it greets the guard
// at the socket os.Args[2] as a provider of the run os.Args[3:] (Run.args)
// and prints the guard's answer ("ok" or the error).
const dialArg = "__s3lock_test_dial"

// helpers are the test binary's roles in processes of the tests' own, by
// their first argument: each prints what it found and returns the exit code
// (namespace_test.go fills it).
var helpers = map[string]func() int{}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case GuardArg:
			acceptRunAncestors = os.Getenv(testAcceptAncestorsEnv) == "1"
			os.Exit(Serve(os.Args[2:]))
		case dialArg:
			os.Exit(strangerDial(os.Args[2], os.Args[3:]))
		}
		if helper, ok := helpers[os.Args[1]]; ok {
			os.Exit(helper())
		}
	}
	if err := os.Setenv(testAcceptAncestorsEnv, "1"); err != nil {
		panic(err)
	}
	os.Exit(s3test.Main(m))
}

// strangerDial is dialArg's body.
func strangerDial(sock string, runArgs []string) int {
	run, err := parseRun(runArgs)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer conn.Close()
	if err := (&Client{run: run}).hello(conn); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// fakeRun is a terraform stand-in: a shell whose children the test decides.
type fakeRun struct {
	t   *testing.T
	cmd *exec.Cmd
	run Run
}

// startRun starts `sh -c script` as the run's terraform, in a process group
// of its own.
func startRun(t *testing.T, script string) *fakeRun {
	t.Helper()
	return startRunIn(t, script, 0)
}

// startRunIn starts `sh -c script` as the run's terraform in the process
// group pgid (0: a group of its own).
func startRunIn(t *testing.T, script string, pgid int) *fakeRun {
	t.Helper()
	return startRunAs(t, script, &syscall.SysProcAttr{Setpgid: true, Pgid: pgid})
}

// startRunAs starts `sh -c script` as the run's terraform with attr, which
// must make it lead a process group (the test ends the run by killing it).
func startRunAs(t *testing.T, script string, attr *syscall.SysProcAttr) *fakeRun {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("runs are told apart through /proc (Linux)")
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	run, err := Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRun{t: t, cmd: cmd, run: run}
}

// end ends the run's terraform (SIGKILL of the shell alone).
func (f *fakeRun) end() {
	f.t.Helper()
	if err := f.cmd.Process.Kill(); err != nil {
		f.t.Fatal(err)
	}
	_ = f.cmd.Wait()
}

// env is a namespace on the local server and the provider's view of it.
type env struct {
	ns  *s3test.Namespace
	cfg ClientConfig
	sdk *s3lock.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ns := s3test.New(t)
	tg := ns.Target
	if !tg.Local {
		t.Skip("needs the local server (static credentials for the guard)")
	}
	sdk, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("provider"))
	if err != nil {
		t.Fatal(err)
	}
	return &env{ns: ns, sdk: sdk, cfg: ClientConfig{Holder: "provider", AWS: awsclient.Options{
		Region: tg.Region, AccessKey: tg.AccessKey, SecretKey: tg.SecretKey, Endpoint: tg.Endpoint, UsePathStyle: tg.PathStyle,
	}}}
}

// open does what a provider's Open does: claim, and if granted, acquire and
// hand the lease to the guard.
func (e *env) open(t *testing.T, c *Client, name string) *Lease {
	t.Helper()
	held, err := c.Claim(t.Context(), e.cfg, e.ns.Bucket, e.ns.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	if held != nil {
		return held
	}
	l, err := e.sdk.TryAcquire(t.Context(), e.ns.Name(name), s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := c.Adopt(t.Context(), l.Detach(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return adopted
}

// settled waits until the lock is no longer held and returns its state.
func (e *env) settled(t *testing.T, name string) s3lock.State {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := e.sdk.Current(t.Context(), e.ns.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGuard_CleanEndReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease := e.open(t, c, "clean")
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	if st := e.settled(t, "clean"); !st.Released || st.Epoch != lease.Token.Epoch {
		t.Fatalf("after a clean end the lock is %+v; want epoch %d released", st, lease.Token.Epoch)
	}
}

// A provider process that goes away without a goodbye was killed (with
// terraform, or by it): the run's leases lapse. They are the run's, not the
// connection's: until the run ends the guard renews them, and another
// provider process of the run finds them held.
func TestGuard_ProviderWithoutGoodbyeLetsLeasesLapse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease := e.open(t, c, "no-bye")
	c.mu.Lock()
	_ = c.conn.Close() // gone without a word
	c.mu.Unlock()
	dropped, err := e.sdk.Current(t.Context(), e.ns.Name("no-bye"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, err := e.sdk.Current(t.Context(), e.ns.Name("no-bye"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Renewals > dropped.Renewals {
			break
		}
		if !st.Held || time.Now().After(deadline) {
			t.Fatalf("after its provider's connection dropped the lock is %+v; want the guard to go on renewing it\n%s", st, guardLog(f.run))
		}
	}
	next := NewClient(f.run)
	if held := e.open(t, next, "no-bye"); held.Lost != "" || held.Token != lease.Token {
		t.Fatalf("the next provider process of the run found %+v; want the run's lease %+v, held", held, lease.Token)
	}
	if err := next.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	if st := e.settled(t, "no-bye"); st.Released {
		t.Fatalf("after a provider vanished the lock is %+v; want it left to lapse", st)
	}
}

// A process of the run that connects, names the run and goes away without a
// request is no provider at work: the run still ends cleanly (it once made
// the run's leases lapse).
func TestGuard_AConnectionThatOnlyGreetsDoesNotLetLeasesLapse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease := e.open(t, c, "greeting")
	conn := dialGuard(t, f.run)
	if err := c.hello(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	endCleanly(t, e, f, c, "greeting", lease)
}

// An adopt takes only the full token of an acquisition: by its epoch alone
// (no nonce) the guard once took over another holder's lease and renewed it
// while that holder's own renewals went on too.
func TestGuard_RefusesAnAdoptWithoutANonce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	name := e.ns.Name("epoch-only")
	if held, err := c.Claim(t.Context(), e.cfg, e.ns.Bucket, name); err != nil || held != nil {
		t.Fatalf("Claim = %+v, %v; want it granted", held, err)
	}
	someone, err := s3lock.New(e.ns.Client, e.ns.Bucket, s3lock.WithHolder("someone-else"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := someone.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theirs.Release(t.Context()) })
	epoch := theirs.Token()
	epoch.Nonce = ""
	if adopted, err := c.Adopt(t.Context(), epoch, e.cfg); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("adopting epoch %d without its nonce = %+v, %v; want it refused, naming the nonce", epoch.Epoch, adopted, err)
	}
	if err := theirs.Renew(t.Context()); err != nil {
		t.Fatalf("the holder's renewal after the refused adopt: %v; want its lease untouched", err)
	}
	if st, err := someone.Current(t.Context(), name); err != nil || st.Renewals != 1 || st.Holder != "someone-else" {
		t.Fatalf("the lock is %+v (%v); want it held by someone-else, renewed once (by them)", st, err)
	}
	if held, err := c.Claim(t.Context(), e.cfg, e.ns.Bucket, name); err != nil || held != nil {
		t.Fatalf("Claim after the refused adopt = %+v, %v; want it granted again", held, err)
	}
	if err := c.Abandon(t.Context(), e.cfg, e.ns.Bucket, name); err != nil {
		t.Fatal(err)
	}
}

// A request line is read no further than maxLine: one of 1 MiB (a 256 MiB
// one once raised the guard to 298 MB) is refused and its connection closed
// before its sender could write it all, and the guard goes on serving the
// run.
func TestGuard_RefusesOverlongLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease := e.open(t, c, "long-lines")
	long := []byte(`{"op":"status","token":{"bucket":"b","name":"` + strings.Repeat("a", 1<<20) + `","epoch":1,"nonce":"n"}}` + "\n")
	for _, tc := range []struct {
		name  string
		greet bool
	}{{name: "as its first line"}, {name: "after its greeting", greet: true}} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialGuard(t, f.run)
			if tc.greet {
				if err := c.hello(conn); err != nil {
					t.Fatal(err)
				}
			}
			// The kernel holds little of what is written: the guard's
			// reading is what lets the writer go on.
			if err := conn.(*net.UnixConn).SetWriteBuffer(16 << 10); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(time.Minute)) // against a hang, not a timing assertion
			n, err := conn.Write(long)
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("writing a %d-byte line wrote %d bytes: %v; want the guard to close the connection first", len(long), n, err)
			}
			answer, _ := bufio.NewReader(conn).ReadString('\n')
			if want := fmt.Sprintf("longer than %d bytes", maxLine); !strings.Contains(answer, want) {
				t.Fatalf("the guard answered a %d-byte line (%d written) with %q; want it refused as %s", len(long), n, answer, want)
			}
		})
	}
	if held, err := c.Status(t.Context(), lease.Token); err != nil || held.Lost != "" {
		t.Fatalf("the run's provider after the refusals: %+v, %v; want its lease held", held, err)
	}
	endCleanly(t, e, f, c, "long-lines", lease)
}

// dialGuard connects to run's guard, which must be serving.
func dialGuard(t *testing.T, run Run) net.Conn {
	t.Helper()
	sock, err := run.socket()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A child of terraform that outlives it means terraform was killed, even
// when every provider process said goodbye.
func TestGuard_ChildOutlivingTerraformLetsLeasesLapse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "sleep 300 & wait")
	c := NewClient(f.run)
	e.open(t, c, "child")
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * pollInterval) // the guard has seen the child
	f.end()
	if st := e.settled(t, "child"); st.Released {
		t.Fatalf("with terraform's child still running the lock is %+v; want it left to lapse", st)
	}
}

// Two provider processes of one run claim one lock at once: one acquires,
// the other waits for it and gets the same lease.
func TestGuard_ConcurrentClaimsShareOneLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	a, b := NewClient(f.run), NewClient(f.run)
	var wg sync.WaitGroup
	got := make([]*Lease, 2)
	for i, c := range []*Client{a, b} {
		wg.Go(func() { got[i] = e.open(t, c, "shared") })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got[0].Token != got[1].Token {
		t.Fatalf("two claims of one lock got %+v and %+v; want one lease", got[0].Token, got[1].Token)
	}
	for _, c := range []*Client{a, b} {
		if err := c.Bye(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	f.end()
	if st := e.settled(t, "shared"); !st.Released || st.Epoch != 1 {
		t.Fatalf("after the run the lock is %+v; want its one epoch released", st)
	}
}

// A guard that dies mid-run cannot be replaced silently: the next guard
// reports the dead one's leases lost, and requests other than a claim do
// not start a guard at all.
func TestGuard_DeadGuardsLeasesReportedLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease := e.open(t, c, "dead")
	killGuard(t, f.run)
	if _, err := c.Status(t.Context(), lease.Token); err == nil {
		t.Fatal("Status after the guard died succeeded; want an error saying it is gone")
	}
	next := NewClient(f.run)
	if _, err := next.Status(t.Context(), lease.Token); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Status with no guard = %v; want it to fail without starting one", err)
	}
	held, err := next.Claim(t.Context(), e.cfg, e.ns.Bucket, e.ns.Name("dead"))
	if err != nil {
		t.Fatal(err)
	}
	if held == nil || held.Lost == "" || held.Token != lease.Token {
		t.Fatalf("Claim after the guard died = %+v; want the old lease, reported lost", held)
	}
}

// killGuard kills the run's guard.
func killGuard(t *testing.T, run Run) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 3 && args[1] == GuardArg && args[2] == strconv.Itoa(run.PID) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond) // until the client that started it has reaped it
			}
			return
		}
	}
	t.Fatal("no guard found")
}

// A guard admits the provider processes of its run only: a process that is
// not a child of the run's terraform is refused, whatever it claims, and so
// is a provider of another run that reaches the socket; the run's own
// provider goes on undisturbed.
func TestGuard_RefusesProcessesOfOtherRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startRun(t, "exec sleep 300")
	c := NewClient(a.run)
	lease := e.open(t, c, "admitted")
	sock, err := a.run.socket()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a process outside the run", func(t *testing.T) {
		out, err := exec.Command(os.Args[0], append([]string{dialArg, sock}, a.run.args()...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "serves that run's provider processes only") {
			t.Fatalf("a stranger claiming the run got %v: %s; want it refused", err, out)
		}
	})
	t.Run("a provider of another run", func(t *testing.T) {
		b := startRun(t, "exec sleep 300")
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		err = NewClient(b.run).hello(conn)
		if err == nil || !strings.Contains(err.Error(), "not of the run the provider belongs to") {
			t.Fatalf("a provider of %s greeting the guard of %s: %v; want it refused", b.run, a.run, err)
		}
	})
	t.Run("a request before naming the run", func(t *testing.T) {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(`{"op":"status","token":{}}` + "\n")); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(conn).ReadString('\n')
		if !strings.Contains(line, "must name its run") {
			t.Fatalf("a status request without hello got %q; want it refused", line)
		}
	})
	if held, err := c.Status(t.Context(), lease.Token); err != nil || held.Lost != "" {
		t.Fatalf("the run's own provider after the refusals: %+v, %v; want its lease held", held, err)
	}
	// The refused connections went away without a goodbye: they were no
	// provider processes of the run, and the run still ends cleanly.
	endCleanly(t, e, a, c, "admitted", lease)
}

// A provisioner's command that leaves a process running in the background
// (`cmd &`) and exits at once is gone before the guard could see the
// process as terraform's descendant; the process, now an orphan of the run
// in terraform's process group, still tells that terraform was killed: the
// leases lapse.
func TestGuard_OrphanOfTheRunLetsLeasesLapse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "started")
	f := startRun(t, "sh -c 'sleep 300 & touch "+marker+"'; exec sleep 300")
	waitFile(t, marker) // orphaned before the guard starts: it never sees it as terraform's
	c := NewClient(f.run)
	e.open(t, c, "orphan")
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	if st := e.settled(t, "orphan"); st.Released {
		t.Fatalf("with an orphan of the run still running the lock is %+v; want it left to lapse", st)
	}
}

// What terraform's parent starts after terraform — the next command of a
// script — and what another run of the same parent starts, in the same
// process group, are not the run's: a clean end still releases.
func TestGuard_OtherProcessesOfTheGroupAreNotTheRuns(t *testing.T) {
	t.Parallel()
	t.Run("the next command of its parent", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		f := startRun(t, "exec sleep 300")
		c := NewClient(f.run)
		lease := e.open(t, c, "sibling")
		sibling := exec.Command("sleep", "300")
		sibling.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: f.cmd.Process.Pid}
		if err := sibling.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sibling.Process.Kill(); _ = sibling.Wait() })
		endCleanly(t, e, f, c, "sibling", lease)
	})
	t.Run("another run started just before it", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		tmp := t.TempDir()
		goOn, started := filepath.Join(tmp, "go"), filepath.Join(tmp, "started")
		// The other run's terraform starts first and starts its child
		// once this run's terraform runs.
		other := startRun(t, "while [ ! -e "+goOn+" ]; do sleep 0.05; done; sleep 300 & touch "+started+"; wait")
		f := startRunIn(t, "exec sleep 300", other.cmd.Process.Pid)
		if err := os.WriteFile(goOn, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitFile(t, started)
		c := NewClient(f.run)
		lease := e.open(t, c, "other-run")
		endCleanly(t, e, f, c, "other-run", lease)
	})
	t.Run("what an ancestor above its parent starts", func(t *testing.T) {
		// As `go test` starts test binaries, one of which runs terraform,
		// all in one process group: the test process is terraform's
		// grandparent here.
		t.Parallel()
		e := newEnv(t)
		pidFile := filepath.Join(t.TempDir(), "terraform")
		parent := startRun(t, "sleep 300 & echo $! > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"; wait")
		waitFile(t, pidFile)
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		run, err := Of(pid)
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(run)
		lease := e.open(t, c, "ancestor")
		later := exec.Command("sleep", "300")
		later.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: parent.cmd.Process.Pid}
		if err := later.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = later.Process.Kill(); _ = later.Wait() })
		if err := c.Bye(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if st := e.settled(t, "ancestor"); !st.Released || st.Epoch != lease.Token.Epoch {
			t.Fatalf("after a clean end beside a later child of an ancestor the lock is %+v; want epoch %d released", st, lease.Token.Epoch)
		}
	})
}

// A process the run starts in a session of its own (setsid: a daemon a
// provisioner leaves running on purpose) is not the run's: though the guard
// saw it as terraform's descendant, a clean end still releases.
func TestGuard_ADaemonInASessionOfItsOwnIsNotTheRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tmp := t.TempDir()
	goOn, daemon := filepath.Join(tmp, "go"), filepath.Join(tmp, "daemon")
	// terraform leads a session of its own here, as in a terminal: where
	// the test's own session is led from outside its pid namespace (CI
	// runners, containers), /proc shows it as 0, and a guard that cannot
	// see terraform's session rightly counts every descendant as the run's
	// (TestTree_AnUnknownSessionCountsEveryDescendantAsTheRuns).
	f := startRunAs(t, "while [ ! -e "+goOn+" ]; do sleep 0.05; done; setsid sleep 300 </dev/null >/dev/null 2>&1 & "+
		"echo $! > "+daemon+".tmp && mv "+daemon+".tmp "+daemon+"; exec sleep 300", &syscall.SysProcAttr{Setsid: true})
	c := NewClient(f.run)
	lease := e.open(t, c, "daemon")
	if err := os.WriteFile(goOn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFile(t, daemon)
	b, err := os.ReadFile(daemon)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	t.Cleanup(func() { // runs first: the daemon as the guard saw it
		if t.Failed() {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Logf("the daemon, process %d: %s %v", pid, b, err)
		}
	})
	// $! names the shell's child before it has run setsid: under load it
	// can still be in terraform's session for a while, and then it is the
	// run's. The daemon this test is about is the one that left.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if p, err := procOf(pid); err == nil && p.SID == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never began a session of its own", pid)
		}
	}
	time.Sleep(3 * pollInterval) // the guard has seen it as terraform's descendant
	endCleanly(t, e, f, c, "daemon", lease)
}

// endCleanly ends the run f as terraform does after a clean end (its
// provider says goodbye, then terraform exits) and checks that the guard
// released the lease.
func endCleanly(t *testing.T, e *env, f *fakeRun, c *Client, name string, lease *Lease) {
	t.Helper()
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	if st := e.settled(t, name); !st.Released || st.Epoch != lease.Token.Epoch {
		t.Fatalf("after a clean end the lock is %+v; want epoch %d released\n%s", st, lease.Token.Epoch, guardLog(f.run))
	}
}

// guardLog returns what the guard of run logged (it keeps its log when it
// left a lease to lapse), to say why.
func guardLog(run Run) string {
	sock, err := run.socket()
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(logPath(sock))
	if err != nil {
		return err.Error()
	}
	return "the guard's log:\n" + string(b)
}

// waitFile waits until path exists (a guard against hangs, not a timing
// assertion).
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}
