package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
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
// `s3lock backend run` started at once each read the counter while planning
// and bump it while applying: they take turns whole, so it ends at 3. Then
// the three again, with one plain run of the s3 backend with its lock file
// (Terraform on PATH) beside them: it ends at 7, the plain run never
// interleaving with them. The state they leave is the one the s3 backend
// reads.
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

	runs := e.applyAtOnce(dirs, nil, "")
	if t.Failed() {
		return
	}
	e.wantCount(runs)
	if plain != "" {
		runs += e.applyAtOnce(dirs, s3h, plain)
		if t.Failed() {
			return
		}
		e.wantCount(runs)
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

// applyAtOnce starts an apply through `s3lock backend run` in each of dirs,
// and, with s3h, a plain apply of the s3 backend in plain, all at the same
// moment; it fails the test unless each completes, and returns how many
// runs it started.
func (e *backendEnv) applyAtOnce(dirs []string, s3h *tfharness.Harness, plain string) int {
	t := e.t
	t.Helper()
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
	if s3h != nil {
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
	if s3h != nil {
		return len(dirs) + 1
	}
	return len(dirs)
}

// wantCount fails the test unless the state's counter is runs.
func (e *backendEnv) wantCount(runs int) {
	e.t.Helper()
	count := e.wantState(e.key, "terraform_data.counter", "terraform_data.step").output("count")
	e.t.Logf("the counter is at %s after %d runs", count, runs)
	if count != strconv.Itoa(runs) {
		e.t.Errorf("the counter is at %s after %d runs; want %d: runs read the same count, they did not take turns", count, runs, runs)
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

// TestE2E_Backend_StaleRunIsFenced: a run stopped whole (SIGSTOP: s3lock,
// terraform and its step, as on a suspended laptop) in the middle of its
// apply loses its lock when its short lease lapses; a newer run takes the
// lock and writes the state; when the stopped run resumes, its state write
// is refused (HTTP 409, the state kept in errored.tfstate), and the newer
// run's state survives.
func TestE2E_Backend_StaleRunIsFenced(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	marker := filepath.Join(t.TempDir(), "started")
	stale := e.module("stale", httpBackend+resources("base", "stale=touch "+marker+"; sleep 3"))
	newer := e.clone(stale, "newer", httpBackend+resources("base", "newer"))

	p := startInGroup(t, e.backendRun(t.Context(), stale, []string{"--holder", "stale", "--lease", "6s"}, e.tf("apply", "-auto-approve")...))
	testkit.Eventually(t, waitLimit, "the stale run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	tf := p.child()
	signalGroups(t, syscall.SIGSTOP, p.cmd.Process.Pid, tf)
	held, err := e.sdk.Current(t.Context(), e.lockName())
	if err != nil || held.Phase() != s3lock.PhaseHeld || held.Holder != "stale" {
		t.Fatalf("while the stale run applies, the state's lock is %+v (%v); want it held by stale", held, err)
	}

	// The newer run's lock request waits until the stopped run's lease
	// lapses, then it applies and writes.
	out := e.through(newer, []string{"--holder", "newer", "--wait", "2m"}, e.tf("apply", "-auto-approve")...)
	if !strings.Contains(out, "terraform_data.newer: Creation complete") {
		t.Fatalf("the newer run did not apply:\n%s", out)
	}
	written := e.wantState(e.key, "terraform_data.base", "terraform_data.newer")

	signalGroups(t, syscall.SIGCONT, p.cmd.Process.Pid, tf)
	err = p.wait(2 * time.Minute)
	resumed := oneLine(p.output())
	t.Logf("the resumed run: %v\n%s", err, p.output())
	if err == nil {
		t.Error("the resumed run succeeded; want its state write refused")
	}
	for _, want := range []string{"HTTP error: 409", "errored.tfstate", "s3lock backend: refused a write"} {
		if !strings.Contains(resumed, want) {
			t.Errorf("the resumed run's output lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(stale, "errored.tfstate")); err != nil {
		t.Errorf("the resumed run kept no errored.tfstate: %v", err)
	}
	if st := e.wantState(e.key, "terraform_data.base", "terraform_data.newer"); st.Serial != written.Serial {
		t.Errorf("the state's serial went from %d to %d after the stale run resumed", written.Serial, st.Serial)
	}
	if st := e.wantFree(""); st.Epoch != held.Epoch+1 {
		t.Errorf("the lock's newest epoch is %d; want the newer run's, %d", st.Epoch, held.Epoch+1)
	}
}

// TestE2E_Backend_KilledTerraformFreesTheLock: terraform SIGKILLed in the
// middle of its apply (s3lock lives): s3lock exits with it and releases the
// lock and the s3 backend's lock file at once, and the next run, which does
// not wait, proceeds.
func TestE2E_Backend_KilledTerraformFreesTheLock(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	marker := filepath.Join(t.TempDir(), "started")
	killed := e.module("killed", httpBackend+resources("base", "slow=touch "+marker+"; sleep 300"))
	next := e.clone(killed, "next", httpBackend+resources("base"))

	p := startInGroup(t, e.backendRun(t.Context(), killed, []string{"--holder", "killed"}, e.tf("apply", "-auto-approve")...))
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	held, err := e.sdk.Current(t.Context(), e.lockName())
	if err != nil || held.Phase() != s3lock.PhaseHeld || !e.exists(e.lockFile()) {
		t.Fatalf("while the run applies, the state's lock is %+v (%v), its lock file there: %t; want both held", held, err, e.exists(e.lockFile()))
	}
	if err := syscall.Kill(p.child(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = p.wait(30 * time.Second)
	t.Logf("s3lock: %v\n%s", err, p.output())
	if code := exitCodeOf(err); code != 128+int(syscall.SIGKILL) {
		t.Errorf("s3lock exited %d (%v); want %d, its command's death by SIGKILL", code, err, 128+int(syscall.SIGKILL))
	}
	if st := e.wantFree(s3lock.PhaseReleased); st.Epoch != held.Epoch {
		t.Errorf("the lock's newest epoch is %d; want the killed run's, %d", st.Epoch, held.Epoch)
	}

	out := e.through(next, []string{"--holder", "next", "--wait", "0"}, e.tf("apply", "-auto-approve")...)
	if !strings.Contains(out, "Apply complete!") {
		t.Errorf("the next run did not apply:\n%s", out)
	}
	e.wantState(e.key, "terraform_data.base")
}

// TestE2E_Backend_KilledS3lockLeaseLapses: s3lock SIGKILLed in the middle
// of a run's apply: terraform gets one SIGTERM (from s3lock's relay, which
// the kernel tells) and stops gracefully, keeping its state in
// errored.tfstate;
// the lock and the s3 backend's lock file stay held until the lease lapses,
// and the next run, which waits for that, finds the state as the run before
// the killed one left it.
func TestE2E_Backend_KilledS3lockLeaseLapses(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	first := e.module("first", httpBackend+resources("base"))
	e.through(first, []string{"--holder", "first"}, e.tf("apply", "-auto-approve")...)
	marker := filepath.Join(t.TempDir(), "started")
	killed := e.clone(first, "killed", httpBackend+resources("base", "slow=touch "+marker+"; sleep 300"))
	next := e.clone(first, "next", httpBackend+resources("base", "next"))

	p := startInGroup(t, e.backendRun(t.Context(), killed, []string{"--holder", "killed", "--lease", "5s"}, e.tf("apply", "-auto-approve")...))
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	tf := p.child()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(30 * time.Second)
	held, err := e.sdk.Current(t.Context(), e.lockName())
	if err != nil || held.Phase() != s3lock.PhaseHeld || held.Holder != "killed" || !e.exists(e.lockFile()) {
		t.Fatalf("after s3lock was killed, the state's lock is %+v (%v), its lock file there: %t; want both still held by killed",
			held, err, e.exists(e.lockFile()))
	}
	testkit.Eventually(t, waitLimit, "terraform to stop (SIGTERM)", func() bool { return !procAlive(tf) })
	t.Logf("the killed run:\n%s", p.output())
	t.Run("terraform stops gracefully, keeping its state in errored.tfstate", func(t *testing.T) {
		if out := oneLine(p.output()); strings.Contains(out, "Two interrupts received") || !strings.Contains(out, "errored.tfstate") {
			t.Errorf("terraform did not stop gracefully when s3lock died:\n%s", p.output())
		}
		if _, err := os.Stat(filepath.Join(killed, "errored.tfstate")); err != nil {
			t.Errorf("the stopped terraform kept no errored.tfstate: %v", err)
		}
	})

	out := e.through(next, []string{"--holder", "next", "--wait", "1m"}, e.tf("apply", "-auto-approve")...)
	if !strings.Contains(out, "terraform_data.next: Creation complete") || strings.Contains(out, "terraform_data.base: Creation") {
		t.Errorf("the next run did not build on the state:\n%s", out)
	}
	e.wantState(e.key, "terraform_data.base", "terraform_data.next")
	if st := e.wantFree(s3lock.PhaseReleased); st.Epoch != held.Epoch+1 || st.Holder != "next" {
		t.Errorf("after the next run the lock is %+v; want epoch %d by next: the killed run's lease lapsed, unreleased", st, held.Epoch+1)
	}
}

// lockedID is the lock ID in Terraform's "HTTP remote state already
// locked: ID=N" (OpenTofu's too).
var lockedID = regexp.MustCompile(`already locked: ID=(\d+)`)

// TestE2E_Backend_ForceUnlockAndLockTimeout: while someone else holds the
// state's lock, a run that does not wait (--wait 0) is told so under the
// holder's lock ID; with Terraform's -lock-timeout it retries, and gets
// the lock once the holder releases it; force-unlock of the holder's lock
// ID frees the lock, and of an older ID is refused.
func TestE2E_Backend_ForceUnlockAndLockTimeout(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	dir := e.module("plan", httpBackend+resources("base"))
	ops, err := s3lock.New(e.ns.Client, e.ns.Bucket, s3lock.WithHolder("ops@elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	acquire := func() *s3lock.Lease {
		t.Helper()
		l, err := ops.Acquire(t.Context(), e.lockName(), s3lock.WithMetadata(map[string]string{"operation": "OperationTypeApply", "who": "ops@elsewhere"}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		return l
	}

	lease := acquire()
	out, err := e.backendRun(t.Context(), dir, []string{"--wait", "0"}, e.tf("plan")...).CombinedOutput()
	m := lockedID.FindSubmatch(out)
	if err == nil || !strings.Contains(string(out), "Error acquiring the state lock") || m == nil {
		t.Fatalf("a plan while ops holds the lock: %v; want it refused with the lock's ID\n%s", err, out)
	}
	if id := string(m[1]); id != strconv.FormatUint(lease.Token().Epoch, 10) {
		t.Errorf("Terraform shows lock ID %s; want the holder's epoch, %d", id, lease.Token().Epoch)
	}
	if !strings.Contains(string(out), "ops@elsewhere") {
		t.Errorf("the lock error does not say who holds the lock:\n%s", out)
	}

	// -lock-timeout: Terraform asks again until the holder releases.
	p := startInGroup(t, e.backendRun(t.Context(), dir, []string{"--wait", "0"}, e.tf("plan", "-lock-timeout=1m")...))
	testkit.Eventually(t, waitLimit, "the plan to find the state locked", func() bool { return strings.Contains(p.output(), "is locked") })
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(2 * time.Minute); err != nil || !strings.Contains(p.output(), "1 to add") {
		t.Fatalf("the plan with -lock-timeout: %v; want it to plan once the lock was released\n%s", err, p.output())
	}

	lease = acquire()
	older := strconv.FormatUint(lease.Token().Epoch-1, 10)
	if out, err := e.backendRun(t.Context(), dir, nil, e.tf("force-unlock", "-force", older)...).CombinedOutput(); err == nil {
		t.Errorf("force-unlock %s (an older lock ID) succeeded; want it refused\n%s", older, out)
	}
	if st, err := e.sdk.Current(t.Context(), e.lockName()); err != nil || st.Phase() != s3lock.PhaseHeld || st.Epoch != lease.Token().Epoch {
		t.Fatalf("after a force-unlock of an older ID the lock is %+v (%v); want it held by ops, epoch %d", st, err, lease.Token().Epoch)
	}
	out = []byte(e.through(dir, nil, e.tf("force-unlock", "-force", strconv.FormatUint(lease.Token().Epoch, 10))...))
	t.Logf("force-unlock %d:\n%s", lease.Token().Epoch, out)
	if st := e.wantFree(s3lock.PhaseReleased); st.Epoch != lease.Token().Epoch {
		t.Errorf("after force-unlock the lock's newest epoch is %d; want ops's, %d, released", st.Epoch, lease.Token().Epoch)
	}
}

// serveURL is the URL `s3lock backend serve` prints on stdout.
var serveURL = regexp.MustCompile(`(?m)^(http://127\.0\.0\.1:\d+/state/)$`)

// TestE2E_Backend_ServeAndRemoteState: `s3lock backend serve` serves the
// states of the bucket to any run with its credentials: an apply writes
// through it, another configuration reads that state with
// terraform_remote_state, a request without the credentials is refused,
// and SIGTERM releases a lock it holds and stops it.
func TestE2E_Backend_ServeAndRemoteState(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	user, pass := "terraform", "e2e-0123456789abcdef"
	serve := e.s3lock(t.Context(), t.TempDir(), "backend", "serve", "--listen", "127.0.0.1:0", "--holder", "serve")
	serve.Env = append(serve.Env, "S3LOCK_BACKEND_USERNAME="+user, "S3LOCK_BACKEND_PASSWORD="+pass)
	p := startInGroup(t, serve)
	var base string
	testkit.Eventually(t, waitLimit, "serve to print its URL", func() bool {
		m := serveURL.FindStringSubmatch(p.output())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	url := base + e.key

	app := e.dir("app", httpBackend+resources("base")+"output \"value\" {\n  value = \"from serve\"\n}\n")
	for _, args := range [][]string{{"init", "-input=false"}, {"apply", "-auto-approve"}} {
		cmd := e.h.Command(t.Context(), app, append(args, "-no-color")...)
		cmd.Env = append(cmd.Env, "TF_HTTP_ADDRESS="+url, "TF_HTTP_LOCK_ADDRESS="+url, "TF_HTTP_UNLOCK_ADDRESS="+url,
			"TF_HTTP_USERNAME="+user, "TF_HTTP_PASSWORD="+pass)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("terraform %v through serve: %v\n%s", args, err, out)
		}
	}
	e.wantState(e.key, "terraform_data.base")
	e.wantFree(s3lock.PhaseReleased)

	reader := e.dir("reader", fmt.Sprintf(`data "terraform_remote_state" "app" {
  backend = "http"
  config  = { address = %q, username = %q, password = %q }
}

output "got" {
  value = data.terraform_remote_state.app.outputs.value
}
`, url, user, pass))
	runCLI(t, e.h, reader, "init", "-input=false")
	if out := runCLI(t, e.h, reader, "apply", "-auto-approve"); !strings.Contains(out, `got = "from serve"`) {
		t.Errorf("the reader did not read the state's output through serve:\n%s", out)
	}

	for _, c := range []struct{ user, pass string }{{"", ""}, {user, pass[:len(pass)-1]}} {
		if status := request(t, http.MethodGet, url, c.user, c.pass, ""); status != http.StatusUnauthorized {
			t.Errorf("GET without the password (%q:%q): %d; want 401", c.user, c.pass, status)
		}
	}
	if status := request(t, "LOCK", url, user, pass, `{"ID":"e2e-lock","Operation":"OperationTypeApply","Who":"e2e"}`); status != http.StatusOK {
		t.Fatalf("LOCK: %d; want 200", status)
	}
	if st, err := e.sdk.Current(t.Context(), e.lockName()); err != nil || st.Phase() != s3lock.PhaseHeld || !e.exists(e.lockFile()) {
		t.Fatalf("after a LOCK the state's lock is %+v (%v), its lock file there: %t; want both held", st, err, e.exists(e.lockFile()))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(30 * time.Second); err != nil {
		t.Errorf("serve stopped by SIGTERM: %v; want exit 0\n%s", err, p.output())
	}
	e.wantFree(s3lock.PhaseReleased)
}

// request sends one request to the backend and returns its status.
func request(t *testing.T, method, url, user, pass, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// gateConfig reads a state through the http backend at var.gate while
// planning (terraform_remote_state, built into Terraform): the test's gate
// server answers only once the test opens it, so a plan holds its state
// lock for as long as the test keeps the gate shut.
const gateConfig = `
variable "gate" { type = string }

data "terraform_remote_state" "gate" {
  backend = "http"
  config  = { address = var.gate }
}

resource "terraform_data" "x" {
  input = "applied"
}
`

// gate is an http server whose every GET waits until open is closed, then
// answers with an empty state.
func gate(t *testing.T) (url string, open func()) {
	t.Helper()
	shut := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-shut:
		case <-r.Context().Done():
			return
		}
		_, _ = fmt.Fprint(w, `{"version":4,"terraform_version":"1.11.0","serial":1,"lineage":"gate","outputs":{},"resources":[]}`)
	}))
	t.Cleanup(srv.Close)
	var once sync.Once
	return srv.URL, func() { once.Do(func() { close(shut) }) }
}

// TestE2E_Backend_PlansOverlapAndAnApplyWaitsForThem: two `terraform plan`
// runs of one state through `s3lock backend run` hold its lock at the same
// time (each plan waits at the gate, holding its lock); an apply started
// meanwhile waits for both (its epoch pending above theirs), and applies
// once they are done.
func TestE2E_Backend_PlansOverlapAndAnApplyWaitsForThem(t *testing.T) {
	t.Parallel()
	e := newBackendEnv(t)
	url, open := gate(t)
	defer open()
	first := e.module("plan-1", httpBackend+gateConfig)
	dirs := []string{first, e.clone(first, "plan-2", httpBackend+gateConfig), e.clone(first, "apply", httpBackend+gateConfig)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	start := func(dir, who string, args ...string) <-chan result {
		cmd := e.backendRun(ctx, dir, []string{"--holder", who}, e.tf(args...)...)
		cmd.Env = append(cmd.Env, "TF_VAR_gate="+url)
		done := make(chan result, 1)
		go func() { out, err := cmd.CombinedOutput(); done <- result{out, err} }()
		return done
	}
	plans := []<-chan result{start(dirs[0], "plan-1", "plan"), start(dirs[1], "plan-2", "plan", "-out=tfplan")}
	testkit.Eventually(t, 2*time.Minute, "both plans to hold the state's lock at once", func() bool {
		st, err := e.sdk.Current(t.Context(), e.lockName())
		return err == nil && st.Shared && len(st.Holders) == 2
	})
	apply := start(dirs[2], "apply", "apply", "-auto-approve")
	testkit.Eventually(t, 2*time.Minute, "the apply to wait for the plans", func() bool {
		st, err := e.sdk.Current(t.Context(), e.lockName())
		return err == nil && st.Pending && st.Holder == "apply"
	})
	open()
	for i, plan := range plans {
		if r := <-plan; r.err != nil || !strings.Contains(string(r.out), "1 to add") {
			t.Errorf("plan %d: %v\n%s", i+1, r.err, r.out)
		}
	}
	if r := <-apply; r.err != nil || !strings.Contains(string(r.out), "Apply complete!") {
		t.Fatalf("the apply: %v\n%s", r.err, r.out)
	}
	e.wantState(e.key, "terraform_data.x")
	e.wantFree(s3lock.PhaseReleased)
}
