package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// envStep makes the test binary act as the guarded step (see TestMain).
const envStep = "S3LOCK_E2E_STEP"

// hold is how long each guarded step holds the protected resource.
const hold = time.Second

var (
	harness    *tfharness.Harness
	harnessDir string
	harnessErr error
)

func TestMain(m *testing.M) {
	timeline.StepMain(envStep, hold) // run by a local-exec provisioner as the guarded step
	code := s3test.Main(m)
	if harnessDir != "" {
		_ = os.RemoveAll(harnessDir)
	}
	os.Exit(code)
}

var harnessOnce sync.Once

// setup skips unless TF_ACC is set, and returns the harness (built once);
// it logs which CLI (Terraform or OpenTofu, and its version) the test runs.
func setup(t *testing.T) *tfharness.Harness {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("end-to-end test with the real terraform: set TF_ACC=1 to run it (make test does)")
	}
	harnessOnce.Do(func() {
		harnessDir, harnessErr = os.MkdirTemp("", "s3lock-e2e-") //nolint:usetesting // shared by every test of the binary
		if harnessErr == nil {
			harness, harnessErr = tfharness.New(context.Background(), harnessDir)
		}
	})
	if harnessErr != nil {
		t.Fatal(harnessErr)
	}
	t.Logf("on %s", harness.CLI)
	return harness
}

// resourceConfig guards the step with an s3lock_lease resource: the lease is
// held from the apply that creates it until the destroy.
const resourceConfig = `terraform {
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
variable "who" { type = string }
variable "step_command" { type = string }

provider "s3lock" {
  region                      = "us-east-1"
  access_key                  = var.access_key
  secret_key                  = var.secret_key
  endpoints                   = { s3 = var.endpoint }
  use_path_style              = true
  skip_credentials_validation = true
  holder                      = var.who
}

resource "s3lock_lease" "deploy" {
  bucket         = var.bucket
  name           = var.lock_name
  lease_duration = "1m"

  timeouts {
    create = "5m"
  }
}

resource "terraform_data" "guarded_step" {
  input = s3lock_lease.deploy.epoch

  provisioner "local-exec" {
    command = var.step_command
    environment = {
      S3LOCK_EPOCH = s3lock_lease.deploy.epoch
      S3LOCK_WHO   = var.who
    }
  }
}
`

// concurrentRuns starts one worker per name at the same moment; each runs
// its terraform commands in its own working directory, made by prepare.
func concurrentRuns(t *testing.T, h *tfharness.Harness, ns *s3test.Namespace, lock string, names []string,
	prepare func(dir string), commands [][]string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tl := filepath.Join(t.TempDir(), "timeline")
	tg := ns.Target
	vars := func(who string) []string {
		return []string{
			"-var", "endpoint=" + tg.Endpoint, "-var", "bucket=" + ns.Bucket,
			"-var", "access_key=" + tg.AccessKey, "-var", "secret_key=" + tg.SecretKey,
			"-var", "lock_name=" + lock, "-var", "who=" + who, "-var", "step_command=" + self,
		}
	}
	dirs := map[string]string{}
	for _, who := range names {
		dir := filepath.Join(t.TempDir(), who)
		prepare(dir)
		if out, err := h.Init(t.Context(), dir); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		dirs[who] = dir
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, who := range names {
		wg.Go(func() {
			<-start
			for _, args := range commands {
				cmd := h.Command(ctx, dirs[who], append(append([]string{}, args...), vars(who)...)...)
				cmd.Env = append(cmd.Env, envStep+"=1", timeline.EnvFile+"="+tl)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s: terraform %v: %v\n%s", who, args, err, out)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return tl
}

// checkTimeline asserts that every worker ran its guarded step once, that no
// two steps overlapped, and that the lock is free afterwards.
func checkTimeline(t *testing.T, ns *s3test.Namespace, lock, path string, workers int) {
	t.Helper()
	sections, err := timeline.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sections {
		t.Logf("%-8s epoch %2d  %s .. %s", s.Who, s.Epoch, s.Start.Format("15:04:05.000"), s.End.Format("15:04:05.000"))
	}
	if len(sections) != workers {
		t.Fatalf("%d guarded steps ran; want %d", len(sections), workers)
	}
	if err := timeline.Check(sections); err != nil {
		t.Fatalf("guarded steps overlapped:\n%v", err)
	}
	c, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	// A run's ephemeral lease is released by its guard as terraform exits.
	st, err := c.Current(t.Context(), lock)
	for deadline := time.Now().Add(10 * time.Second); err == nil && st.Held && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		st, err = c.Current(t.Context(), lock)
	}
	if err != nil || st.Held || !st.Released {
		t.Fatalf("after the runs the lock is %+v (%v); want it released", st, err)
	}
}

// TestE2E_ConcurrentAppliesWithEphemeralLease: three terraform applies of
// the local-demo scenario started at the same moment never run their
// guarded steps at the same time, and leave the lock free.
func TestE2E_ConcurrentAppliesWithEphemeralLease(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ns := s3test.New(t)
	lock := ns.Name("e2e/ephemeral")
	names := []string{"apply-1", "apply-2", "apply-3"}
	scenario := filepath.Join(h.RepoRoot, "examples", "scenarios", "local-demo")
	tl := concurrentRuns(t, h, ns, lock, names,
		func(dir string) {
			if err := tfharness.CopyDir(dir, scenario); err != nil {
				t.Fatal(err)
			}
		},
		[][]string{{"apply", "-auto-approve", "-no-color"}})
	checkTimeline(t, ns, lock, tl, len(names))
}

// TestE2E_ConcurrentAppliesWithLeaseResource: the same with the s3lock_lease
// resource; each worker applies (acquires and runs the step), then destroys
// (releases), while the others wait in create.
func TestE2E_ConcurrentAppliesWithLeaseResource(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ns := s3test.New(t)
	lock := ns.Name("e2e/resource")
	names := []string{"apply-1", "apply-2", "apply-3"}
	tl := concurrentRuns(t, h, ns, lock, names,
		func(dir string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(resourceConfig), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		[][]string{{"apply", "-auto-approve", "-no-color"}, {"destroy", "-auto-approve", "-no-color"}})
	checkTimeline(t, ns, lock, tl, len(names))
}
