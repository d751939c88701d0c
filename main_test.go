package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestMain(m *testing.M) {
	code := s3test.Main(m)
	if harnessDir != "" {
		_ = os.RemoveAll(harnessDir)
	}
	os.Exit(code)
}

// TestAccMain_EphemeralLeaseReleasedWhenRunEndsEarly runs the built provider
// binary under the real CLI. When a resource that depends on an ephemeral
// lease fails, or the run is interrupted, Terraform (1.11) does not close the
// lease; the run's lease (one epoch for the plan and the apply) is released
// anyway when terraform exits.
func TestAccMain_EphemeralLeaseReleasedWhenRunEndsEarly(t *testing.T) {
	h := harness(t)
	cases := []struct {
		name string
		// createTimeout is how long the dependent resource waits for a
		// lock that someone else holds for the whole test.
		createTimeout string
		// interrupt, when set, sends terraform an interrupt once the
		// apply holds the run's lease.
		interrupt bool
		wantOut   string
	}{
		{name: "dependent resource fails", createTimeout: "1s", wantOut: "Could not acquire lock"},
		{name: "interrupted", createTimeout: "10m", interrupt: true, wantOut: "Interrupt received"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			run, blocked := ns.Name("run"), ns.Name("blocked")
			other, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("other-team"))
			if err != nil {
				t.Fatal(err)
			}
			held, err := other.TryAcquire(t.Context(), blocked, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = held.Release(context.Background()) })

			work := filepath.Join(t.TempDir(), "work")
			tg := ns.Target
			writeFile(t, filepath.Join(work, "main.tf"), providerHCL(tg, "e2e")+fmt.Sprintf(`
ephemeral "s3lock_lease" "run" {
  bucket = %q
  name   = %q
}

resource "s3lock_lease" "blocked" {
  bucket     = %q
  name       = %q
  depends_on = [ephemeral.s3lock_lease.run]

  timeouts {
    create = %q
  }
}
`, ns.Bucket, run, ns.Bucket, blocked, tc.createTimeout))

			if out, err := h.Init(t.Context(), work); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			cmd := h.Command(t.Context(), work, "apply", "-auto-approve", "-input=false", "-no-color")
			var out lockedBuilder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.interrupt {
				// The run takes epoch 1 for its plan and keeps it for
				// its apply, which then waits for "blocked". Terraform
				// says "Still creating" once the provider's call has run
				// for 10s: interrupted earlier, between "Creating..." and
				// the call, Terraform's stop reaches no call, and the
				// call that follows waits its whole create timeout (seen
				// under load: a 10-minute run).
				deadline := time.Now().Add(2 * time.Minute)
				for {
					st, err := other.Current(t.Context(), run)
					if err == nil && st.Held && strings.Contains(out.String(), "s3lock_lease.blocked: Still creating") {
						break
					}
					if time.Now().After(deadline) {
						_ = cmd.Process.Kill()
						t.Fatalf("the apply never reached the blocked resource under the run's lock (last: %+v, %v)\n%s", st, err, out.String())
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
			}
			err = cmd.Wait()
			if err == nil || !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("apply: %v; want it to fail with %q:\n%s", err, tc.wantOut, out.String())
			}
			// The run's guard releases the lease as terraform exits.
			var st s3lock.State
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if st, err = other.Current(t.Context(), run); err != nil {
					t.Fatal(err)
				}
				if !st.Held || time.Now().After(deadline) {
					break
				}
			}
			if st.Epoch != 1 || st.Held || !st.Released || st.Holder != "e2e" {
				t.Fatalf("after the apply the run's lock is %+v; want its one epoch released\nterraform output:\n%s", st, out.String())
			}
		})
	}
}

