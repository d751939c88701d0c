//go:build linux

package runguard

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Runs in pid namespaces of their own, as in containers: the test binary
// runs a helper (below) as the init of a new pid namespace, or under one,
// through unshare(1), and reports what it found.

func init() {
	helpers["__s3lock_test_ns"] = helperNamespace
	helpers["__s3lock_test_ends"] = helperEndsWithTerraform
	helpers["__s3lock_test_tree"] = helperTreeUnderInit
	helpers["__s3lock_test_forprovider"] = helperForProvider
}

// inNamespace runs the helper named role in a new pid namespace and returns
// what it printed. Without init the helper is the namespace's init (pid 1),
// through setsid, so that it leads its process group and session as a
// container's entrypoint does; with init (a shell's path and "-c"), init is
// pid 1 and runs the helper as its child. It skips the test where unshare
// cannot make a pid namespace (it needs root).
func inNamespace(t *testing.T, role string, init ...string) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare cannot make a pid namespace here: %v: %s", err, out)
	}
	args := []string{"--pid", "--fork", "--mount-proc"}
	if len(init) == 0 {
		args = append(args, "setsid", os.Args[0], role)
	} else {
		// A second command keeps the shell from exec'ing the helper.
		args = append(append(args, init...), `"$0" `+role+`; true`, os.Args[0])
	}
	out, err := exec.Command(unshare, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("unshare %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// In a pid namespace of its own (a container), a run's identity names that
// namespace, which the host's processes do not share: two containers with
// terraform as pid 1 have different guards.
func TestRun_NamesItsPidNamespace(t *testing.T) {
	mine, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var theirs Run
	if err := json.Unmarshal([]byte(inNamespace(t, "__s3lock_test_ns")), &theirs); err != nil {
		t.Fatal(err)
	}
	if theirs.PID != 1 || theirs.NS == "" || theirs.NS == mine.NS || theirs.Boot != mine.Boot {
		t.Fatalf("the init of a new pid namespace is the run %+v, this process %+v; want pid 1 in another namespace, one boot", theirs, mine)
	}
	a, _ := theirs.socket()
	other := theirs
	other.NS = mine.NS
	if b, _ := other.socket(); a == b {
		t.Errorf("pid 1 of two namespaces, same start and boot, share the socket %s", a)
	}
}

func helperNamespace() int {
	r, err := Of(os.Getpid())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// The guard dies with terraform when terraform is its container's init, or
// runs under an init that exits with it (tini, Docker's --init): the
// provider warns that the lease will lapse. A shell that runs terraform is
// not known to end with it: no warning.
func TestRun_EndsWithTerraform(t *testing.T) {
	if got := inNamespace(t, "__s3lock_test_ends"); !strings.Contains(got, "init process (pid 1)") {
		t.Errorf("terraform as pid 1: %q; want it to say the guard ends with terraform", got)
	}
	tini := filepath.Join(t.TempDir(), "tini")
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tini, b, 0o755); err != nil { // a shell named tini: pid 1's name is what counts
		t.Fatal(err)
	}
	if got := inNamespace(t, "__s3lock_test_ends", tini, "-c"); !strings.Contains(got, "runs under tini") {
		t.Errorf("terraform under tini: %q; want it to say the guard ends with terraform", got)
	}
	if got := inNamespace(t, "__s3lock_test_ends", sh, "-c"); got != "" {
		t.Errorf("terraform under a shell as pid 1: %q; want no reason", got)
	}
}

func helperEndsWithTerraform() int {
	r, err := Of(os.Getpid())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(r.EndsWithTerraform())
	return 0
}

// A container whose entrypoint is a shell (pid 1, leading its process group
// and session) runs terraform, then its next command: that command, a child
// of pid 1 in terraform's process group, is not an orphan of the run — it
// started after terraform ended. An orphan that terraform's command left
// while it ran is.
func TestTreeWatch_UnderAShellAsInit(t *testing.T) {
	var got map[string]string
	if err := json.Unmarshal([]byte(inNamespace(t, "__s3lock_test_tree")), &got); err != nil {
		t.Fatal(err)
	}
	if got["next command"] != "" {
		t.Errorf("after a clean end the shell's next command counts as the run's: %q", got["next command"])
	}
	if !strings.Contains(got["orphan"], "orphan") {
		t.Errorf("an orphan the run left was not found: %q", got["orphan"])
	}
}

// helperTreeUnderInit plays the shell of TestTreeWatch_UnderAShellAsInit: it
// runs a "terraform" to its end while a treeWatch follows it, starts the next
// command, and reports what the watch says; then once more with a
// "terraform" that leaves an orphan.
func helperTreeUnderInit() int {
	report := map[string]string{}
	watch := func(script string) (*treeWatch, error) {
		cmd := exec.Command("sh", "-c", script)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		run, err := Of(cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		w := newTreeWatch(run)
		go func() { _ = cmd.Wait() }()
		for w.running() {
			time.Sleep(pollInterval / 5)
		}
		return w, nil
	}
	w, err := watch("sleep 0.3")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	next := exec.Command("sleep", "5")
	if err := next.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	defer func() { _ = next.Process.Kill() }()
	time.Sleep(pollInterval)
	report["next command"] = w.outlived()
	// Its command leaves `sleep` running and exits: the orphan is
	// re-parented to this process, pid 1.
	if w, err = watch("sh -c 'sleep 5 &'; sleep 0.3"); err != nil {
		fmt.Println(err)
		return 1
	}
	// Whether a poll saw the sleep in the instant it was still a
	// descendant is a matter of timing (under load, one often does, and
	// the watch then names it as a descendant). Forget what the polls saw,
	// as polls that missed it would have: the orphan must be found as one.
	clear(w.seen)
	report["orphan"] = w.outlived()
	b, _ := json.Marshal(report)
	fmt.Println(string(b))
	return 0
}

// A provider started through a wrapper that does not exec it (a script
// between terraform and the provider) would take the wrapper for the run,
// and each phase would be a run of its own: ForProvider refuses it. A
// wrapper that execs the provider is no wrapper at all.
func TestForProvider_RefusesAWrapper(t *testing.T) {
	run := func(script string) string {
		cmd := exec.Command("sh", "-c", script, os.Args[0])
		cmd.Env = append(os.Environ(), magicCookieKey+"=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
			"XDG_RUNTIME_DIR="+t.TempDir(), TurnOffEnv+"=")
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if got := run(`"$0" __s3lock_test_forprovider; true`); !strings.Contains(got, "not started by Terraform or OpenTofu directly") ||
		!strings.Contains(got, "make it exec the provider") {
		t.Errorf("through a wrapper: %q; want it refused", got)
	}
	if got := run(`exec "$0" __s3lock_test_forprovider`); got != "ok" {
		t.Errorf("through a wrapper that execs the provider: %q; want the run", got)
	}
}

func helperForProvider() int {
	if _, err := ForProvider(false); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// Where terraform's session cannot be seen (/proc shows 0 when its leader
// is outside the reader's pid namespace: `unshare --pid` without setsid, a
// CI runner's job), a descendant that left for a session of its own cannot
// be told from one of the run: the guard counts it as the run's, and the
// lease lapses instead of being released. With terraform's session known,
// the same daemon is not the run's.
func TestTree_AnUnknownSessionCountsEveryDescendantAsTheRuns(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("processes are read through /proc (Linux)")
	}
	daemon := exec.Command("sleep", "300")
	daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	p, err := procOf(daemon.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.SID != p.PID {
		t.Fatalf("the daemon %+v does not lead a session of its own", p)
	}
	terraformsSession := p.SID + 1 // any session but the daemon's
	for _, tc := range []struct {
		sid     int
		theRuns bool
	}{{sid: terraformsSession, theRuns: false}, {sid: 0, theRuns: true}} {
		w := &treeWatch{self: os.Getpid(), pgid: -1, sid: tc.sid, seen: map[int]uint64{p.PID: p.Start}}
		if got := w.outlived(); (got != "") != tc.theRuns {
			t.Errorf("terraform's session %d: outlived() = %q; want the daemon counted as the run's: %v", tc.sid, got, tc.theRuns)
		}
	}
}
