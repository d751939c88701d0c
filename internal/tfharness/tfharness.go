// Package tfharness runs the real terraform CLI with this repository's
// provider installed the way a user without registry access installs it:
// from a filesystem mirror named in a CLI configuration file, followed by an
// ordinary `terraform init`. Nothing is downloaded.
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

// Provider coordinates of the locally built provider.
const (
	ProviderSource  = "registry.terraform.io/s3lock/s3lock"
	ProviderVersion = "0.1.0"
)

// Harness holds a built provider, its mirror and a CLI configuration.
type Harness struct {
	// Terraform is the terraform binary: $TF_ACC_TERRAFORM_PATH, else the
	// one on PATH.
	Terraform string
	// CLIConfig is the terraform CLI configuration file that installs
	// s3lock/s3lock from the mirror.
	CLIConfig string
	// Mirror is the filesystem mirror directory.
	Mirror string
	// RepoRoot is the root of this repository.
	RepoRoot string
}

// New builds the provider into a filesystem mirror under dir and writes a CLI
// configuration that uses it.
func New(ctx context.Context, dir string) (*Harness, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		if tf, err = exec.LookPath("terraform"); err != nil {
			return nil, errors.New("tfharness: no terraform on PATH (and TF_ACC_TERRAFORM_PATH is unset)")
		}
	}
	h := &Harness{Terraform: tf, RepoRoot: root, Mirror: filepath.Join(dir, "mirror"), CLIConfig: filepath.Join(dir, "terraformrc")}
	target := runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(h.Mirror, filepath.FromSlash(ProviderSource), ProviderVersion, target,
		"terraform-provider-s3lock_v"+ProviderVersion)
	if err := Build(ctx, root, ".", bin); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`# Written by tfharness: install s3lock/s3lock from a local mirror, nothing
# else from anywhere.
provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
  direct {
    exclude = [%q]
  }
}
`, h.Mirror, ProviderSource, ProviderSource)
	if err := os.WriteFile(h.CLIConfig, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("tfharness: writing %s: %w", h.CLIConfig, err)
	}
	return h, nil
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
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("tfharness: repository root not found: %w", err)
	}
	return filepath.Clean(root), nil
}

// Command prepares terraform to run in dir with the harness's CLI
// configuration, non-interactively.
func (h *Harness) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.Terraform, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+h.CLIConfig,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
	)
	// Let terraform stop its providers cleanly when the context ends.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	return cmd
}

// Run runs terraform in dir and returns its combined output.
func (h *Harness) Run(ctx context.Context, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := h.Command(ctx, dir, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("terraform %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return out.String(), err
}

// Init runs terraform init in dir (installing the provider from the mirror).
func (h *Harness) Init(ctx context.Context, dir string) (string, error) {
	return h.Run(ctx, dir, "init", "-input=false", "-no-color")
}

// CopyDir copies the directory src (e.g. an example) to dst.
func CopyDir(dst, src string) error {
	return os.CopyFS(dst, os.DirFS(src))
}
