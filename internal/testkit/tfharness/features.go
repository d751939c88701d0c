package tfharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Feature is something the CLIs gained in some version that the provider's
// newer features rely on, with the first Terraform and OpenTofu versions
// that have it.
type Feature struct {
	// Name says what the feature is, for skip messages.
	Name string
	// Terraform is the first Terraform version with it.
	Terraform string
	// OpenTofu is the first OpenTofu version with it; "" when no OpenTofu
	// release has it.
	OpenTofu string
}

// The features the provider's tests check for. OpenTofu 1.12 has resource
// identity (import blocks with identity came in 1.12.0) but no list
// resources (no query command, no .tfquery.hcl files) and no actions.
var (
	ResourceIdentity = Feature{Name: "resource identity (import blocks with an identity)", Terraform: "1.12.0", OpenTofu: "1.12.0"}
	ListResources    = Feature{Name: "list resources (terraform query and .tfquery.hcl files)", Terraform: "1.14.0"}
	Actions          = Feature{Name: "actions (action blocks and terraform apply -invoke)", Terraform: "1.14.0"}
)

// Lacks says why the CLI does not have f, in a sentence for t.Skip; "" when
// it has f. It goes by the version the CLI reports; a pre-release counts as
// its release (1.14.0-beta1 as 1.14.0).
func (c CLI) Lacks(f Feature) string {
	first := f.Terraform
	if c.IsOpenTofu() {
		first = f.OpenTofu
	}
	if first == "" {
		return fmt.Sprintf("%s %s has no %s (no %s release has them yet)", c.Product, c.Version, f.Name, c.Product)
	}
	have, err := parseVersion(c.Version)
	if err != nil {
		return fmt.Sprintf("%s %s: %v, so it may lack %s", c.Product, c.Version, err, f.Name)
	}
	want, err := parseVersion(first)
	if err != nil {
		panic(fmt.Sprintf("tfharness: feature %q: %v", f.Name, err)) // a typo in the table above
	}
	if compareVersions(have, want) < 0 {
		return fmt.Sprintf("%s %s has no %s (new in %s)", c.Product, c.Version, f.Name, first)
	}
	return ""
}

// parseVersion reads the major, minor and patch numbers of a version such as
// 1.15.0 or 1.15.0-dev.
func parseVersion(v string) ([3]int, error) {
	var out [3]int
	core, _, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("version %q is not major.minor.patch", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("version %q is not major.minor.patch", v)
		}
		out[i] = n
	}
	return out, nil
}

// compareVersions returns -1, 0 or 1 as a is before, equal to or after b.
func compareVersions(a, b [3]int) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// StateStores is pluggable state storage (state_store blocks): in
// Terraform 1.15 and later, behind an experiment. LacksStateStores says
// whether a binary runs them.
var StateStores = Feature{Name: "state stores (state_store blocks, pluggable state storage)", Terraform: "1.15.0"}

// EnvStateStores is the environment variable that turns pluggable state
// storage on in a Terraform built with experiments allowed.
const EnvStateStores = "TF_ENABLE_PLUGGABLE_STATE_STORAGE"

// LacksStateStores says why the CLI cannot run a state_store block, or ""
// if it can: a Terraform from 1.15 on, linked with experiments allowed
// (-X main.experimentsAllowed=yes; tools/tfmatrix builds 1.16.0 so). A
// release build refuses EnvStateStores in `init`, which is how a probe of
// an empty directory tells them apart.
func (c CLI) LacksStateStores(ctx context.Context) string {
	if reason := c.Lacks(StateStores); reason != "" {
		return reason
	}
	dir, err := os.MkdirTemp("", "tfharness-probe-")
	if err != nil {
		return fmt.Sprintf("probing %s for state stores: %v", c, err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, c.Path, "-chdir="+dir, "init", "-input=false")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull, EnvStateStores+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("unless experiments are enabled")) {
			return fmt.Sprintf("%s runs state stores only when built with experiments allowed (-X main.experimentsAllowed=yes), and this build is not", c)
		}
		return fmt.Sprintf("probing %s for state stores: %v\n%s", c, err, out)
	}
	return ""
}
