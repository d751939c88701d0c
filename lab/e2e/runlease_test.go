package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// One run, one lease: an ephemeral s3lock_lease is held from the first plan
// step of a terraform run to its last apply step — one epoch — and released
// as soon as terraform exits, however it exits; only a killed terraform's
// lease is left to lapse.

// runConfig is a root module whose plan reads shared data and whose apply
// changes it, guarded by an ephemeral lease. The shared data is a counter:
// the epoch of another lock, read while planning (a data source that waits
// for the lease) and bumped while applying by `s3lock run` (which takes and
// releases that lock: epoch + 1). The apply step checks that the counter is
// still what the plan read, and records what it did.
const runConfig = `terraform {
  required_providers {
    s3lock = { source = "s3lock/s3lock" }
  }
}

variable "endpoint" { type = string }
variable "bucket" { type = string }
variable "access_key" { type = string }
variable "secret_key" {
  type      = string
  sensitive = true
}
variable "lock_name" { type = string }
variable "counter" { type = string }
variable "who" { type = string }
variable "step" {
  type    = string
  default = "true"
}

provider "s3lock" {
  region                      = "us-east-1"
  access_key                  = var.access_key
  secret_key                  = var.secret_key
  endpoints                   = { s3 = var.endpoint }
  use_path_style              = true
  skip_credentials_validation = true
  holder                      = var.who
}

ephemeral "s3lock_lease" "run" {
  bucket         = var.bucket
  name           = var.lock_name
  lease_duration = "6s"
  wait_timeout   = "5m"
}

# Read while planning, once the run holds the lease.
data "s3lock_lease" "counter" {
  bucket     = var.bucket
  name       = var.counter
  depends_on = [ephemeral.s3lock_lease.run]
}

resource "terraform_data" "change" {
  input            = data.s3lock_lease.counter.epoch
  triggers_replace = [timestamp()]

  provisioner "local-exec" {
    command = var.step
    environment = {
      RUN_EPOCH = ephemeral.s3lock_lease.run.epoch
      PLANNED   = self.input
      WHO       = var.who
    }
  }
}
`

// bumpStep is the apply step: bump the counter, check that it moved from
// the value the plan read, and record "who run-epoch planned new start end".
const bumpStep = `start=$(date +%s.%N)
new=$("$S3LOCK_CLI" run --quiet "$COUNTER" -- sh -c 'printf %s "$S3LOCK_EPOCH"') || exit 1
sleep 1
echo "$WHO $RUN_EPOCH $PLANNED $new $start $(date +%s.%N)" >> "$RECORD"
[ "$new" = "$((PLANNED + 1))" ] || { echo "the counter moved from $PLANNED to $new under this run's lease" >&2; exit 1; }`

// runLeaseEnv is one test's scenario: a namespace, the lock, the counter, a
// built s3lock CLI and the variables for terraform.
type runLeaseEnv struct {
	t             *testing.T
	h             *tfharness.Harness
	ns            *s3test.Namespace
	lock, counter string
	cli, record   string
	sdk           *s3lock.Client
}

func newRunLeaseEnv(t *testing.T) *runLeaseEnv {
	t.Helper()
	h := setup(t)
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server (static credentials for terraform and the CLI)")
	}
	cli := filepath.Join(t.TempDir(), "s3lock")
	if err := tfharness.Build(t.Context(), h.RepoRoot, "./cmd/s3lock", cli); err != nil {
		t.Fatal(err)
	}
	sdk, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return &runLeaseEnv{t: t, h: h, ns: ns, lock: ns.Name("run"), counter: ns.Name("counter"),
		cli: cli, record: filepath.Join(t.TempDir(), "record"), sdk: sdk}
}

// module writes and initializes a root module for who.
func (e *runLeaseEnv) module(who string) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), who)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(runConfig), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.h.Init(e.t.Context(), dir); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return dir
}

