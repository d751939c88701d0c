package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
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
