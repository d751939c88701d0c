package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// requireStateStores skips the test, saying why, on a CLI that cannot run
// state_store blocks; on one that can, it turns them on for the test.
func requireStateStores(t *testing.T) {
	t.Helper()
	if reason := testCLI.LacksStateStores(t.Context()); reason != "" {
		t.Skip(reason)
	}
	t.Setenv(tfharness.EnvStateStores, "1")
}

// stateStoreConfig is a terraform block whose state_store is s3lock_s3 on
// the env's bucket, with extra arguments (raw HCL lines). Its provider
// block has no keys: they would be saved on disk, and every command would
// warn of them (TestAccStateStore_WarnsOfSecretsInTheBlock); the test's
// environment gives them (credentialsFromEnv).
func (e *accEnv) stateStoreConfig(extra string) string {
	var block []string
	for _, line := range strings.Split(e.providerBlock(nil), "\n") {
		if !strings.Contains(line, "access_key") && !strings.Contains(line, "secret_key") {
			block = append(block, line)
		}
	}
	return fmt.Sprintf(`terraform {
  required_providers {
    s3lock = { source = %q }
  }
  state_store "s3lock_s3" {
    %s
    bucket = %q
    key    = %q
    %s
  }
}
`, providerSource(), indent(strings.Join(block, "\n"), "    "), e.bucket, e.name("stacks/app/terraform.tfstate"), extra)
}

// credentialsFromEnv gives the test server's keys to the provider through
// the AWS credential chain's variables, for the test and the CLIs it runs.
func (e *accEnv) credentialsFromEnv(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", e.ns.Target.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.ns.Target.SecretKey)
}

// The framework's own checks of a state store (terraform-plugin-testing's
// StateStore mode): init, state read and written, workspaces created,
// listed and deleted; and locking (VerifyStateStoreLock): while one apply
// holds the state, another client's apply fails to lock it, and once the
// first finishes, the lock is free again.
func TestAccStateStore_PassesTheFrameworksChecks(t *testing.T) {
	e := newAccEnv(t)
	requireStateStores(t)
	// The lock check adds a resource of the framework's own provider,
	// tfplugintesting, without a source: Terraform looks for it under
	// hashicorp/, so the providers are served there.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "hashicorp")
	e.credentialsFromEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []resource.TestStep{
			{StateStore: true, Config: e.stateStoreConfig(`wait_timeout = "0s"`)},
			{StateStore: true, VerifyStateStoreLock: true, Config: e.stateStoreConfig(`wait_timeout = "0s"`)},
		},
	})
}

