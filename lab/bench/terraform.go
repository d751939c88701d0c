package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// tfStateKey returns the one state both terraform runs of a latency profile
// apply; its lock file is that key + ".tflock". Each profile has its own:
// the crash measurement leaves its lock file behind for good.
func tfStateKey(profile string) string { return "bench/" + profile + "/terraform.tfstate" }

// tfConfig is the configuration both runs apply: one terraform_data whose
// local-exec provisioner sleeps while the state lock is held (built-in
// only: nothing is downloaded), in an S3 backend on the local store with
// S3-native locking (use_lockfile) and no DynamoDB. Its arguments are the
// bucket, key, region, endpoint, access key and secret key.
const tfConfig = `terraform {
  backend "s3" {
    bucket                      = %q
    key                         = %q
    region                      = %q
    endpoints                   = { s3 = %q }
    use_path_style              = true
    access_key                  = %q
    secret_key                  = %q
    skip_credentials_validation = true
    skip_region_validation      = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_s3_checksum            = true
    use_lockfile                = true
  }
}

variable "run" {
  type = string
}

variable "hold" {
  type = number
}

# Replaced by every run with a new var.run: the first run of a pair holds
# the state lock while the provisioner sleeps; the second, with the same
# var.run, finds nothing to change.
resource "terraform_data" "hold" {
  triggers_replace = var.run

  provisioner "local-exec" {
    command = "sleep ${var.hold}"
  }
}
`

// Lock timeouts and limits of the terraform runs.
const (
	// tfLockTimeout is the waiter's -lock-timeout after a release: far
	// longer than any hold measured.
	tfLockTimeout = 5 * time.Minute
	// tfStartLimit bounds how long the first run may take to lock the state.
	tfStartLimit = time.Minute
	// tfCrashHold is what the run that is killed is told to hold: it never
	// gets there.
	tfCrashHold = time.Hour
)

// tfOps: Terraform's S3 backend locks with a PUT of the .tflock object
// (If-None-Match: *) and unlocks with a GET and a DELETE of it; a waiter's
// attempt is such a PUT (answered 412 while the lock is held, followed by a
// GET of the lock's info).
var tfOps = lockOps{
	acquired: func(e event) bool { return isTFLock(e) && e.op == "PutObject" && e.ok() },
	released: func(e event) bool { return isTFLock(e) && e.op == "DeleteObject" && e.ok() },
	attempt:  func(e event) bool { return isTFLock(e) && e.op == "PutObject" },
	failed: func(e event) bool {
		return isTFLock(e) && e.op == "PutObject" && e.status == http.StatusPreconditionFailed
	},
}

func isTFLock(e event) bool { return strings.HasSuffix(e.key, ".tflock") }

// tfLab is two terraform working directories of one state, each talking to
// the store through its own tap: the holder's run and the waiter's.
type tfLab struct {
	h                    *tfharness.Harness
	holderDir, waiterDir string
	htap, wtap           *tap
}

// measureTerraform measures Terraform's native lock after a release at every
// hold time, and after a crash.
func (l *lab) measureTerraform(ctx context.Context, pr *profileResult) error {
	if !l.cfg.terraform {
		return nil
	}
	t, err := l.newTFLab(ctx)
	if err != nil {
		return err
	}
	defer t.htap.close()
	defer t.wtap.close()
	for rep := 1; rep <= pr.reps; rep++ {
		for _, hold := range l.cfg.holds {
			h, err := t.run(ctx, fmt.Sprintf("%s-release-%s-%d", l.profile.Name, hold, rep), hold, 0, tfLockTimeout)
			if err != nil {
				return fmt.Errorf("terraform handoff after a %s hold: %w", hold, err)
			}
			l.logf("terraform, %s hold: handoff %s, waiter %.2f requests/s", hold, h.gap.Round(time.Millisecond), h.rate())
			pr.release = append(pr.release, h)
		}
	}
	h, err := t.run(ctx, l.profile.Name+"-crash", tfCrashHold, l.cfg.crashHold, l.cfg.crashHold+l.cfg.tfCrashWait)
	if err != nil {
		return fmt.Errorf("terraform after a crash: %w", err)
	}
	h.hold = l.cfg.crashHold
	l.logf("terraform, crash after %s: the waiter gave up after %s", l.cfg.crashHold, h.waited.Round(time.Second))
	pr.crash = append(pr.crash, h)
	return nil
}