// command is terraform args in dir for who, with the step's environment.
func (e *runLeaseEnv) command(ctx context.Context, dir, who, step string, args ...string) *exec.Cmd {
	tg := e.ns.Target
	args = append(args, "-no-color",
		"-var", "endpoint="+tg.Endpoint, "-var", "bucket="+e.ns.Bucket,
		"-var", "access_key="+tg.AccessKey, "-var", "secret_key="+tg.SecretKey,
		"-var", "lock_name="+e.lock, "-var", "counter="+e.counter, "-var", "who="+who, "-var", "step="+step)
	cmd := e.h.Command(ctx, dir, args...)
	cmd.Env = append(cmd.Env,
		"S3LOCK_CLI="+e.cli, "COUNTER="+e.counter, "RECORD="+e.record,
		"S3LOCK_BUCKET="+e.ns.Bucket, "S3LOCK_ENDPOINT="+tg.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID="+tg.AccessKey, "AWS_SECRET_ACCESS_KEY="+tg.SecretKey, "AWS_REGION="+tg.Region,
		"AWS_EC2_METADATA_DISABLED=true")
	return cmd
}

// epochs reads every epoch object of the run lock, oldest first.
func (e *runLeaseEnv) epochs() []epochRecord {
	e.t.Helper()
	var out []epochRecord
	for _, key := range s3test.Keys(e.t, e.ns.Client, e.ns.Bucket, e.lock+"/") {
		obj, err := e.ns.Client.GetObject(e.t.Context(), &s3.GetObjectInput{Bucket: aws.String(e.ns.Bucket), Key: aws.String(key)})
		if err != nil {
			e.t.Fatal(err)
		}
		b, err := io.ReadAll(obj.Body)
		_ = obj.Body.Close()
		if err != nil {
			e.t.Fatal(err)
		}
		var r epochRecord
		if err := json.Unmarshal(b, &r); err != nil {
			e.t.Fatalf("%s: %v", key, err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	return out
}

// epochRecord is what the test reads of an epoch object (PROTOCOL.md §3).
type epochRecord struct {
	Epoch      uint64    `json:"epoch"`
	Holder     string    `json:"leaderId"`
	AcquiredAt time.Time `json:"acquiredAt"`
	ReleasedAt time.Time `json:"releasedAt"`
	Expired    bool      `json:"expired"`
}

// change is one apply step's record.
type change struct {
	who               string
	runEpoch, planned uint64
	counter           uint64
	start, end        time.Time
}

func (e *runLeaseEnv) changes() []change {
	e.t.Helper()
	b, err := os.ReadFile(e.record)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []change
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			e.t.Fatalf("bad record line %q", line)
		}
		c := change{who: f[0]}
		c.runEpoch, _ = strconv.ParseUint(f[1], 10, 64)
		c.planned, _ = strconv.ParseUint(f[2], 10, 64)
		c.counter, _ = strconv.ParseUint(f[3], 10, 64)
		c.start, c.end = unixTime(f[4]), unixTime(f[5])
		out = append(out, c)
	}
	return out
}

func unixTime(s string) time.Time {
	sec, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(sec, 10, 64)
	ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	return time.Unix(n, ns)
}

// waitFree polls until the run lock is free (released, or lapsed when
// lapsed is true) and returns when that was first seen; it fails the test
// after limit.
func (e *runLeaseEnv) waitFree(limit time.Duration) (s3lock.State, time.Time) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := e.sdk.Current(e.t.Context(), e.lock)
		if err != nil {
			e.t.Fatal(err)
		}
		if !st.Held {
			return st, time.Now()
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the run lock is still held %s later: %+v", limit, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2E_RunLease_ConcurrentRunsEachHoldOneEpoch: three concurrent applies
// of separate root modules each read the shared counter while planning and
// bump it while applying. Each run holds one epoch from before its plan read
// to after its apply step; the runs take turns whole, so each sees the
// previous run's change and the counter ends at 3.
func TestE2E_RunLease_ConcurrentRunsEachHoldOneEpoch(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	names := []string{"run-a", "run-b", "run-c"}
	e.applyAtOnce(names, nil)
	if t.Failed() {
		return
	}
	e.waitFree(10 * time.Second) // the last run's guard releases as terraform exits
	e.checkTurns(names, released)
}

// TestE2E_RunLease_TerraformAsItsContainersInit: the same three runs, each
// terraform the init process (pid 1) of a pid namespace of its own, as in a
// container whose entrypoint is terraform, all sharing /tmp, where the run
// guards' sockets are (their terraform processes may even have started at
// the same clock tick). Each run still holds one epoch for its whole run, of
// its own: they take turns whole and the counter ends at 3. When each
// terraform exits, the kernel ends its guard with it, so a lease cannot be
// relied on to be released (the guard wins that race now and then: the
// kernel ends the namespace once terraform's last thread has exited), and
// the provider warns that it will lapse.
func TestE2E_RunLease_TerraformAsItsContainersInit(t *testing.T) {
	t.Parallel()
	unshare := requireUnshare(t)
	e := newRunLeaseEnv(t)
	names := []string{"init-a", "init-b", "init-c"}
	outputs := e.applyAtOnce(names, func(cmd *exec.Cmd) {
		cmd.Args = append([]string{unshare, "--pid", "--fork", "--mount-proc"}, cmd.Args...)
		cmd.Path = unshare
	})
	if t.Failed() {
		return
	}
	for who, out := range outputs {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), "Lock cannot be released reliably when this run ends") {
			t.Errorf("%s's output does not warn that its lease will lapse:\n%s", who, out)
		}
	}
	e.waitFree(time.Minute) // the last run's lease lapses
	e.checkTurns(names, releasedOrLapsed)
}

