package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestPrefixValidator: the s3lock_leases prefix follows s3lock's one rule
// for prefixes (s3lock.ValidatePrefix).
func TestPrefixValidator(t *testing.T) {
	cases := []struct {
		prefix  string
		wantErr string // "" when valid
	}{
		{prefix: ""},
		{prefix: "deploy/"},
		{prefix: "deploy/pr"},
		{prefix: "/abs", wantErr: "starts with a slash"},
		{prefix: "a//b", wantErr: "empty path segment"},
		{prefix: "a/../b", wantErr: "Invalid prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			var resp validator.StringResponse
			prefixValidator().ValidateString(t.Context(), validator.StringRequest{
				Path: path.Root("prefix"), ConfigValue: types.StringValue(tc.prefix),
			}, &resp)
			switch {
			case tc.wantErr == "" && resp.Diagnostics.HasError():
				t.Errorf("prefix %q refused: %v", tc.prefix, resp.Diagnostics)
			case tc.wantErr != "" && !resp.Diagnostics.HasError():
				t.Errorf("prefix %q accepted, want an error with %q", tc.prefix, tc.wantErr)
			case tc.wantErr != "":
				d := resp.Diagnostics.Errors()[0]
				if got := d.Summary() + ": " + d.Detail(); !strings.Contains(got, tc.wantErr) {
					t.Errorf("prefix %q: %s, want %q", tc.prefix, got, tc.wantErr)
				}
			}
		})
	}
}