// TestAccStateStore_WarnsOfSecretsInTheBlock: keys written in the
// state_store block are saved by Terraform, as written, in
// .terraform/terraform.tfstate (and in plan files), whatever the schema
// marks sensitive; the store said nothing, and the guide put credentials
// there. Every command now warns, naming the attributes; credentials from
// the environment give no warning.
func TestAccStateStore_WarnsOfSecretsInTheBlock(t *testing.T) {
	e := newAccEnv(t)
	requireStateStores(t)
	if e.ns.Target.AccessKey == "" {
		t.Skip("needs static credentials for the test server")
	}
	h, err := tfharness.New(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	block := strings.Replace(e.stateStoreConfig(""), providerSource(), h.CLI.ProviderSource(), 1)
	withKeys := strings.Replace(block, `provider "s3lock" {`, fmt.Sprintf("provider \"s3lock\" {\n      access_key = %q\n      secret_key = %q",
		e.ns.Target.AccessKey, e.ns.Target.SecretKey), 1)
	dir := t.TempDir()
	writeWorkFile(t, dir, "main.tf", withKeys)
	out, err := h.Init(t.Context(), dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if words := strings.Join(strings.Fields(out), " "); !strings.Contains(words, "Warning: Secrets in the state_store block are saved on disk") ||
		!strings.Contains(words, "sets access_key, secret_key.") || !strings.Contains(words, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("terraform init with keys in the state_store block did not warn of them:\n%s", out)
	}
	// The reason: Terraform keeps them there.
	if saved, err := os.ReadFile(filepath.Join(dir, ".terraform", "terraform.tfstate")); err != nil || !strings.Contains(string(saved), e.ns.Target.SecretKey) {
		t.Errorf("the secret key is not in .terraform/terraform.tfstate (%v): if Terraform no longer saves it there, reword the warning", err)
	}
	// From the environment: no warning.
	writeWorkFile(t, dir, "main.tf", block)
	e.credentialsFromEnv(t)
	out, err = h.Run(t.Context(), dir, "init", "-reconfigure", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "Secrets in the state_store block") {
		t.Errorf("terraform init with credentials from the environment warned of secrets:\n%s", out)
	}
}

// inlineSecrets names every secret set in the block, and only those.
func TestInlineSecrets(t *testing.T) {
	cfg := providerModelV0{AccessKey: types.StringValue("AKIA"), SecretKey: types.StringValue("s"),
		Token: types.StringNull(), SSECustomerKey: types.StringValue("k"), Profile: types.StringValue("p"),
		AssumeRoleWithWebIdentity: &webIdentityModel{WebIdentityToken: types.StringValue("jwt")}}
	got := strings.Join(inlineSecrets(cfg), ",")
	if want := "access_key,secret_key,assume_role_with_web_identity.web_identity_token,sse_customer_key"; got != want {
		t.Errorf("inlineSecrets = %s; want %s", got, want)
	}
	if got := inlineSecrets(providerModelV0{Profile: types.StringValue("p")}); len(got) != 0 {
		t.Errorf("inlineSecrets of a block with a profile only = %v; want none", got)
	}
}

// indent puts prefix before every line of s but the first.
func indent(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// providerSource is where the tests' terraform finds s3lock:
// TF_ACC_PROVIDER_NAMESPACE's namespace on the CLI's registry host.
func providerSource() string {
	return testCLI.RegistryHost() + "/" + os.Getenv("TF_ACC_PROVIDER_NAMESPACE") + "/s3lock"
}

// TestStateStore_LockNamesWhomItWaitedFor: a state lock had after a wait
// says whom it waited for (the holder, with Terraform's lock info: who and
// the operation) and how long, in a warning of the LockState response and
// in the log at WARN (the framework logs every warning). Terraform 1.16 prints only "Acquiring state lock"
// while the state store waits, and drops a LockState's warnings; the
// warning is there for the Terraform that shows them.
func TestStateStore_LockNamesWhomItWaitedFor(t *testing.T) {
	ns := s3test.New(t)
	key := ns.Name("app/terraform.tfstate")
	store := func(holder, who string, cfg tfstate.Config) *tfstate.Store {
		c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder(holder))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Bucket, cfg.Key, cfg.Who = ns.Bucket, key, who
		s, err := tfstate.New(ns.Client, c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice := store("s3lock-provider", "alice@build-7", tfstate.Config{})
	id, err := alice.Lock(t.Context(), tfstate.DefaultWorkspace, "OperationTypeApply")
	if err != nil {
		t.Fatal(err)
	}
	waits := &stateWaits{now: time.Now}
	ours := &stateStore{store: store("s3lock-provider-2", "bob@laptop", tfstate.Config{Wait: time.Minute, Order: s3lock.OrderFIFO, WaitObserver: waits.observe}), waits: waits}

	// Unlocked once ours waits in the lock's line.
	observer, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("observer"))
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if line, err := observer.Line(t.Context(), alice.LockName(tfstate.DefaultWorkspace)); err == nil && len(line) > 0 {
				unlocked <- alice.Unlock(t.Context(), tfstate.DefaultWorkspace, id)
				return
			}
		}
		unlocked <- fmt.Errorf("the second lock never queued")
	}()
	var resp statestore.LockResponse
	ours.Lock(t.Context(), statestore.LockRequest{StateID: tfstate.DefaultWorkspace, Operation: "OperationTypePlan"}, &resp)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	if resp.Diagnostics.HasError() || resp.LockID == "" {
		t.Fatalf("lock after a wait: %v (id %q)", resp.Diagnostics, resp.LockID)
	}
	if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Severity() != diag.SeverityWarning {
		t.Fatalf("diagnostics %v; want one warning", resp.Diagnostics)
	}
	d := resp.Diagnostics[0]
	detail := strings.Join(strings.Fields(d.Detail()), " ")
	for _, want := range []string{`The state of workspace "default" (s3://` + ns.Bucket + "/" + key, "this run waited",
		`When it asked, it was held by "s3lock-provider" (epoch 1, since `,
		`; Terraform's lock info: who "alice@build-7", operation "OperationTypeApply").`} {
		if !strings.Contains(detail, want) {
			t.Errorf("the warning %q lacks %q", detail, want)
		}
	}
	if d.Summary() != "Waited for the state lock" {
		t.Errorf("summary %q", d.Summary())
	}
	if err := ours.store.Unlock(t.Context(), tfstate.DefaultWorkspace, resp.LockID); err != nil {
		t.Fatal(err)
	}

	// A lock had at once says nothing.
	resp = statestore.LockResponse{}
	ours.Lock(t.Context(), statestore.LockRequest{StateID: tfstate.DefaultWorkspace, Operation: "OperationTypePlan"}, &resp)
	if len(resp.Diagnostics) != 0 || resp.LockID == "" {
		t.Errorf("lock of a free state: %v (id %q); want it without diagnostics", resp.Diagnostics, resp.LockID)
	}
	_ = ours.store.Unlock(t.Context(), tfstate.DefaultWorkspace, resp.LockID)
}

// TestStateStore_PlansShareTheLock: the state store locks for Terraform's
// Operation: two plans hold the lock at once under lock IDs of their own
// (EPOCH.SHARE), an apply that finds them is told that plans share it and
// shown one plan's lock ID, and a write under a plan's lock is refused.
func TestStateStore_PlansShareTheLock(t *testing.T) {
	ns := s3test.New(t)
	key := ns.Name("app/terraform.tfstate")
	run := func(holder string) *stateStore {
		c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder(holder))
		if err != nil {
			t.Fatal(err)
		}
		s, err := tfstate.New(ns.Client, c, tfstate.Config{Bucket: ns.Bucket, Key: key, Who: holder + "@ci"})
		if err != nil {
			t.Fatal(err)
		}
		return &stateStore{store: s, waits: &stateWaits{now: time.Now}}
	}
	lock := func(s *stateStore, operation string) statestore.LockResponse {
		var resp statestore.LockResponse
		s.Lock(t.Context(), statestore.LockRequest{StateID: tfstate.DefaultWorkspace, Operation: operation}, &resp)
		return resp
	}
	plan1, plan2, apply := run("plan-1"), run("plan-2"), run("apply")
	r1, r2 := lock(plan1, tfstate.OperationPlan), lock(plan2, tfstate.OperationPlan)
	if r1.Diagnostics.HasError() || r2.Diagnostics.HasError() || r1.LockID == r2.LockID || !strings.Contains(r1.LockID, ".") {
		t.Fatalf("two plans' locks: %q %v, %q %v; want both, under lock IDs EPOCH.SHARE of their own", r1.LockID, r1.Diagnostics, r2.LockID, r2.Diagnostics)
	}
	ra := lock(apply, "OperationTypeApply")
	if !ra.Diagnostics.HasError() {
		t.Fatalf("an apply's lock while plans hold it: %q; want it refused (wait_timeout 0)", ra.LockID)
	}
	detail := strings.Join(strings.Fields(ra.Diagnostics[0].Detail()), " ")
	if !strings.Contains(detail, "locked by 2 plan(s), which share it") || !strings.Contains(detail, "Operation: OperationTypePlan") ||
		!strings.Contains(detail, "ID: "+r1.LockID) && !strings.Contains(detail, "ID: "+r2.LockID) {
		t.Errorf("what the apply is told: %s; want the plans, and one plan's lock ID", detail)
	}
	var wr statestore.WriteResponse
	plan1.Write(t.Context(), statestore.WriteRequest{StateID: tfstate.DefaultWorkspace, StateBytes: []byte(`{"version":4}`)}, &wr)
	if !wr.Diagnostics.HasError() || !strings.Contains(wr.Diagnostics[0].Detail(), "a plan does not write the state") {
		t.Errorf("a write under a plan's lock: %v; want it refused, saying why", wr.Diagnostics)
	}
	for _, p := range []struct {
		s  *stateStore
		id string
	}{{plan1, r1.LockID}, {plan2, r2.LockID}} {
		var ur statestore.UnlockResponse
		p.s.Unlock(t.Context(), statestore.UnlockRequest{StateID: tfstate.DefaultWorkspace, LockID: p.id}, &ur)
		if ur.Diagnostics.HasError() {
			t.Fatal(ur.Diagnostics)
		}
	}
	ra = lock(apply, "OperationTypeApply")
	if ra.Diagnostics.HasError() || strings.Contains(ra.LockID, ".") {
		t.Fatalf("the apply's lock once the plans unlocked: %q %v; want an exclusive lock", ra.LockID, ra.Diagnostics)
	}
	if err := apply.store.Unlock(t.Context(), tfstate.DefaultWorkspace, ra.LockID); err != nil {
		t.Fatal(err)
	}
}

