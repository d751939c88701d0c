package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// Helpers for the tests of features that came with newer CLIs (resource
// identity, list resources, actions): those tests skip, saying why, on a CLI
// that lacks the feature. terraform-plugin-testing v1.16 drives `terraform
// query` (TestStep.Query) but neither -generate-config-out nor actions, so
// those tests run the real CLI with the built provider through tfharness.

// requireCLI skips the test, before it sets anything up, on a CLI that lacks
// one of features.
func requireCLI(t *testing.T, features ...tfharness.Feature) {
	t.Helper()
	for _, f := range features {
		if reason := testCLI.Lacks(f); reason != "" {
			t.Skip(reason)
		}
	}
}

// cliWorkdir skips the test unless the CLI has every feature in features;
// otherwise it builds the provider into a filesystem mirror for the CLI
// (Go's build cache makes every build after the first a link) and returns
// the harness and a working directory, initialized, whose main.tf is the
// provider configuration of e and mainTF.
func cliWorkdir(t *testing.T, e *accEnv, mainTF string, features ...tfharness.Feature) (*tfharness.Harness, string) {
	t.Helper()
	requireCLI(t, features...)
	h, err := tfharness.New(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeWorkFile(t, dir, "main.tf", e.providerConfig(nil)+mainTF)
	if out, err := h.Init(t.Context(), dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return h, dir
}

// writeWorkFile writes a file of a working directory.
func writeWorkFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// example returns an example configuration of the docs (a path under
// examples/), with each old string of replace (old, new, ...) replaced, so
// that a test runs the example as documented against its own bucket.
func example(t *testing.T, rel string, replace ...string) string {
	t.Helper()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("example %s does not contain %q", rel, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	return s
}
