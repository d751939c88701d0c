package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestNewClientFactory_DefaultHolder: without a holder setting, every lease
// the provider process takes, and the run's guard, use one identity built on
// s3lock.DefaultHolder.
func TestNewClientFactory_DefaultHolder(t *testing.T) {
	cfg := providerModelV0{Region: types.StringValue("us-east-1"), SkipCredentialsValidation: types.BoolValue(true)}
	f, d := newClientFactory(t.Context(), cfg, &s3lockProvider{})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	if !strings.Contains(f.holder, "@") || strings.TrimSpace(f.holder) != f.holder {
		t.Errorf("default holder %q, want user@host:pid-suffix", f.holder)
	}
	if f.guardConfig.Holder != f.holder {
		t.Errorf("the run's guard would write holder %q, the provider %q", f.guardConfig.Holder, f.holder)
	}
	var diags diag.Diagnostics
	for range 2 {
		c, ok := f.client(t.Context(), "my-locks", &diags)
		if !ok {
			t.Fatalf("client: %v", diags)
		}
		if c.Holder() != f.holder {
			t.Errorf("client holder %q, want the provider's %q", c.Holder(), f.holder)
		}
	}
}

// TestClientFactory_NotConfigured: an operation before Configure gets a
// diagnostic, not a panic.
func TestClientFactory_NotConfigured(t *testing.T) {
	var f *clientFactory
	var diags diag.Diagnostics
	if _, ok := f.client(t.Context(), "my-locks", &diags); ok || !diags.HasError() ||
		diags.Errors()[0].Summary() != "Provider not configured" {
		t.Errorf("client of an unconfigured provider: ok %v, diagnostics %v", ok, diags)
	}
}
