package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The state store s3lock_s3 under a real Terraform with pluggable state
// storage (1.16.0 built with experiments allowed; tools/tfmatrix): the runs
// below share one state in the test server.

// stateEnv is one test's state: a namespace, the state's key, and the
// harness with state stores turned on.
type stateEnv struct {
	t     *testing.T
	h     *tfharness.Harness
	ns    *s3test.Namespace
	key   string
	lease string // lease_duration of the state's lock
	sdk   *s3lock.Client
}

// newStateEnv skips unless the CLI runs state stores.
func newStateEnv(t *testing.T, lease string) *stateEnv {
	t.Helper()
	h := setup(t)
	if reason := h.CLI.LacksStateStores(t.Context()); reason != "" {
		t.Skip(reason)
	}
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server (static credentials for terraform)")
	}
	sdk, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	hh := *h
	// The keys come from the environment: in the block, Terraform would
	// save them on disk, and every command would warn of them.
	hh.Env = append(slices.Clone(h.Env), tfharness.EnvStateStores+"=1",
		"AWS_ACCESS_KEY_ID="+ns.Target.AccessKey, "AWS_SECRET_ACCESS_KEY="+ns.Target.SecretKey)
	return &stateEnv{t: t, h: &hh, ns: ns, key: ns.Name("app/terraform.tfstate"), lease: lease, sdk: sdk}
}

// lock is the name of the state's lock (tfstate.LockSuffix).
func (e *stateEnv) lock() string { return e.key + ".s3lock" }

// storeBlock is the terraform block with the state store, for who.
func (e *stateEnv) storeBlock(who, wait string) string {
	return "terraform {\n  required_providers {\n    s3lock = { source = \"s3lock/s3lock\" }\n  }\n" + e.stateStore(who, wait) + "}\n"
}

// stateStore is the state_store block, for who.
func (e *stateEnv) stateStore(who, wait string) string {
	tg := e.ns.Target
	return fmt.Sprintf(`  state_store "s3lock_s3" {
    provider "s3lock" {
      region                      = %q
      endpoints                   = { s3 = %q }
      use_path_style              = true
      skip_credentials_validation = true
      holder                      = %q
    }
    bucket         = %q
    key            = %q
    lease_duration = %q
    wait_timeout   = %q
  }
`, tg.Region, tg.Endpoint, who, e.ns.Bucket, e.key, e.lease, wait)
}

// resources is terraform_data resources, one per name, whose input is the
// name; "name=command" gives the resource a local-exec provisioner.
func resources(specs ...string) string {
	var b strings.Builder
	for _, s := range specs {
		name, command, _ := strings.Cut(s, "=")
		fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n  input = %q\n", name, name)
		if command != "" {
			fmt.Fprintf(&b, "  provisioner \"local-exec\" {\n    command = %q\n  }\n", command)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// module writes main.tf into a fresh directory for who and initializes it.
func (e *stateEnv) module(who, mainTF string) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), who)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.write(dir, mainTF)
	if out, err := e.h.Init(e.t.Context(), dir); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return dir
}

func (e *stateEnv) write(dir, mainTF string) {
	e.t.Helper()
	e.writeFile(dir, "main.tf", mainTF)
}

