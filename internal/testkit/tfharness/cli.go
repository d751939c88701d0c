package tfharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
)

// Registry hosts at which the CLIs resolve a provider source without a host,
// such as s3lock/s3lock.
const (
	TerraformRegistryHost = "registry.terraform.io"
	OpenTofuRegistryHost  = "registry.opentofu.org"
)

// Products, as the CLIs name themselves in `version`.
const (
	ProductTerraform = "Terraform"
	ProductOpenTofu  = "OpenTofu"
)

// CLI is a Terraform or OpenTofu binary and what it says it is.
type CLI struct {
	// Path is the binary.
	Path string
	// Product is Terraform or OpenTofu.
	Product string
	// Version is the version the binary reports, without a "v" (1.12.6;
	// 1.15.0-dev for a build without release flags).
	Version string
}

// versionLine is the line of `terraform version` and `tofu version` that
// names the CLI: "Terraform v1.11.4", "OpenTofu v1.12.6". It comes first,
// except that OpenTofu prints warnings about its CLI configuration before
// it, on stdout. (Both print the same JSON for `version -json`, which
// therefore cannot tell them apart.)
var versionLine = regexp.MustCompile(`(?m)^(Terraform|OpenTofu) v(\S+)`)

// Detect asks the binary at path which CLI and version it is, by running
// its `version` command without a checkpoint (no network) or a CLI
// configuration. ctx bounds the command.
func Detect(ctx context.Context, path string) (CLI, error) {
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return CLI{}, fmt.Errorf("tfharness: %s version: %w\n%s", path, err, stderr.Bytes())
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return CLI{}, fmt.Errorf("tfharness: %s version printed no line naming Terraform or OpenTofu and a version:\n%s", path, out)
	}
	return CLI{Path: path, Product: string(m[1]), Version: string(m[2])}, nil
}

// IsOpenTofu reports whether the CLI is OpenTofu.
func (c CLI) IsOpenTofu() bool { return c.Product == ProductOpenTofu }

// RegistryHost is the host at which the CLI resolves s3lock/s3lock: the
// value of TF_ACC_PROVIDER_HOST for terraform-plugin-testing, and the first
// directory of a filesystem mirror.
func (c CLI) RegistryHost() string {
	if c.IsOpenTofu() {
		return OpenTofuRegistryHost
	}
	return TerraformRegistryHost
}

// ProviderSource is the full address the CLI gives s3lock/s3lock.
func (c CLI) ProviderSource() string { return c.RegistryHost() + "/" + providerPath }

// String names the CLI for test logs: "OpenTofu 1.12.6 (/path/to/tofu)".
func (c CLI) String() string {
	if c.Path == "" {
		return "no CLI (TF_ACC_TERRAFORM_PATH is unset and there is no terraform on PATH)"
	}
	return fmt.Sprintf("%s %s (%s)", c.Product, c.Version, c.Path)
}
