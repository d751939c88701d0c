package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Faults around the run guard: each once let a run lose its exclusivity or
// its lease silently.

// extraModule writes a root module made of runConfig plus extra, and
// initializes it.
func (e *runLeaseEnv) extraModule(who, extra string) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), who)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(runConfig+extra), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.h.Init(e.t.Context(), dir); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return dir
}

// A terraform killed while the s3lock provider itself is busy (here waiting
// to create a managed s3lock_lease on a lock someone else holds): the
// provider process dies with terraform's pipes or outlives it, and either
// way the run's lease must lapse, not be released.
func TestE2E_RunLease_KilledWhileTheProviderIsBusy(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	blocked := e.ns.Name("blocked")
	other, err := e.sdk.TryAcquire(t.Context(), blocked, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Release(t.Context()) })
	dir := e.extraModule("busy", `
resource "s3lock_lease" "blocked" {
  bucket     = var.bucket
  name       = "`+blocked+`"
  depends_on = [terraform_data.change]
  timeouts {
    create = "10m"
  }
}
`)
	cmd := e.command(t.Context(), dir, "busy", "true", "apply", "-auto-approve")
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	testkit.Eventually(t, waitLimit, "the provider to wait for the blocked lock", func() bool {
		return strings.Contains(out.String(), "s3lock_lease.blocked: Creating")
	})
	time.Sleep(500 * time.Millisecond) // into the wait
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	st, _ := e.waitFree(time.Minute)
	if st.Released {
		t.Fatalf("the killed run's lease was released while its provider was busy; want it left to lapse: %+v", st)
	}
}

// Two provider configurations of one run (an alias with its own holder)
// take one lock: the run shares its one lease between them instead of
// waiting for itself.
func TestE2E_RunLease_TwoProviderConfigurationsShareTheRunsLease(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	dir := e.extraModule("aliases", `
provider "s3lock" {
  alias                       = "second"
  region                      = "us-east-1"
  access_key                  = var.access_key
  secret_key                  = var.secret_key
  endpoints                   = { s3 = var.endpoint }
  use_path_style              = true
  skip_credentials_validation = true
  holder                      = "second-configuration"
}

ephemeral "s3lock_lease" "second" {
  provider       = s3lock.second
  bucket         = var.bucket
  name           = var.lock_name
  lease_duration = "6s"
  wait_timeout   = "20s"
}

resource "terraform_data" "second" {
  input = "x"
  provisioner "local-exec" {
    command     = "test \"$A\" = \"$B\""
    environment = {
      A = ephemeral.s3lock_lease.run.epoch
      B = ephemeral.s3lock_lease.second.epoch
    }
  }
}
`)
	if out, err := e.command(t.Context(), dir, "aliases", "true", "apply", "-auto-approve").CombinedOutput(); err != nil {
		t.Fatalf("terraform apply with two configurations on one lock: %v\n%s", err, out)
	}
	if st, _ := e.waitFree(10 * time.Second); st.Epoch != 1 || !st.Released {
		t.Errorf("after the run the lock is %+v; want one epoch, released", st)
	}
}

// A run whose guard is killed mid-run (here while apply waits for "yes")
// must not go on under a second epoch that another run could have preceded:
// the next phase fails, saying the lease was lost.
func TestE2E_RunLease_KilledGuardFailsTheRun(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	dir := e.module("guard")
	cmd := e.command(t.Context(), dir, "guard", "true", "apply", "-input=true")
	cmd.Env = append(cmd.Env, "TF_INPUT=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, waitLimit, "terraform to ask for approval", func() bool { return strings.Contains(out.String(), "Enter a value") })
	held, err := e.sdk.Current(t.Context(), e.lock)
	if err != nil || !held.Held {
		t.Fatalf("the lock is %+v (%v) while apply waits for approval; want it held", held, err)
	}
	guard := guardOf(t, cmd.Process.Pid)
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if err == nil || !strings.Contains(out.String(), "Lease lost") {
		t.Fatalf("terraform went on after its run's guard was killed: %v\n%s", err, out.String())
	}
	if st, err := e.sdk.Current(t.Context(), e.lock); err != nil || st.Epoch != held.Epoch {
		t.Errorf("the lock is at %+v (%v); want no epoch after %d", st, err, held.Epoch)
	}
}

// guardOf finds the run guard of the terraform process pid.
func guardOf(t *testing.T, pid int) int {
	t.Helper()
	var found int
	testkit.Eventually(t, waitLimit, "the run guard", func() bool {
		matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, m := range matches {
			b, err := os.ReadFile(m)
			if err != nil {
				continue
			}
			args := strings.Split(string(b), "\x00")
			if len(args) > 2 && args[1] == "__s3lock_run_guard" && args[2] == strconv.Itoa(pid) {
				found, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, "/proc/"), "/cmdline"))
				return true
			}
		}
		return false
	})
	return found
}

