package procfacts

import (
	"os"
	"os/exec"
	"testing"
)

// TestOf_ReadsThisProcessAndItsChild: the facts of this process and of a
// child it started agree with what the process itself knows, the child is
// among its descendants and in its process group, and a reaped child is
// gone.
func TestOf_ReadsThisProcessAndItsChild(t *testing.T) {
	self, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.Zombie || self.Start == 0 || self.Start > Now() {
		t.Fatalf("Of(self) = %+v; want ppid %d, running, started before now (%d)", self, os.Getppid(), Now())
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	kid := cmd.Process.Pid
	found := false
	for _, p := range Descendants(os.Getpid()) {
		found = found || p.PID == kid && p.PPID == os.Getpid() && p.Name == "sleep"
	}
	if !found {
		t.Errorf("Descendants(self) lacks the child %d (sleep)", kid)
	}
	if running, err := GroupRunning(self.PGID); err != nil || !running {
		t.Errorf("GroupRunning(own group %d) = %v, %v; want true", self.PGID, running, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := Of(kid); err == nil {
		t.Errorf("Of(reaped child %d) = nil error; want ErrGone", kid)
	}
}

// TestParseStat_NameWithParentheses: a command name may hold spaces and
// parentheses; the fields after its last ')' are read.
func TestParseStat_NameWithParentheses(t *testing.T) {
	stat := "42 (a) b (c) S 7 42 41 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"
	p, err := parseStat(42, stat)
	want := Process{PID: 42, PPID: 7, PGID: 42, SID: 41, Start: 12345, Name: "a) b (c"}
	if err != nil || p != want {
		t.Fatalf("parseStat = %+v, %v; want %+v", p, err, want)
	}
	if _, err := parseStat(42, "42 (x) S 1"); err == nil {
		t.Error("a short stat parsed")
	}
}
