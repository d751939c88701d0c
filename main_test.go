package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// TestAccMain_EphemeralLeaseReleasedWhenApplyFails runs the built provider
// binary under the real terraform CLI: when a resource that depends on an
// ephemeral lease fails, Terraform does not close the lease, and the
// provider releases it when Terraform stops it.
func TestAccMain_EphemeralLeaseReleasedWhenApplyFails(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 to run it (make test does)")
	}
	tfBin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tfBin == "" {
		p, err := exec.LookPath("terraform")
		if err != nil {
			t.Skip("no terraform binary on PATH")
		}
		tfBin = p
	}
	ns := s3test.New(t)
	run, blocked := ns.Name("run"), ns.Name("blocked")

	// Someone else holds "blocked" for the whole test.
	other, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("other-team"))
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.TryAcquire(t.Context(), blocked, s3lock.WithoutAutoRenew(), s3lock.WithDuration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })

	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "terraform-provider-s3lock"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the provider: %v\n%s", err, out)
	}
	cliConfig := filepath.Join(dir, "terraformrc")
	writeFile(t, cliConfig, fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.terraform.io/s3lock/s3lock" = %q
  }
  direct {}
}
`, pluginDir))
	work := filepath.Join(dir, "work")
	tg := ns.Target
	writeFile(t, filepath.Join(work, "main.tf"), fmt.Sprintf(`terraform {
  required_providers {
    s3lock = { source = "s3lock/s3lock" }
  }
}

provider "s3lock" {
  region                      = %q
  access_key                  = %q
  secret_key                  = %q
  endpoints                   = { s3 = %q }
  use_path_style              = %t
  skip_credentials_validation = true
  holder                      = "e2e"
}

ephemeral "s3lock_lease" "run" {
  bucket = %q
  name   = %q
}

resource "s3lock_lease" "blocked" {
  bucket     = %q
  name       = %q
  depends_on = [ephemeral.s3lock_lease.run]

  timeouts {
    create = "1s"
  }
}
`, tg.Region, tg.AccessKey, tg.SecretKey, tg.Endpoint, tg.PathStyle, ns.Bucket, run, ns.Bucket, blocked))

	apply := exec.Command(tfBin, "apply", "-auto-approve", "-input=false", "-no-color")
	apply.Dir = work
	apply.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	out, err := apply.CombinedOutput()
	if err == nil {
		t.Fatalf("terraform apply succeeded; want it to fail waiting for %q:\n%s", blocked, out)
	}
	if !strings.Contains(string(out), "Could not acquire lock") {
		t.Fatalf("terraform apply failed for another reason:\n%s", out)
	}

	st, err := other.Current(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	// The plan took epoch 1 and closed it; the apply took epoch 2 and
	// failed without closing it: the provider released it on shutdown.
	if st.Epoch < 2 || st.Held || !st.Released || st.Holder != "e2e" {
		t.Fatalf("after the failed apply the run's lock is %+v; want its newest epoch (>= 2) released\nterraform output:\n%s", st, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