// requireUnshare returns the path of unshare(1), skipping the test where it
// cannot make a pid namespace (it needs root, or user namespaces).
func requireUnshare(t *testing.T) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) to run terraform as the init of a pid namespace")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare cannot make a pid namespace here: %v: %s", err, out)
	}
	return unshare
}

// applyAtOnce starts `terraform apply` of a root module of each of names at
// once (wrap, if set, changes each command) and waits for all; it fails the
// test for each that fails, and returns each one's output.
func (e *runLeaseEnv) applyAtOnce(names []string, wrap func(*exec.Cmd)) map[string]string {
	t := e.t
	t.Helper()
	dirs := map[string]string{}
	for _, who := range names {
		dirs[who] = e.module(who)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	outputs := map[string]string{}
	start := make(chan struct{})
	for _, who := range names {
		cmd := e.command(ctx, dirs[who], who, bumpStep, "apply", "-auto-approve")
		if wrap != nil {
			wrap(cmd)
		}
		wg.Go(func() {
			<-start
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: terraform apply: %v\n%s", who, err, out)
			}
			mu.Lock()
			outputs[who] = string(out)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return outputs
}

// How a run's epoch ends, for checkTurns.
const (
	released         = true  // released at the end of its run
	releasedOrLapsed = false // either
)

// checkTurns checks what runs of names recorded against the run lock's
// epochs: one epoch per run, each run's apply step inside its own epoch,
// having seen the previous run's change (the counter planned is the one the
// previous run left), so that the counter ends at the number of runs; and,
// with mustRelease, each epoch released at the end of its run.
func (e *runLeaseEnv) checkTurns(names []string, mustRelease bool) {
	t := e.t
	t.Helper()
	changes := e.changes()
	epochs := e.epochs()
	for _, c := range changes {
		t.Logf("%s: run epoch %d, planned counter %d, bumped it to %d, %s .. %s", c.who, c.runEpoch, c.planned, c.counter,
			c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"))
	}
	for _, ep := range epochs {
		t.Logf("run lock epoch %d: %s, %s .. %s", ep.Epoch, ep.Holder, ep.AcquiredAt.Format("15:04:05.000"), ep.ReleasedAt.Format("15:04:05.000"))
	}
	if len(changes) != len(names) || len(epochs) != len(names) {
		t.Fatalf("%d runs made %d changes under %d epochs of the run lock; want one change and one epoch per run", len(names), len(changes), len(epochs))
	}
	byEpoch := map[uint64]epochRecord{}
	for _, ep := range epochs {
		if mustRelease && (!ep.Expired || ep.ReleasedAt.IsZero()) {
			t.Errorf("epoch %d was not released at the end of its run: %+v", ep.Epoch, ep)
		}
		byEpoch[ep.Epoch] = ep
	}
	for _, c := range changes {
		ep, ok := byEpoch[c.runEpoch]
		switch {
		case !ok:
			t.Errorf("%s applied under epoch %d, which is not one of the run lock's epochs", c.who, c.runEpoch)
		case ep.Holder != c.who:
			t.Errorf("%s applied under epoch %d, held by %s", c.who, c.runEpoch, ep.Holder)
		case c.planned != c.runEpoch-1 || c.counter != c.runEpoch:
			t.Errorf("%s (epoch %d) planned with counter %d and bumped it to %d; want %d and %d: it did not see the previous run's change",
				c.who, c.runEpoch, c.planned, c.counter, c.runEpoch-1, c.runEpoch)
		case c.start.Before(ep.AcquiredAt) || (!ep.ReleasedAt.IsZero() && ep.ReleasedAt.Before(c.end)):
			t.Errorf("%s's apply step (%s .. %s) is not inside its epoch %d (%s .. %s)", c.who,
				c.start.Format(time.StampMilli), c.end.Format(time.StampMilli), ep.Epoch,
				ep.AcquiredAt.Format(time.StampMilli), ep.ReleasedAt.Format(time.StampMilli))
		}
	}
	// The runs' epochs follow one another: no run's plan or apply falls
	// inside another's (a lapsed epoch's end is not recorded: the next run
	// took the lock after the previous run's step ended).
	stepOf := map[uint64]change{}
	for _, c := range changes {
		stepOf[c.runEpoch] = c
	}
	for i := 1; i < len(epochs); i++ {
		if prev, ok := stepOf[epochs[i-1].Epoch]; ok && epochs[i].AcquiredAt.Before(prev.end) {
			t.Errorf("epoch %d (%s) was acquired at %s, while %s's apply step under epoch %d ran (until %s)", epochs[i].Epoch,
				epochs[i].Holder, epochs[i].AcquiredAt.Format(time.StampMilli), prev.who, prev.runEpoch, prev.end.Format(time.StampMilli))
		}
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i].AcquiredAt.Before(epochs[i-1].ReleasedAt) {
			t.Errorf("epoch %d (%s) was acquired at %s, before epoch %d (%s) was released at %s", epochs[i].Epoch, epochs[i].Holder,
				epochs[i].AcquiredAt.Format(time.StampMilli), epochs[i-1].Epoch, epochs[i-1].Holder, epochs[i-1].ReleasedAt.Format(time.StampMilli))
		}
	}
	if st, err := e.sdk.Current(t.Context(), e.counter); err != nil || st.Epoch != uint64(len(names)) {
		t.Errorf("the counter is at %d (%v); want %d", st.Epoch, err, len(names))
	}
}

// TestE2E_RunLease_FreedWhenTheRunEnds: however a run ends — a plan only, a
// failed apply, an interrupt — the lock is free within a second or two of
// terraform's exit.
func TestE2E_RunLease_FreedWhenTheRunEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		step      string
		args      []string
		interrupt bool
	}{
		{name: "plan only", args: []string{"plan"}},
		{name: "failed apply", step: "exit 3", args: []string{"apply", "-auto-approve"}},
		{name: "interrupted apply", step: "exec sleep 300", args: []string{"apply", "-auto-approve"}, interrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRunLeaseEnv(t)
			dir := e.module("run")
			step := tc.step
			if step == "" {
				step = "true"
			}
			started := filepath.Join(t.TempDir(), "step-started")
			if tc.interrupt {
				step = "touch " + started + "; " + step // the step's process exists once the file does
			}
			cmd := e.command(t.Context(), dir, "run", step, tc.args...)
			var out testkit.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			if tc.interrupt {
				// The step's own mark, not terraform's "Provisioning with
				// 'local-exec'", which comes before the step's process
				// exists: a Ctrl-C before it, under load, let terraform start
				// a step that then outlived it (and the guard rightly let the
				// lease lapse). The step's output is suppressed (its
				// environment has an ephemeral value), hence a file.
				testkit.Eventually(t, waitLimit, "the run to hold the lock and start its step", func() bool {
					_, err := os.Stat(started)
					return err == nil
				})
				// As Ctrl-C does: to terraform's whole process group, its
				// step's processes too. (A step's process that outlived
				// terraform would make the guard let the lease lapse.)
				if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			exited := time.Now()
			if (err == nil) != (tc.name == "plan only") {
				t.Fatalf("terraform %v: %v; output:\n%s", tc.args, err, out.String())
			}
			st, freed := e.waitFree(10 * time.Second)
			t.Logf("terraform exited at %s; the lock was free at %s: %+v", exited.Format(time.StampMilli), freed.Format(time.StampMilli), st)
			if !st.Released {
				t.Errorf("the run's lease lapsed instead of being released: %+v", st)
			}
			if took := freed.Sub(exited); took > 2*time.Second {
				t.Errorf("the lock was freed %s after terraform exited; want within a second or two", took)
			}
		})
	}
}

// TestE2E_RunLease_KilledTerraformLeaseLapses: a SIGKILLed terraform cannot
// shut its providers down, and what it started may still be running: its
// lease is not released but left to lapse after lease_duration, and the next
// run takes over then.
func TestE2E_RunLease_KilledTerraformLeaseLapses(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	dir := e.module("killed")
	marker := filepath.Join(t.TempDir(), "started")
	cmd := e.command(t.Context(), dir, "killed", "touch "+marker+"; sleep 300", "apply", "-auto-approve")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the orphaned step
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	held, err := e.sdk.Current(t.Context(), e.lock)
	if err != nil || !held.Held {
		t.Fatalf("the run lock is %+v (%v) while the run applies; want it held", held, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()

	st, freed := e.waitFree(time.Minute)
	t.Logf("terraform killed at %s; the lock was free at %s: %+v", killed.Format(time.StampMilli), freed.Format(time.StampMilli), st)
	if st.Released {
		t.Fatalf("the killed run's lease was released; want it left to lapse: %+v", st)
	}
	// It stays held for a lease_duration (6s) after its last renewal, by
	// the store's clock, which the provider's view cannot beat by more
	// than the store's one-second resolution.
	if held := freed.Sub(killed); held < 6*time.Second-time.Second-s3lock.SafetyMargin(6*time.Second) {
		t.Errorf("the lease lapsed %s after terraform was killed; want no earlier than its lease_duration after its last renewal", held)
	}
	next := e.module("next")
	if out, err := e.command(t.Context(), next, "next", "true", "apply", "-auto-approve").CombinedOutput(); err != nil {
		t.Fatalf("the next run: %v\n%s", err, out)
	}
	if st, _ := e.waitFree(10 * time.Second); st.Epoch != held.Epoch+1 || st.Holder != "next" || !st.Released {
		t.Errorf("after the next run the lock is %+v; want epoch %d by next, released", st, held.Epoch+1)
	}
}

// TestE2E_RunLease_LostLeaseInterruptsTheRun: a run whose lease is lost
// (here force-released by an operator) is interrupted as Ctrl-C does: it
// starts no further changes, fails, and says why.
func TestE2E_RunLease_LostLeaseInterruptsTheRun(t *testing.T) {
	t.Parallel()
	e := newRunLeaseEnv(t)
	marker := filepath.Join(t.TempDir(), "started")
	after := filepath.Join(t.TempDir(), "after")
	dir := e.extraModule("lost", `
resource "terraform_data" "after" {
  depends_on = [terraform_data.change]
  provisioner "local-exec" {
    command = "touch `+after+`"
  }
}
`)
	cmd := e.command(t.Context(), dir, "lost", "touch "+marker+"; sleep 300", "apply", "-auto-approve")
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	held, err := e.sdk.Current(t.Context(), e.lock)
	if err != nil || !held.Held {
		t.Fatalf("the run lock is %+v (%v) while the run applies; want it held", held, err)
	}
	if err := e.sdk.ForceRelease(t.Context(), s3lock.Token{Name: e.lock, Epoch: held.Epoch}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("terraform still runs 2m after its lease was force-released; output:\n%s", out.String())
	}
	if err == nil {
		t.Fatalf("terraform succeeded although its lease was lost; output:\n%s", out.String())
	}
	for _, want := range []string{"was lost during this run", "may not have been exclusive", "Interrupt received"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terraform's output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(after); err == nil {
		t.Errorf("terraform started a further change after the run's lease was lost")
	}
}

// waitLimit bounds the waits of testkit.Eventually in this package (a
// guard against hangs, not a timing assertion).
const waitLimit = 2 * time.Minute