// TestAccStateStore_MaxHoldCapsTheStateLock: the state store's max_hold caps
// each state lock's lease (s3lock.WithMaxHold: the lock shows it), and one
// that does not outlast lease_duration is refused naming both.
func TestAccStateStore_MaxHoldCapsTheStateLock(t *testing.T) {
	e := newAccEnv(t)
	requireStateStores(t)
	e.credentialsFromEnv(t)
	h, err := tfharness.New(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	config := func(extra string) string {
		return strings.Replace(e.stateStoreConfig(extra), providerSource(), h.CLI.ProviderSource(), 1) +
			"resource \"terraform_data\" \"x\" {}\n"
	}
	dir := t.TempDir()
	writeWorkFile(t, dir, "main.tf", config(`max_hold = "1m"`))
	if out, err := h.Init(t.Context(), dir); err == nil || !matchError("max_hold not longer than lease_duration",
		`max_hold = "1m" must be longer than lease_duration = "2m"`).MatchString(out) {
		t.Errorf("init with a max_hold shorter than the lease: %v; want it refused naming both\n%s", err, out)
	}
	writeWorkFile(t, dir, "main.tf", config(`max_hold = "1h"`))
	if out, err := h.Run(t.Context(), dir, "init", "-reconfigure", "-input=false", "-no-color"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	st := e.current(t, e.name("stacks/app/terraform.tfstate")+tfstate.LockSuffix)
	if st.Epoch == 0 || st.HeldUntilAtMost.Sub(st.AcquiredAt) != time.Hour {
		t.Errorf("the state's lock: epoch %d, held until at most %v after it was taken; want a lock capped at 1h",
			st.Epoch, st.HeldUntilAtMost.Sub(st.AcquiredAt))
	}
}