func (e *stateEnv) writeFile(dir, name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// run runs terraform in dir and fails the test if it fails.
func (e *stateEnv) run(dir string, args ...string) string {
	e.t.Helper()
	out, err := e.h.Run(e.t.Context(), dir, append(args, "-no-color")...)
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// stateList is `terraform state list` in dir, sorted.
func (e *stateEnv) stateList(dir string) []string {
	e.t.Helper()
	out, err := e.h.Run(e.t.Context(), dir, "state", "list")
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	list := strings.Fields(out)
	slices.Sort(list)
	return list
}

func (e *stateEnv) wantState(dir string, want ...string) {
	e.t.Helper()
	got := e.stateList(dir)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("the state holds %v; want %v", got, want)
	}
}

// TestE2E_StateStore_ConcurrentAppliesTakeTurns: three applies of one
// state started at once each run whole while the others wait (the state
// store's lock is Terraform's, held from the first read of the state to
// the last write), and each builds on the state the one before it wrote.
func TestE2E_StateStore_ConcurrentAppliesTakeTurns(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "30s")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tl := filepath.Join(t.TempDir(), "timeline")
	names := []string{"apply-1", "apply-2", "apply-3"}
	dirs := map[string]string{}
	for i, who := range names {
		// Each run replaces "step" (its input names the run) and runs the
		// step: this test's binary, recording when it ran.
		step := fmt.Sprintf("S3LOCK_WHO=%s %s=%d %s=1 %s=%s %s", who, "S3LOCK_EPOCH", i+1, envStep, timeline.EnvFile, tl, self)
		dirs[who] = e.module(who, e.storeBlock(who, "5m")+resources("base", "step-of-"+who+"="+step))
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	outputs := make([]string, len(names))
	for i, who := range names {
		wg.Go(func() {
			<-start
			out, err := e.h.Run(e.t.Context(), dirs[who], "apply", "-auto-approve", "-no-color")
			if err != nil {
				t.Errorf("%s: %v\n%s", who, err, out)
			}
			outputs[i] = out
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	sections, err := timeline.Read(tl)
	if err != nil {
		t.Fatal(err)
	}
	if len(sections) != len(names) {
		t.Fatalf("%d steps ran; want %d", len(sections), len(names))
	}
	for i := 1; i < len(sections); i++ {
		if prev, cur := sections[i-1], sections[i]; cur.Start.Before(prev.End) {
			t.Errorf("%s's apply ran its step while %s's did: the runs overlapped", cur.Who, prev.Who)
		}
	}
	// Each run found the one before it in the state: it destroyed that
	// run's step (not in its configuration) and kept base, which only the
	// first run created.
	created := 0
	for i, out := range outputs {
		if strings.Contains(out, "terraform_data.base: Creation complete") {
			created++
		}
		if !strings.Contains(out, "Apply complete!") {
			t.Errorf("%s did not complete:\n%s", names[i], out)
		}
	}
	if created != 1 {
		t.Errorf("%d runs created terraform_data.base; want exactly one (the others found it in the state)", created)
	}
	last := sections[len(sections)-1].Who
	e.wantState(dirs[last], "terraform_data.base", "terraform_data.step-of-"+last)
	st, err := e.sdk.Current(t.Context(), e.lock())
	if err != nil || st.Held || !st.Released {
		t.Errorf("after the runs the state's lock is %+v (%v); want it released", st, err)
	}
}

// TestE2E_StateStore_KilledRunsLockLapses: a run SIGKILLed mid-apply
// leaves its lock, which lapses after its lease (nobody force-unlocks);
// the next run then proceeds with the state as the killed run left it.
func TestE2E_StateStore_KilledRunsLockLapses(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "6s")
	first := e.module("first", e.storeBlock("first", "0s")+resources("base"))
	e.run(first, "apply", "-auto-approve")

	marker := filepath.Join(t.TempDir(), "started")
	killed := e.module("killed", e.storeBlock("killed", "0s")+resources("base", "slow=touch "+marker+"; sleep 300"))
	cmd := e.h.Command(t.Context(), killed, "apply", "-auto-approve", "-no-color")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the orphaned provider and step
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	held, err := e.sdk.Current(t.Context(), e.lock())
	if err != nil || !held.Held || held.Holder != "killed" {
		t.Fatalf("the state's lock is %+v (%v) while the run applies; want it held by the run", held, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	at := time.Now()

	next := e.module("next", e.storeBlock("next", "2m")+resources("base", "next"))
	out := e.run(next, "apply", "-auto-approve")
	st, err := e.sdk.Current(t.Context(), e.lock())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("terraform killed at %s; the next run done %s later; lock now %+v", at.Format(time.StampMilli), time.Since(at), st)
	if !strings.Contains(out, "terraform_data.next: Creation complete") || strings.Contains(out, "terraform_data.base: Creation") {
		t.Errorf("the next run did not build on the state:\n%s", out)
	}
	// The killed run's lease was left to lapse, not released: the lease
	// after it is the next run's.
	if st.Epoch != held.Epoch+1 || !st.Released {
		t.Errorf("the lock is %+v; want the next run's epoch %d, released", st, held.Epoch+1)
	}
	if waited := time.Since(at); waited < 6*time.Second-time.Second-s3lock.SafetyMargin(6*time.Second) {
		t.Errorf("the next run got the lock %s after the kill; want no earlier than the lease (6s) after the last renewal", waited)
	}
	e.wantState(next, "terraform_data.base", "terraform_data.next")
}

// lockIDLine is the lock ID in the lock info Terraform shows.
var lockIDLine = regexp.MustCompile(`ID:\s+(\d+)`)

// TestE2E_StateStore_StaleRunIsFenced: a run stopped (SIGSTOP, as a
// suspended laptop or a frozen CI runner) in the middle of its apply is
// force-unlocked with the ID Terraform showed, another run locks and writes
// the state, and then the stopped run resumes and writes: its write is
// refused with a clear error, and the newer run's state survives.
//
// The lease is long (10m), so that the resumed run's provider has not yet
// found its lease force-released when Terraform writes: the write goes out,
// and only the fence in S3 stops it (PROTOCOL.md §15). With a short lease
// the provider's own check would refuse it first.
func TestE2E_StateStore_StaleRunIsFenced(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "10m")
	first := e.module("first", e.storeBlock("first", "0s")+resources("base"))
	e.run(first, "apply", "-auto-approve")

	marker := filepath.Join(t.TempDir(), "started")
	stale := e.module("stale", e.storeBlock("stale", "0s")+resources("base", "stale=touch "+marker+"; sleep 2"))
	cmd := e.h.Command(t.Context(), stale, "apply", "-auto-approve", "-no-color")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var staleOut strings.Builder
	cmd.Stdout, cmd.Stderr = &staleOut, &staleOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	group := -cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(group, syscall.SIGKILL) })
	testkit.Eventually(t, waitLimit, "the run to start its step", func() bool { _, err := os.Stat(marker); return err == nil })
	// Stop the whole run: terraform, its provider (which renews the lease)
	// and the step.
	if err := syscall.Kill(group, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	newer := e.module("newer", e.storeBlock("newer", "0s")+resources("base", "newer"))
	out, err := e.h.Run(t.Context(), newer, "apply", "-auto-approve", "-no-color")
	m := lockIDLine.FindStringSubmatch(out)
	if err == nil || !strings.Contains(out, "Error acquiring the state lock") || m == nil {
		t.Fatalf("an apply while the stopped run holds the state: %v; want it refused with the lock's ID\n%s", err, out)
	}
	for _, want := range []string{"Workspace Already Locked", "Who:", "Operation: OperationTypeApply", "Holder:    stale", "terraform force-unlock " + m[1]} {
		if !strings.Contains(out, want) {
			t.Errorf("the lock error lacks %q:\n%s", want, out)
		}
	}
	e.run(newer, "force-unlock", "-force", m[1])
	e.run(newer, "apply", "-auto-approve")
	e.wantState(newer, "terraform_data.base", "terraform_data.newer")

	// The stopped run resumes, finishes its step and writes its state.
	if err := syscall.Kill(group, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	t.Logf("the resumed run: %v\n%s", err, staleOut.String())
	if err == nil {
		t.Fatal("the resumed run succeeded; want its state write refused")
	}
	resumed := strings.Join(strings.Fields(staleOut.String()), " ") // Terraform wraps lines
	for _, want := range []string{"State write refused: this run no longer holds the state lock", "errored.tfstate",
		"a newer lease of the lock, sealed or wrote the state since (the fence refused the write"} {
		if !strings.Contains(resumed, want) {
			t.Errorf("the resumed run's output lacks %q", want)
		}
	}
	// The newer run's state survives whole.
	e.wantState(newer, "terraform_data.base", "terraform_data.newer")
	e.run(newer, "plan", "-detailed-exitcode")
}

// TestE2E_StateStore_MigratesFromAndToTheLocalBackend: `terraform state
// migrate` (Terraform 1.16's way to move a state between a backend and a
// state store: a .tfmigrate.hcl file names the source) moves a state into
// the store and back out, keeping every resource.
func TestE2E_StateStore_MigratesFromAndToTheLocalBackend(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "30s")
	res := resources("one", "two")
	required := "terraform {\n  required_providers {\n    s3lock = { source = \"s3lock/s3lock\" }\n  }\n}\n"
	dir := e.module("migrate", required+res)
	e.run(dir, "apply", "-auto-approve")

	e.write(dir, e.storeBlock("migrate", "0s")+res)
	e.writeFile(dir, "in.tfmigrate.hcl", "from {\n  backend \"local\" {\n    path = \"terraform.tfstate\"\n  }\n}\n")
	e.run(dir, "state", "migrate", "-input=false", "-force-copy")
	if keys := s3test.Keys(t, e.ns.Client, e.ns.Bucket, e.key); !slices.Contains(keys, e.key) {
		t.Fatalf("after migrating in, s3://%s/%s is missing (keys: %v)", e.ns.Bucket, e.key, keys)
	}
	e.wantState(dir, "terraform_data.one", "terraform_data.two")
	e.run(dir, "plan", "-detailed-exitcode")

	e.write(dir, "terraform {\n  backend \"local\" {\n    path = \"out.tfstate\"\n  }\n}\n"+res)
	e.writeFile(dir, "in.tfmigrate.hcl", "state_store_provider {\n  s3lock = { source = \"s3lock/s3lock\" }\n}\n\nfrom {\n"+
		e.stateStore("migrate", "0s")+"}\n")
	e.run(dir, "state", "migrate", "-input=false", "-force-copy")
	if _, err := os.Stat(filepath.Join(dir, "out.tfstate")); err != nil {
		t.Fatalf("after migrating out, no local state: %v", err)
	}
	e.wantState(dir, "terraform_data.one", "terraform_data.two")
	e.run(dir, "plan", "-detailed-exitcode")
}

// TestE2E_StateStore_SharesStatesWithTheS3Backend: a state written by
// Terraform's s3 backend (Terraform on PATH, 1.11: the 1.16 build here has
// no s3 backend, its nested module is not on the module proxy) is the
// store's state, and what the store writes the s3 backend reads: every
// resource survives the round trip, and so does a workspace.
func TestE2E_StateStore_SharesStatesWithTheS3Backend(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "30s")
	tf, err := exec.LookPath("terraform")
	if err != nil || tf == e.h.Terraform {
		t.Skip("needs a second terraform on PATH with the s3 backend (1.10 or later)")
	}
	cli, err := tfharness.Detect(t.Context(), tf)
	if err != nil {
		t.Fatal(err)
	}
	if cli.IsOpenTofu() || cli.Lacks(tfharness.Feature{Name: "the s3 backend's use_lockfile", Terraform: "1.10.0"}) != "" {
		t.Skipf("%s cannot stand for the s3 backend here (want Terraform 1.10 or later)", cli)
	}
	s3h := *e.h
	s3h.Terraform, s3h.CLI, s3h.Env = tf, cli, nil
	tg := e.ns.Target
	backend := fmt.Sprintf(`terraform {
  backend "s3" {
    bucket                      = %q
    key                         = %q
    region                      = %q
    access_key                  = %q
    secret_key                  = %q
    endpoints                   = { s3 = %q }
    use_path_style              = true
    use_lockfile                = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true
  }
}
`, e.ns.Bucket, e.key, tg.Region, tg.AccessKey, tg.SecretKey, tg.Endpoint)
	s3dir := filepath.Join(t.TempDir(), "s3")
	if err := os.MkdirAll(s3dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.write(s3dir, backend+resources("one"))
	s3run := func(args ...string) string {
		t.Helper()
		out, err := s3h.Run(t.Context(), s3dir, append(args, "-no-color")...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	s3run("init", "-input=false")
	s3run("apply", "-auto-approve")

	store := e.module("store", e.storeBlock("store", "0s")+resources("one", "two"))
	e.wantState(store, "terraform_data.one")
	e.run(store, "apply", "-auto-approve")

	e.write(s3dir, backend+resources("one", "two"))
	out, err := s3h.Run(t.Context(), s3dir, "plan", "-detailed-exitcode", "-no-color")
	if err != nil {
		t.Fatalf("the s3 backend's plan of the store's state: %v; want no changes\n%s", err, out)
	}
	s3run("workspace", "new", "dev")
	s3run("apply", "-auto-approve")
	if out := e.run(store, "workspace", "list"); !strings.Contains(out, "dev") {
		t.Errorf("the store's workspaces lack the s3 backend's dev:\n%s", out)
	}
	e.run(store, "workspace", "select", "dev")
	e.wantState(store, "terraform_data.one", "terraform_data.two")
}

// TestE2E_StateStore_CtrlCEndsTheWait: Terraform cannot cancel a state
// store's lock call, so the provider ends the wait itself when Ctrl-C
// interrupts the terminal's process group: the run stops at once, and
// leaves the lock's line.
func TestE2E_StateStore_CtrlCEndsTheWait(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "30s")
	lease, err := e.sdk.Acquire(t.Context(), e.lock(), s3lock.WithMetadata(map[string]string{"operation": "OperationTypeApply"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	dir := e.module("waiting", e.storeBlock("waiting", "10m")+resources("base"))
	cmd := e.h.Command(t.Context(), dir, "plan", "-no-color")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	testkit.Eventually(t, waitLimit, "the run to queue for the lock", func() bool {
		line, err := e.sdk.Line(t.Context(), e.lock())
		return err == nil && len(line) == 1
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	interrupted := time.Now()
	err = cmd.Wait()
	t.Logf("terraform exited %s after Ctrl-C: %v\n%s", time.Since(interrupted), err, out.String())
	if err == nil || !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "Interrupted while waiting for the state lock") {
		t.Errorf("the interrupted run: %v; want it to fail, interrupted while waiting", err)
	}
	if d := time.Since(interrupted); d > 20*time.Second {
		t.Errorf("terraform took %s to stop after Ctrl-C; want it to stop waiting at once", d)
	}
	if line, err := e.sdk.Line(t.Context(), e.lock()); err != nil || len(line) != 0 {
		t.Errorf("after the interrupt the lock's line is %v (%v); want it empty", line, err)
	}
}

// TestE2E_StateStore_PlansOverlapAndAnApplyWaitsForThem: two plans of one
// state (one saving its plan) hold the state store's lock at once — shared,
// as Terraform's lock request names a plan — while an apply waits for them
// and then runs alone (PROTOCOL.md §15, §17). Each plan reads a remote
// state from a gate the test opens only once it has seen both plans holding
// the lock and the apply waiting, so the plans cannot have run one after
// the other.
func TestE2E_StateStore_PlansOverlapAndAnApplyWaitsForThem(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, "30s")
	url, open := gate(t)
	defer open()
	dirs := map[string]string{}
	for _, who := range []string{"plan-1", "plan-2", "apply"} {
		dirs[who] = e.module(who, e.storeBlock(who, "5m")+gateConfig)
		e.writeFile(dirs[who], "terraform.tfvars", fmt.Sprintf("gate = %q\n", url))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	start := func(who string, args ...string) <-chan result {
		done := make(chan result, 1)
		go func() {
			out, err := e.h.Run(ctx, dirs[who], append(args, "-no-color")...)
			done <- result{out, err}
		}()
		return done
	}
	plans := []<-chan result{start("plan-1", "plan"), start("plan-2", "plan", "-out=tfplan")}
	testkit.Eventually(t, 2*time.Minute, "both plans to hold the state's lock at once", func() bool {
		st, err := e.sdk.Current(t.Context(), e.lock())
		return err == nil && st.Shared && len(st.Holders) == 2
	})
	apply := start("apply", "apply", "-auto-approve")
	testkit.Eventually(t, 2*time.Minute, "the apply to wait for the plans", func() bool {
		st, err := e.sdk.Current(t.Context(), e.lock())
		return err == nil && st.Pending && st.Holder == "apply"
	})
	open()
	for i, plan := range plans {
		if r := <-plan; r.err != nil || !strings.Contains(r.out, "1 to add") {
			t.Errorf("plan %d: %v\n%s", i+1, r.err, r.out)
		}
	}
	if r := <-apply; r.err != nil || !strings.Contains(r.out, "Apply complete!") {
		t.Fatalf("the apply: %v\n%s", r.err, r.out)
	}
	e.wantState(dirs["apply"], "data.terraform_remote_state.gate", "terraform_data.x")
}