// TestAccMain_EphemeralLeaseSupersededForRun runs the built provider binary
// under the real CLI, where the run's first phase queues for the lock on
// behalf of the whole run: with order = "newest" it waits in the lock's
// line, and when a newer "newest" run queues it stands down and fails
// before anything that depends on the lease changes.
func TestAccMain_EphemeralLeaseSupersededForRun(t *testing.T) {
	h := harness(t)
	t.Parallel()
	ns := s3test.New(t)
	lock := ns.Name("deploy/prod")
	sdk := func(holder string) *s3lock.Client {
		c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder(holder))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	older, newer, observer := sdk("commit-41"), sdk("commit-43"), sdk("observer")
	held, err := older.TryAcquire(t.Context(), lock, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })

	work := filepath.Join(t.TempDir(), "work")
	deployed := filepath.Join(t.TempDir(), "deployed")
	tg := ns.Target
	writeFile(t, filepath.Join(work, "main.tf"), providerHCL(tg, "commit-42")+fmt.Sprintf(`
ephemeral "s3lock_lease" "deploy" {
  bucket       = %q
  name         = %q
  order        = "newest"
  wait_timeout = "1m"
}

resource "terraform_data" "deploy" {
  provisioner "local-exec" {
    command = "touch %s"
  }
  depends_on = [ephemeral.s3lock_lease.deploy]
}
`, ns.Bucket, lock, deployed))
	if out, err := h.Init(t.Context(), work); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	// Once the run waits in line, a newer run queues behind it.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var queuedAs s3lock.Order
	wg.Go(func() {
		for ctx.Err() == nil {
			line, err := observer.Line(ctx, lock)
			if err == nil && len(line) > 0 && line[0].Holder == "commit-42" {
				queuedAs = line[0].Order
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if l, err := newer.Acquire(ctx, lock, s3lock.WithOrder(s3lock.OrderNewest), s3lock.WithoutAutoRenew()); err == nil {
			_ = l.Release(context.Background())
		}
	})
	out, err := h.Run(t.Context(), work, "apply", "-auto-approve", "-input=false", "-no-color")
	if err == nil || !strings.Contains(out, "Superseded by a newer run") || !strings.Contains(out, `A newer run, "commit-43"`) {
		t.Fatalf("apply: %v; want it to fail, superseded by commit-43:\n%s", err, out)
	}
	cancel()
	wg.Wait()
	if queuedAs != s3lock.OrderNewest {
		t.Errorf("the run queued with order %q, want %q", queuedAs, s3lock.OrderNewest)
	}
	if _, err := os.Stat(deployed); err == nil {
		t.Error("the superseded run deployed")
	}
	if st, err := observer.Current(t.Context(), lock); err != nil || st.Epoch != 1 || !st.Held || st.Holder != "commit-41" {
		t.Errorf("after the run stood down, the lock is %+v (%v); want epoch 1 still held by commit-41", st, err)
	}
}

// TestAccMain_ExamplesValidate checks every example configuration with
// validate against the built provider: attribute names, types and the
// provider's own validators (durations, lock names).
func TestAccMain_ExamplesValidate(t *testing.T) {
	h := harness(t)
	var dirs []string
	err := filepath.WalkDir("examples", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if tf, _ := filepath.Glob(filepath.Join(p, "*.tf")); len(tf) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 6 {
		t.Fatalf("found only %d example directories: %v", len(dirs), dirs)
	}
	for _, d := range dirs {
		t.Run(d, func(t *testing.T) {
			// Action blocks need Terraform 1.14 or later.
			if reason := h.CLI.Lacks(tfharness.Actions); reason != "" && strings.HasPrefix(filepath.ToSlash(d), "examples/actions/") {
				t.Skip(reason)
			}
			h := h
			// A state_store block needs a Terraform that runs state stores.
			if dirMentions(t, d, "state_store") {
				if reason := h.CLI.LacksStateStores(t.Context()); reason != "" {
					t.Skip(reason)
				}
				hh := *h
				hh.Env = append(slices.Clone(h.Env), tfharness.EnvStateStores+"=1")
				h = &hh
			}
			t.Parallel()
			work := filepath.Join(t.TempDir(), "example")
			if err := os.CopyFS(work, os.DirFS(filepath.Dir(d))); err != nil {
				t.Fatal(err)
			}
			work = filepath.Join(work, filepath.Base(d))
			// The snippets in the tfplugindocs layout do not say where the
			// provider comes from; the scenarios do.
			if !dirMentions(t, work, "required_providers") {
				writeFile(t, filepath.Join(work, "zz_providers_test.tf"),
					"terraform {\n  required_providers {\n    s3lock = { source = \"s3lock/s3lock\" }\n  }\n}\n")
			}
			// init installs the provider from the mirror and the
			// example's modules.
			if out, err := h.Run(t.Context(), work, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if out, err := h.Run(t.Context(), work, "validate", "-no-color"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestAccMain_DocsUpToDate regenerates the documentation with tfplugindocs
// (as make generate does, offline) into a temporary directory and fails if it
// differs from the committed docs/; it also checks the examples' formatting.
// It runs once, on the terraform on PATH, which make generate uses.
// benchmarkReport names the files in docs/ that make bench writes (lab/bench), and the page make compat writes (lab/compat, checked by its
// own test), not tfplugindocs.
var benchmarkReport = map[string]bool{"benchmarks.md": true, "benchmarks-handoff.png": true, "compatibility.md": true}

func TestAccMain_DocsUpToDate(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("needs the terraform CLI: set TF_ACC=1 to run it (make test does)")
	}
	tfBin := terraformBinary(t)
	if onPath, err := exec.LookPath("terraform"); err != nil || !sameFile(onPath, tfBin) {
		t.Skipf("make generate (tfplugindocs) runs the terraform on PATH (%s), not %s: the docs are checked in that binary's run", onPath, tfBin)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rel, err := filepath.Rel(root, out)
	if err != nil {
		t.Fatal(err)
	}
	emptyConfig := filepath.Join(t.TempDir(), "terraformrc")
	writeFile(t, emptyConfig, "")
	env := append(os.Environ(),
		"PATH="+filepath.Dir(tfBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TF_CLI_CONFIG_FILE="+emptyConfig, "CHECKPOINT_DISABLE=1")

	gen := exec.Command("go", "-C", "tools/tfplugindocs", "tool", "tfplugindocs", "generate",
		"--provider-dir", root, "--provider-name", "s3lock", "--rendered-website-dir", rel)
	gen.Env = env
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("tfplugindocs generate: %v\n%s", err, b)
	}
	want := readTree(t, out)
	got := readTree(t, "docs")
	for name, content := range want {
		switch old, ok := got[name]; {
		case !ok:
			t.Errorf("docs/%s is missing: run make generate and commit the result", name)
		case old != content:
			t.Errorf("docs/%s is out of date: run make generate and commit the result", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok && !benchmarkReport[name] {
			t.Errorf("docs/%s is not generated any more: run make generate and commit the result", name)
		}
	}

	fmtCheck := exec.Command(tfBin, "fmt", "-check", "-recursive", "examples")
	fmtCheck.Env = env
	if b, err := fmtCheck.CombinedOutput(); err != nil {
		t.Errorf("terraform fmt -check -recursive examples: %v; these files need terraform fmt:\n%s", err, b)
	}
}

// readTree returns the files under dir by slash-separated relative path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// terraformBinary returns the CLI the tests run: $TF_ACC_TERRAFORM_PATH,
// else the terraform on PATH.
func terraformBinary(t *testing.T) string {
	t.Helper()
	p, err := tfharness.CLIPath()
	if err != nil {
		t.Skip(err)
	}
	return p
}

// sameFile reports whether the paths a and b name the same file.
func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

var (
	harnessOnce sync.Once
	harnessDir  string
	harnessVal  *tfharness.Harness
	harnessErr  error
)

// harness skips unless TF_ACC is set, and returns the CLI with the provider
// built once per test binary into a filesystem mirror (TestMain removes
// it); each working directory needs an init. It logs which CLI runs.
func harness(t *testing.T) *tfharness.Harness {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 to run it (make test does)")
	}
	terraformBinary(t)
	harnessOnce.Do(func() {
		// One mirror for all the tests of this package.
		harnessDir, harnessErr = os.MkdirTemp("", "s3lock-main-test-") //nolint:usetesting // outlives any one test
		if harnessErr == nil {
			harnessVal, harnessErr = tfharness.New(context.Background(), harnessDir)
		}
	})
	if harnessErr != nil {
		t.Fatal(harnessErr)
	}
	t.Logf("on %s", harnessVal.CLI)
	return harnessVal
}

// dirMentions reports whether any .tf file in dir contains s.
func dirMentions(t *testing.T, dir, s string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s) {
			return true
		}
	}
	return false
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

// lockedBuilder collects a process's output for a test to read while it
// runs.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// providerHCL is the terraform and provider blocks of a root module that
// uses the provider, through the filesystem mirror, against tg, as holder.
func providerHCL(tg s3test.Target, holder string) string {
	return fmt.Sprintf(`terraform {
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
  holder                      = %q
}
`, tg.Region, tg.AccessKey, tg.SecretKey, tg.Endpoint, tg.PathStyle, holder)
}

// TestAccMain_EncryptedBucketWholeRun: with encrypt = true, a whole run's
// ephemeral lease is renewed by the run guard with its own client; behind a
// bucket policy that denies unencrypted PUTs, those renewals must be
// encrypted too, or the lease is lost mid-run.
func TestAccMain_EncryptedBucketWholeRun(t *testing.T) {
	h := harness(t)
	t.Parallel()
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server behind a proxy of the test's own")
	}
	policy := s3test.NewEncryptionPolicy(t, ns.Target.Endpoint)
	tg := ns.Target
	tg.Endpoint = policy.URL
	lock := ns.Name("encrypted/run")
	work := filepath.Join(t.TempDir(), "work")
	// A 6 s lease renewed (every 2 s) while a 7 s step runs: the guard renews it.
	writeFile(t, filepath.Join(work, "main.tf"), strings.Replace(providerHCL(tg, "encrypted"),
		"  holder ", "  encrypt                     = true\n  holder ", 1)+fmt.Sprintf(`
ephemeral "s3lock_lease" "run" {
  bucket         = %q
  name           = %q
  lease_duration = "6s"
}

resource "terraform_data" "work" {
  provisioner "local-exec" {
    command = "sleep 7"
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`, ns.Bucket, lock))
	if out, err := h.Init(t.Context(), work); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := h.Run(t.Context(), work, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("apply through a policy that requires encryption: %v\n%s", err, out)
	}
	if n := policy.Denied.Load(); n != 0 {
		t.Errorf("%d unencrypted PUTs were denied", n)
	}
	// The guard releases the lease as terraform exits (it watches it go).
	observer := s3lockClient(t, ns)
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := observer.Current(t.Context(), lock)
		if err == nil && st.Released {
			if st.Epoch != 1 || st.Renewals < 2 {
				t.Errorf("the run's lease: %+v; want epoch 1, renewed during the step", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's lease after terraform exited: %+v (%v); want it released", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func s3lockClient(t *testing.T, ns *s3test.Namespace) *s3lock.Client {
	t.Helper()
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("observer"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
