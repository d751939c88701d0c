package tfharness

import (
	"fmt"
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