// newTFLab makes the two working directories of the lab's profile, each
// initialized through its own tap.
func (l *lab) newTFLab(ctx context.Context) (*tfLab, error) {
	path, err := tfharness.CLIPath()
	if err != nil {
		return nil, err
	}
	rc := filepath.Join(l.scratch, "terraformrc")
	if err := os.WriteFile(rc, nil, 0o644); err != nil { // a real, empty CLI configuration
		return nil, err
	}
	t := &tfLab{h: &tfharness.Harness{Terraform: path, CLIConfig: rc}}
	if t.htap, err = l.newTap(); err != nil {
		return nil, err
	}
	if t.wtap, err = l.newTap(); err != nil {
		return nil, err
	}
	t.holderDir = filepath.Join(l.scratch, l.profile.Name, "tf-holder")
	t.waiterDir = filepath.Join(l.scratch, l.profile.Name, "tf-waiter")
	for dir, tp := range map[string]*tap{t.holderDir: t.htap, t.waiterDir: t.wtap} {
		cfg := fmt.Sprintf(tfConfig, stateBucket, tfStateKey(l.profile.Name), s3server.Region, tp.URL, s3server.AccessKeyID, s3server.SecretAccessKey)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
			return nil, err
		}
		if out, err := t.h.Init(ctx, dir); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, out)
		}
	}
	return t, nil
}

// run applies the state from the holder's directory, and once that run
// holds the state lock, from the waiter's with -lock-timeout=lockTimeout.
// With crashAfter > 0, the holder's run is SIGKILLed (with its provisioner)
// that long after the waiter started, and the waiter is expected to give up.
func (t *tfLab) run(ctx context.Context, run string, hold, crashAfter, lockTimeout time.Duration) (handoff, error) {
	t.htap.rec.reset()
	t.wtap.rec.reset()
	first, err := t.apply(ctx, t.holderDir, run, hold, tfLockTimeout)
	if err != nil {
		return handoff{}, err
	}
	defer first.stop()
	if err := first.waitFor(t.htap.rec, tfOps.acquired); err != nil {
		return handoff{}, err
	}
	time.Sleep(waiterArrival())
	second, err := t.apply(ctx, t.waiterDir, run, hold, lockTimeout)
	if err != nil {
		return handoff{}, err
	}
	defer second.stop()
	var crashed time.Time
	if crashAfter > 0 {
		time.Sleep(crashAfter)
		crashed = first.kill()
	} else if err := first.wait(); err != nil {
		return handoff{}, err
	}
	werr := second.wait()
	gaveUp := time.Now()
	switch {
	case crashAfter == 0 && werr != nil:
		return handoff{}, werr
	case crashAfter > 0 && !strings.Contains(second.out.String(), "Error acquiring the state lock"):
		return handoff{}, fmt.Errorf("the waiter was to give up on the held state lock, but its output says otherwise:\n%s", second.out.String())
	}
	holder := t.htap.rec.take()
	h, err := analyze(tfOps, holder, t.wtap.rec.take(), crashed, gaveUp)
	h.system, h.hold = sysTerraform, hold
	h.lockCounts = countOf(filter(holder, isTFLock))
	return h, err
}

// tfProc is a running terraform apply.
type tfProc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
	err    error
}

func (t *tfLab) apply(ctx context.Context, dir, run string, hold, lockTimeout time.Duration) (*tfProc, error) {
	cmd := t.h.Command(ctx, dir, "apply", "-auto-approve", "-input=false", "-no-color",
		"-lock-timeout="+lockTimeout.String(),
		"-var", "run="+run, "-var", "hold="+strconv.Itoa(int(hold/time.Second)))
	p := &tfProc{cmd: cmd, out: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitFor returns once rec has recorded a request that matches ok.
func (p *tfProc) waitFor(rec *recorder, ok func(event) bool) error {
	deadline := time.After(tfStartLimit)
	for len(filter(rec.take(), ok)) == 0 {
		select {
		case <-p.exited:
			return fmt.Errorf("terraform exited before it locked the state (%w):\n%s", p.err, p.out.String())
		case <-deadline:
			return fmt.Errorf("terraform did not lock the state within %s:\n%s", tfStartLimit, p.out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func (p *tfProc) wait() error {
	<-p.exited
	if p.err != nil {
		return fmt.Errorf("terraform apply in %s: %w:\n%s", p.cmd.Dir, p.err, p.out.String())
	}
	return nil
}

// stop kills terraform if it is still running: no run outlives the
// measurement that started it.
func (p *tfProc) stop() {
	select {
	case <-p.exited:
	default:
		p.kill()
	}
}

// kill SIGKILLs terraform and everything it started, and returns when.
func (p *tfProc) kill() time.Time {
	at := time.Now()
	if err := killProcessGroup(p.cmd); err != nil && !errors.Is(err, os.ErrProcessDone) {
		logf("killing terraform: %v", err)
	}
	<-p.exited
	return at
}
