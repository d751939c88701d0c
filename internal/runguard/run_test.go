package runguard

import (
	"os"
	"os/exec"
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
	a, b := me, me
	b.PID++
	sa, _ := a.socket()
	sb, _ := b.socket()
	if sa == sb {
		t.Errorf("two runs share the socket %s", sa)
	}
}

// The directory of the guards' sockets is the user's alone.
func TestDir_PrivateToTheUser(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := dir()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, mode %v; want 0700", d, err, fi.Mode())
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := dir(); err == nil || !strings.Contains(err.Error(), "mode 0700") {
		t.Errorf("dir() with a directory others can read = %v; want it refused", err)
	}
}
