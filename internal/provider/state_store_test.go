package provider

import (
	"fmt"
	"os"
	"strings"
	"testing"

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
// the env's bucket, with extra arguments (raw HCL lines).
func (e *accEnv) stateStoreConfig(extra string) string {
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
`, providerSource(), indent(e.providerBlock(nil), "    "), e.bucket, e.name("stacks/app/terraform.tfstate"), extra)
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
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []resource.TestStep{
			{StateStore: true, Config: e.stateStoreConfig(`wait_timeout = "0s"`)},
			{StateStore: true, VerifyStateStoreLock: true, Config: e.stateStoreConfig(`wait_timeout = "0s"`)},
		},
	})
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
