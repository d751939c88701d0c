package runguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A run is its terraform process: the same process always gives the same
// run, and a run ends when its process does (a reused pid is another run).
func TestRun_IdentifiesAProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("runs are told apart through /proc (Linux)")
	}
	me, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	again, err := Of(os.Getpid())
	if err != nil || again != me {
		t.Fatalf("Of(self) = %+v, %v; then %+v", me, err, again)
	}
	if !me.Alive() || me.Start == 0 || me.Boot == "" {
		t.Fatalf("Of(self) = %+v, alive %v; want a live run with a start time and a boot id", me, me.Alive())
	}
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(child.Process.Pid); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Of(exited process) = %v; want an error saying it is gone", err)
	}
	reused := me
	reused.Start++
	if reused.Alive() {
		t.Errorf("a run whose pid now belongs to a process started at another time is alive")
	}
	if again, err := parseRun(me.args()); err != nil || again != me {
		t.Errorf("the guard's arguments %q give back %+v, %v; want %+v", me.args(), again, err, me)
	}
}

// Two runs never share a guard: runs that differ in any of their pid, start
// time, boot or pid namespace have different sockets — also two containers
// that share /tmp, each with terraform as pid 1, started at the same tick.
func TestRun_SocketsKeepRunsApart(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	base := Run{PID: 1, Start: 4242, Boot: "0b5e2f3c-9a6d-4f0e-8e1a-2c7d9b1f0a11", NS: "pid:[4026532301]"}
	others := map[string]Run{
		"pid":           {PID: 2, Start: base.Start, Boot: base.Boot, NS: base.NS},
		"start time":    {PID: base.PID, Start: base.Start + 1, Boot: base.Boot, NS: base.NS},
		"boot":          {PID: base.PID, Start: base.Start, Boot: "1b5e2f3c-9a6d-4f0e-8e1a-2c7d9b1f0a11", NS: base.NS},
		"pid namespace": {PID: base.PID, Start: base.Start, Boot: base.Boot, NS: "pid:[4026532302]"},
	}
	sock, err := base.socket()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := base.socket(); again != sock {
		t.Fatalf("one run has two sockets: %s and %s", sock, again)
	}
	for what, other := range others {
		if s, _ := other.socket(); s == sock {
			t.Errorf("runs that differ in their %s share the socket %s", what, s)
		}
	}
}

// ForProvider says why a provider process has no run, with the reason the
// provider names in its diagnostic: not started by terraform (no plugin
// handshake, or -debug), the guard turned off, or a guard directory others
// can read; otherwise the run is the provider's parent.
func TestForProvider_SaysWhyThereIsNoRun(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("runs are told apart through /proc (Linux)")
	}
	private := t.TempDir()
	shared := t.TempDir()
	sharedDir := filepath.Join(shared, fmt.Sprintf("s3lock-run-%d", os.Getuid()))
	if err := os.Mkdir(sharedDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sharedDir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		debug  bool
		cookie string
		off    string
		dir    string
		want   error
	}{
		{name: "served in-process", dir: private, want: ErrNotTerraform},
		{name: "debug mode", debug: true, cookie: "c", dir: private, want: ErrNotTerraform},
		{name: "turned off", cookie: "c", off: "off", dir: private, want: ErrTurnedOff},
		{name: "turned off with 0", cookie: "c", off: "0", dir: private, want: ErrTurnedOff},
		{name: "a directory others can read", cookie: "c", dir: shared, want: ErrDirUnusable},
		{name: "started by terraform", cookie: "c", off: "on", dir: private},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(magicCookieKey, tc.cookie)
			t.Setenv(TurnOffEnv, tc.off)
			t.Setenv("XDG_RUNTIME_DIR", tc.dir)
			run, err := ForProvider(tc.debug)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("ForProvider = %+v, %v; want %v", run, err, tc.want)
				}
				return
			}
			parent, perr := Of(os.Getppid())
			if err != nil || perr != nil || run != parent {
				t.Fatalf("ForProvider = %+v, %v; want the parent's run %+v (%v)", run, err, parent, perr)
			}
		})
	}
}
