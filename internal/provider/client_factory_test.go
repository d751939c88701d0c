package provider

import (
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestNewClientFactory_DefaultHolder: without a holder setting, every lease
// the provider process takes, and the run's guard, use one identity: the
// SDK's default holder (user@host:pid-suffix), one per process, although the
// provider makes a client per operation.
func TestNewClientFactory_DefaultHolder(t *testing.T) {
	cfg := providerModelV0{Region: types.StringValue("us-east-1"), SkipCredentialsValidation: types.BoolValue(true)}
	f, d := newClientFactory(t.Context(), cfg, &s3lockProvider{})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	var diags diag.Diagnostics
	holder := ""
	for _, bucket := range []string{"my-locks", "my-locks", "other-locks"} {
		c, ok := f.client(t.Context(), bucket, &diags)
		if !ok {
			t.Fatalf("client: %v", diags)
		}
		if holder == "" {
			holder = c.Holder()
			if !strings.Contains(holder, "@") || strings.TrimSpace(holder) != holder {
				t.Errorf("default holder %q, want user@host:pid-suffix", holder)
			}
		}
		if c.Holder() != holder {
			t.Errorf("client of bucket %s: holder %q, want the provider's %q", bucket, c.Holder(), holder)
		}
		if g := f.runGuardConfig(c).Holder; g != holder {
			t.Errorf("the run's guard would write holder %q, the provider %q", g, holder)
		}
	}

	// Operations run at once: their first clients still agree.
	f, d = newClientFactory(t.Context(), cfg, &s3lockProvider{})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	holders := make([]string, 8)
	var wg sync.WaitGroup
	for i := range holders {
		wg.Go(func() {
			var diags diag.Diagnostics
			if c, ok := f.client(t.Context(), "my-locks", &diags); ok {
				holders[i] = c.Holder()
			}
		})
	}
	wg.Wait()
	for i, h := range holders {
		if h == "" || h != holders[0] {
			t.Errorf("concurrent client %d: holder %q, client 0: %q; want one identity", i, h, holders[0])
		}
	}
}

// TestNewClientFactory_Holder: the holder setting is every lease's and the
// run's guard's identity.
func TestNewClientFactory_Holder(t *testing.T) {
	cfg := providerModelV0{Region: types.StringValue("us-east-1"), SkipCredentialsValidation: types.BoolValue(true),
		Holder: types.StringValue("ci-runner-7")}
	f, d := newClientFactory(t.Context(), cfg, &s3lockProvider{})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	var diags diag.Diagnostics
	for range 2 {
		c, ok := f.client(t.Context(), "my-locks", &diags)
		if !ok {
			t.Fatalf("client: %v", diags)
		}
		if c.Holder() != "ci-runner-7" || f.runGuardConfig(c).Holder != "ci-runner-7" {
			t.Errorf("client holder %q, guard holder %q; want the setting's %q", c.Holder(), f.runGuardConfig(c).Holder,
				"ci-runner-7")
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
