package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// TestToken_ASignalStopsAReadThatNeverEnds: `s3lock release --token @FIFO`
// with no writer on the FIFO hung for ten minutes until SIGKILL, and
// `sleep 30 | s3lock release --token -` ignored SIGINT and SIGTERM (issue 35,
// found by a new user): the read blocked while the signal only cancelled a
// context no one looked at. Now SIGTERM ends it at once with the signal's
// exit code and a sentence.
func TestToken_ASignalStopsAReadThatNeverEnds(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := c.command(t.Context(), "release", "--token", "@"+fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// The kernel shows a process blocked opening a FIFO without a writer
	// as waiting in wait_for_partner (fs/pipe.c): the CLI has started, set
	// up its signals and is blocked in the read.
	testkit.Eventually(t, 30*time.Second, "s3lock to block opening the FIFO", func() bool {
		return blockedIn(cmd.Process.Pid, "wait_for_partner")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitSignal+int(syscall.SIGTERM) ||
		!strings.Contains(stderr.String(), "stopped reading the token from "+fifo+": interrupted by SIGTERM") {
		t.Fatalf("s3lock release --token @FIFO after SIGTERM: %v, exit %d, stderr %q; want exit %d saying it stopped reading",
			err, code, stderr.String(), exitSignal+int(syscall.SIGTERM))
	}
}

// blockedIn reports whether a thread of process pid waits in the kernel
// function fn (its wchan).
func blockedIn(pid int, fn string) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
	for _, w := range tasks {
		if b, err := os.ReadFile(w); err == nil && strings.TrimSpace(string(b)) == fn {
			return true
		}
	}
	return false
}
