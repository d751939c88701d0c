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

// TestOrderValidator: order accepts exactly what s3lock.ParseOrder does.
func TestOrderValidator(t *testing.T) {
	cases := []struct {
		order string
		ok    bool
	}{
		{order: "fifo", ok: true},
		{order: "newest", ok: true},
		{order: "none", ok: true},
		{order: "FIFO"},
		{order: "lifo"},
		{order: ""},
	}
	for _, tc := range cases {
		t.Run(tc.order, func(t *testing.T) {
			var resp validator.StringResponse
			orderValidator().ValidateString(t.Context(), validator.StringRequest{
				Path: path.Root("order"), ConfigValue: types.StringValue(tc.order),
			}, &resp)
			switch {
			case tc.ok && resp.Diagnostics.HasError():
				t.Errorf("order %q refused: %v", tc.order, resp.Diagnostics)
			case !tc.ok && !resp.Diagnostics.HasError():
				t.Errorf("order %q accepted", tc.order)
			case !tc.ok && resp.Diagnostics.Errors()[0].Summary() != "Invalid order":
				t.Errorf("order %q: %v, want \"Invalid order\"", tc.order, resp.Diagnostics)
			}
		})
	}
}
