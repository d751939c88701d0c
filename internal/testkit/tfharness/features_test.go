package tfharness_test

import (
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

func TestCLILacks(t *testing.T) {
	terraform := func(v string) tfharness.CLI { return tfharness.CLI{Product: tfharness.ProductTerraform, Version: v} }
	tofu := func(v string) tfharness.CLI { return tfharness.CLI{Product: tfharness.ProductOpenTofu, Version: v} }
	cases := []struct {
		cli     tfharness.CLI
		feature tfharness.Feature
		// lacks is a part of the reason, "" when the CLI has the feature.
		lacks string
	}{
		{terraform("1.11.4"), tfharness.ResourceIdentity, "new in 1.12.0"},
		{terraform("1.12.0"), tfharness.ResourceIdentity, ""},
		{terraform("1.13.5"), tfharness.ListResources, "new in 1.14.0"},
		{terraform("1.14.0"), tfharness.ListResources, ""},
		{terraform("1.15.0"), tfharness.Actions, ""},
		{terraform("1.15.0-dev"), tfharness.Actions, ""},
		{terraform("1.14.0-beta1"), tfharness.Actions, ""},
		{terraform("2.0.0"), tfharness.Actions, ""},
		{terraform("1.9.10"), tfharness.Actions, "new in 1.14.0"},
		{tofu("1.11.2"), tfharness.ResourceIdentity, "new in 1.12.0"},
		{tofu("1.12.6"), tfharness.ResourceIdentity, ""},
		{tofu("1.12.6"), tfharness.ListResources, "OpenTofu 1.12.6 has no list resources"},
		{tofu("1.12.6"), tfharness.Actions, "OpenTofu 1.12.6 has no actions"},
		{terraform("1.15"), tfharness.Actions, "not major.minor.patch"},
	}
	for _, tc := range cases {
		t.Run(tc.cli.Product+" "+tc.cli.Version+" "+tc.feature.Name, func(t *testing.T) {
			got := tc.cli.Lacks(tc.feature)
			if tc.lacks == "" && got != "" || tc.lacks != "" && !strings.Contains(got, tc.lacks) {
				t.Errorf("Lacks = %q, want %q", got, tc.lacks)
			}
		})
	}
}
