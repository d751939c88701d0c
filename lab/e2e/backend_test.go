package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// `s3lock backend run` and `s3lock backend serve` under the real CLI:
// Terraform's (or OpenTofu's) http backend served by s3lock, for a state
// at the key where Terraform's s3 backend keeps it (backend_env_test.go has
// the environment).

// counterConfig is a counter read while planning and bumped while
// applying: the state's own output count, read through the
// terraform_remote_state data source, plus one. A step that sleeps runs in
// every apply (triggers_replace: a provisioner runs on create), so that
// runs that did not take turns would overlap, and read the same count.
const counterConfig = `
resource "terraform_data" "counter" {
  input = data.terraform_remote_state.self.outputs.count + 1
}

resource "terraform_data" "step" {
  triggers_replace = terraform_data.counter.input

  provisioner "local-exec" {
    command = "sleep 1"
  }
}

output "count" {
  value = terraform_data.counter.output
}
`

// httpSelf reads the state through the run's own http backend, with the
// credentials of withHTTPVars.
const httpSelf = `
variable "address" { type = string }
variable "user" { type = string }
variable "pass" {
  type      = string
  sensitive = true
}

data "terraform_remote_state" "self" {
  backend  = "http"
  config   = { address = var.address, username = var.user, password = var.pass }
  defaults = { count = 0 }
}
`

// withHTTPVars runs its arguments with the http backend's settings, which
// s3lock backend run gives its command, as httpSelf's variables.
const withHTTPVars = `TF_VAR_address=$TF_HTTP_ADDRESS TF_VAR_user=$TF_HTTP_USERNAME TF_VAR_pass=$TF_HTTP_PASSWORD exec "$0" "$@"`

// s3Self reads the state at key through the s3 backend.
func (e *backendEnv) s3Self(key string) string {
	return "\ndata \"terraform_remote_state\" \"self\" {\n  backend  = \"s3\"\n  config = {\n" + e.s3Settings(key, "    ", " = ") +
		"  }\n  defaults = { count = 0 }\n}\n"
}

// counterAt is what counterConfig's resources and output are once the
// counter is at n.
func counterAt(n int) string {
	return fmt.Sprintf("resource \"terraform_data\" \"counter\" {\n  input = %d\n}\n\n"+
		"resource \"terraform_data\" \"step\" {\n  triggers_replace = %d\n}\n\n"+
		"output \"count\" {\n  value = terraform_data.counter.output\n}\n", n, n)
}

// TestE2E_Backend_ConcurrentAppliesTakeTurns: three applies through
// `s3lock backend run` started at once, and one plain run of the s3
// backend with its lock file (Terraform on PATH) beside them, each read the
// counter while planning and bump it while applying: they take turns
// whole, so it ends at the number of runs. The state they leave is the one
// the s3 backend reads.
func TestE2E_Backend_ConcurrentAppliesTakeTurns(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	e.seedState(e.key) // terraform_remote_state needs a state, even with defaults
	first := e.module("apply-1", httpBackend+httpSelf+counterConfig)
	dirs := []string{first, e.clone(first, "apply-2", httpBackend+httpSelf+counterConfig),
		e.clone(first, "apply-3", httpBackend+httpSelf+counterConfig)}
	s3h := e.s3Terraform()
	var plain string
	if s3h != nil {
		plain = e.dir("plain", e.s3Backend(e.key)+e.s3Self(e.key)+counterConfig)
		runCLI(t, s3h, plain, "init", "-input=false")
	} else {
		t.Logf("no Terraform 1.10 or later on PATH: no plain run of the s3 backend beside the runs through s3lock")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i, dir := range dirs {
		who := fmt.Sprintf("apply-%d", i+1)
		cmd := e.backendRun(ctx, dir, []string{"--holder", who}, append([]string{"sh", "-c", withHTTPVars}, e.tf("apply", "-auto-approve")...)...)
		wg.Go(func() {
			<-begin
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Apply complete!") {
				t.Errorf("%s: %v\n%s", who, err, out)
			}
		})
	}
	if plain != "" {
		cmd := s3h.Command(ctx, plain, "apply", "-auto-approve", "-lock-timeout=5m", "-no-color")
		wg.Go(func() {
			<-begin
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Apply complete!") {
				t.Errorf("the plain run of the s3 backend: %v\n%s", err, out)
			}
		})
	}
	close(begin)
	wg.Wait()
	if t.Failed() {
		return
	}

	runs := len(dirs)
	if plain != "" {
		runs++
	}
	count := e.wantState(e.key, "terraform_data.counter", "terraform_data.step").output("count")
	t.Logf("the counter is at %s after %d runs", count, runs)
	if count != strconv.Itoa(runs) {
		t.Errorf("the counter is at %s after %d runs; want %d: runs read the same count, they did not take turns", count, runs, runs)
	}
	e.wantFree(s3lock.PhaseReleased)
	// The s3 backend reads that state: a plan of what it should hold
	// changes nothing.
	var plan *exec.Cmd
	if plain != "" {
		writeMainTF(t, plain, e.s3Backend(e.key)+counterAt(runs))
		plan = s3h.Command(t.Context(), plain, "plan", "-detailed-exitcode", "-no-color")
	} else {
		writeMainTF(t, first, httpBackend+counterAt(runs))
		plan = e.backendRun(t.Context(), first, nil, e.tf("plan", "-detailed-exitcode")...)
	}
	if out, err := plan.CombinedOutput(); err != nil {
		t.Errorf("a plan of the counter at %d: %v; want no changes\n%s", runs, err, out)
	}
}

// TestE2E_Backend_MigratesFromAndToTheS3Backend: `init -migrate-state`
// moves a state from the s3 backend (another key) to the http backend
// served by s3lock, and from there to the s3 backend again (a third key),
// keeping every resource. Needs the s3 backend in the CLI under test.
func TestE2E_Backend_MigratesFromAndToTheS3Backend(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	res := resources("one", "two")
	from, to := e.ns.Name("plain/terraform.tfstate"), e.ns.Name("back/terraform.tfstate")
	dir := e.dir("migrate", e.s3Backend(from)+res)
	if out, err := e.h.Run(t.Context(), dir, "init", "-input=false", "-no-color"); err != nil {
		if strings.Contains(out, "Unsupported backend type") {
			t.Skipf("%s has no s3 backend (the pinned Terraform builds leave it out)", e.h.CLI)
		}
		t.Fatalf("%v\n%s", err, out)
	}
	runCLI(t, e.h, dir, "apply", "-auto-approve")

	writeMainTF(t, dir, httpBackend+res)
	if out := e.through(dir, nil, e.tf("init", "-input=false", "-migrate-state", "-force-copy")...); !strings.Contains(out, `Successfully configured the backend "http"`) {
		t.Errorf("init -migrate-state did not move the state to the http backend:\n%s", out)
	}
	e.wantState(e.key, "terraform_data.one", "terraform_data.two")
	e.wantFree(s3lock.PhaseReleased)

	writeMainTF(t, dir, e.s3Backend(to)+res)
	if out := e.through(dir, nil, e.tf("init", "-input=false", "-migrate-state", "-force-copy")...); !strings.Contains(out, `Successfully configured the backend "s3"`) {
		t.Errorf("init -migrate-state did not move the state to the s3 backend:\n%s", out)
	}
	e.wantState(to, "terraform_data.one", "terraform_data.two")
	e.wantFree(s3lock.PhaseReleased)
}