// A terraform killed during `terraform destroy`'s destroy walks, where no
// s3lock provider process runs (only a destroy-time provisioner here): what
// terraform started is still running, so the run's lease lapses instead of
// being released. What runs on may be the provisioner's command itself, or a
// process the command left running in the background and exited (a
// grandchild of terraform, an orphan once its parent is gone, which the guard
// never saw as terraform's descendant).
func TestE2E_RunLease_KilledDuringDestroyLeaseLapses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// command is the destroy provisioner's: it writes the pid of the
		// process that runs on to MARKER.
		command string
	}{
		{name: "its command runs on", command: `echo $$ > $MARKER.tmp && mv $MARKER.tmp $MARKER && exec sleep 300`},
		{name: "a process its command left runs on", command: `sleep 300 & echo $! > $MARKER.tmp && mv $MARKER.tmp $MARKER`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			killedDuringDestroy(t, tc.command)
		})
	}
}

func killedDuringDestroy(t *testing.T, command string) {
	t.Helper()
	e := newRunLeaseEnv(t)
	marker := filepath.Join(t.TempDir(), "destroying")
	dir := e.extraModule("destroy", `
resource "terraform_data" "teardown" {
  input      = "`+marker+`"
  depends_on = [ephemeral.s3lock_lease.run]
  provisioner "local-exec" {
    when        = destroy
    command     = "`+command+`"
    environment = { MARKER = self.input }
  }
}
`)
	if out, err := e.command(t.Context(), dir, "destroy", "true", "apply", "-auto-approve").CombinedOutput(); err != nil {
		t.Fatalf("terraform apply: %v\n%s", err, out)
	}
	first, _ := e.waitFree(10 * time.Second)
	cmd := e.command(t.Context(), dir, "destroy", "true", "destroy", "-auto-approve")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	testkit.Eventually(t, waitLimit, "the destroy provisioner to run", func() bool { _, err := os.Stat(marker); return err == nil })
	held, err := e.sdk.Current(t.Context(), e.lock)
	if err != nil || !held.Held || held.Epoch != first.Epoch+1 {
		t.Fatalf("the lock is %+v (%v) during the destroy walk; want the destroy run's epoch %d held", held, err, first.Epoch+1)
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	runsOn, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// The guard notes terraform's descendants every 100ms: a direct child
	// started just before the kill can go unseen (a documented residual).
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(200 * time.Millisecond) // a CLI may take its provisioners with it
	still := syscall.Kill(runsOn, 0) == nil
	st, _ := e.waitFree(time.Minute)
	switch {
	case still && st.Released:
		t.Fatalf("the killed destroy's lease was released while its provisioner's process (pid %d) still ran; want it left to lapse: %+v", runsOn, st)
	case !still:
		// OpenTofu kills its provisioners' commands when it dies:
		// nothing of the run runs on, and releasing is right.
		t.Logf("%s took its provisioner's process with it; the lease was released=%v", e.h.CLI, st.Released)
	}
}

// A saved plan applied in the same job, under one `s3lock run` of the lock
// that the root module's ephemeral lease takes too: the ephemeral lease uses
// the CLI's lease instead of waiting for it, so plan and apply run under one
// epoch (the pattern the serialize-applies guide recommends).
func TestE2E_RunLease_SavedPlanUnderS3lockRun(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	dir := e.module("saved")
	base := e.command(t.Context(), dir, "saved", bumpStep, "version")
	tg := e.ns.Target
	vars := map[string]string{"endpoint": tg.Endpoint, "bucket": e.ns.Bucket, "access_key": tg.AccessKey,
		"secret_key": tg.SecretKey, "lock_name": e.lock, "counter": e.counter, "who": "saved", "step": bumpStep}
	script := `"$TF" plan -no-color -input=false -out=plan && "$TF" apply -no-color -input=false plan`
	cmd := exec.CommandContext(t.Context(), e.cli, "run", "--lease", "30s", "--holder", "saved-job", e.lock, "--", "sh", "-c", script)
	cmd.Dir, cmd.Env = dir, append(base.Env, "TF="+e.h.Terraform)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, "TF_VAR_"+k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("s3lock run -- terraform plan -out && terraform apply: %v\n%s", err, out)
	}
	changes := e.changes()
	if len(changes) != 1 || changes[0].runEpoch != 1 {
		t.Fatalf("the apply ran %d changes, %+v; want one under the CLI's epoch 1", len(changes), changes)
	}
	if st, err := e.sdk.Current(t.Context(), e.lock); err != nil || st.Epoch != 1 || !st.Released || st.Holder != "saved-job" {
		t.Errorf("after the job the lock is %+v (%v); want only the CLI's epoch 1, released", st, err)
	}
}
