// Package tfharness runs the real Terraform or OpenTofu CLI with this
// repository's provider installed the way a user without registry access
// installs it: from a filesystem mirror named in a CLI configuration file,
// followed by an ordinary `init`. Nothing is downloaded.
//
// Which CLI it runs is $TF_ACC_TERRAFORM_PATH (the variable
// terraform-plugin-testing reads), else the terraform on PATH; the harness
// asks the binary what it is (see Detect), because Terraform and OpenTofu
// resolve the provider source s3lock/s3lock at different registry hosts and
// the mirror must use the one the CLI looks for.
package tfharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Provider coordinates of the locally built provider. ProviderSource is the
// address Terraform resolves s3lock/s3lock to; OpenTofu resolves it at its
// own registry host (CLI.ProviderSource gives the address for a CLI).
const (
	ProviderSource  = TerraformRegistryHost + "/" + providerPath
	ProviderVersion = "0.1.0"
)

// providerPath is the provider's namespace and type.
const providerPath = "s3lock/s3lock"

// Harness holds a built provider, its mirror and a CLI configuration.
type Harness struct {
	// Terraform is the path of the CLI binary (Terraform or OpenTofu):
	// $TF_ACC_TERRAFORM_PATH, else the terraform on PATH.
	Terraform string
	// CLI says which CLI Terraform is, and which version.
	CLI CLI
	// CLIConfig is the CLI configuration file that installs s3lock/s3lock
	// from the mirror.
	CLIConfig string
	// Mirror is the filesystem mirror directory.
	Mirror string
	// RepoRoot is the root of this repository.
	RepoRoot string
	// Env is environment the CLI gets besides the test's (NAME=value),
	// e.g. SSL_CERT_FILE for a registry with a test CA.
	Env []string
}

// New builds the provider into a filesystem mirror under dir, under the
// registry host of the CLI it runs, and writes a CLI configuration that uses
// it. ctx bounds the build and the version query.
func New(ctx context.Context, dir string) (*Harness, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	tf, err := CLIPath()
	if err != nil {
		return nil, err
	}
	cli, err := Detect(ctx, tf)
	if err != nil {
		return nil, err
	}
	h := &Harness{Terraform: tf, CLI: cli, RepoRoot: root, Mirror: filepath.Join(dir, "mirror"), CLIConfig: filepath.Join(dir, "terraformrc")}
	source := cli.ProviderSource()
	target := runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(h.Mirror, filepath.FromSlash(source), ProviderVersion, target,
		"terraform-provider-s3lock_v"+ProviderVersion)
	if err := Build(ctx, root, ".", bin); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`# Written by tfharness for %s: install s3lock/s3lock from a local
# mirror, nothing else from anywhere.
provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
  direct {
    exclude = [%q]
  }
}
`, cli.Product, h.Mirror, source, source)
	if err := os.WriteFile(h.CLIConfig, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("tfharness: writing %s: %w", h.CLIConfig, err)
	}
	return h, nil
}

// CLIPath returns the CLI binary the tests run: $TF_ACC_TERRAFORM_PATH, else
// the terraform on PATH.
func CLIPath() (string, error) {
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("terraform")
	if err != nil {
		return "", errors.New("tfharness: no terraform on PATH (and TF_ACC_TERRAFORM_PATH is unset)")
	}
	return p, nil
}

// Build compiles the Go package pkg of the repository at root into out.
func Build(ctx context.Context, root, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tfharness: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// RepoRoot returns the root of this repository, found from this source file.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("tfharness: cannot locate the source tree")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("tfharness: repository root not found: %w", err)
	}
	return filepath.Clean(root), nil
}

// Command prepares the CLI to run in dir with the harness's CLI
// configuration, non-interactively. When ctx ends, the CLI gets an
// interrupt, so that it stops its providers cleanly.
func (h *Harness) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.Terraform, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+h.CLIConfig,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
	)
	cmd.Env = append(cmd.Env, h.Env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	return cmd
}

// Run runs the CLI in dir and returns its combined output.
func (h *Harness) Run(ctx context.Context, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := h.Command(ctx, dir, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s in %s: %w", filepath.Base(h.Terraform), strings.Join(args, " "), dir, err)
	}
	return out.String(), err
}

// Init runs init in dir (installing the provider from the mirror).
func (h *Harness) Init(ctx context.Context, dir string) (string, error) {
	return h.Run(ctx, dir, "init", "-input=false", "-no-color")
}

// CopyDir copies the directory src (e.g. an example) to dst.
func CopyDir(dst, src string) error {
	return os.CopyFS(dst, os.DirFS(src))
}
