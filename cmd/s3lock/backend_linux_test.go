//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// A dying s3lock gives its command exactly one SIGTERM (Terraform takes a
// second as "exit now" and keeps no errored.tfstate): the kernel's
// parent-death signal comes once per thread of s3lock the command is handed
// to as s3lock dies, so outside a terminal a relay stands between them.
func TestBackendRun_ACommandGetsOneSIGTERMWhenS3lockDies(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // the repeats came in some runs, not all (about one in three)
		record := filepath.Join(t.TempDir(), "record")
		cmd := c.command(t.Context(), "backend", "run", "--key", c.name("app/terraform.tfstate"), "--", self)
		cmd.Env = append(cmd.Env, envAsTerraform+"=count-sigterm", "S3LOCK_TEST_RECORD="+record)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		testkit.Eventually(t, processLimit, "the command to start", func() bool { return fileHas(record, "ready") })
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		testkit.Eventually(t, processLimit, "the command to get SIGTERM", func() bool { return fileHas(record, "TERM") })
		time.Sleep(500 * time.Millisecond) // a repeat comes within milliseconds
		b, _ := os.ReadFile(record)
		if n := strings.Count(string(b), "TERM"); n != 1 {
			t.Fatalf("run %d: the command got SIGTERM %d times when s3lock died; want once", i+1, n)
		}
	}
}

// What the command leaves running in its process group (a killed
// terragrunt's terraform, say) is killed before the state's lock is
// released: it must not go on applying while the next run holds the state.
func TestBackendRun_KillsWhatTheCommandLeftBeforeReleasing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pidFile := filepath.Join(t.TempDir(), "leftover")
	r := c.run("backend", "run", "--key", c.name("app/terraform.tfstate"), "--", "sh", "-c", `sleep 300 & echo $! > "$0"`, pidFile)
	if r.code != 0 || !strings.Contains(r.stderr, "left processes running") {
		t.Fatalf("backend run of a command that leaves a process: %s; want exit 0 and the leftover reported", r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); err == nil && len(fields) > 0 && fields[0] != "Z" {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the command's leftover process %d still runs (state %s) after backend run exited", pid, fields[0])
	}
}
