package provider

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	provschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// testSSECKey is the base64 of a 32-byte SSE-C key.
var testSSECKey = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// TestAccProvider_EncryptedBucket: a bucket whose policy denies unencrypted
// PUTs accepts every write of a provider with encrypt = true (the lease is
// taken and released), and refuses one without, with a diagnostic that says
// access was denied.
func TestAccProvider_EncryptedBucket(t *testing.T) {
	e := newAccEnv(t)
	policy := s3test.NewEncryptionPolicy(t, e.ns.Target.Endpoint)
	endpoint := policy.URL
	behind := fmt.Sprintf("{ s3 = %q }", endpoint)

	t.Run("encrypt = true", func(t *testing.T) {
		name := e.name("encrypted/on")
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			CheckDestroy: func(s *terraform.State) error {
				if n := policy.Denied.Load(); n != 0 {
					return fmt.Errorf("the bucket policy denied %d unencrypted PUTs", n)
				}
				return checkReleased(t, e, name, 1)(s)
			},
			Steps: []tfresource.TestStep{{
				Config: e.providerConfig(map[string]string{"endpoints": behind, "encrypt": "true"}) + leaseConfig(e.bucket, name),
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkLeaseMatchesStore(t, e, "s3lock_lease.test", name),
					func(*terraform.State) error {
						if policy.Passed.Load() == 0 {
							return fmt.Errorf("no encrypted PUT went through the bucket policy")
						}
						return nil
					},
				),
			}},
		})
	})
	t.Run("without encrypt", func(t *testing.T) {
		name := e.name("encrypted/off")
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config:      e.providerConfig(map[string]string{"endpoints": behind}) + leaseConfig(e.bucket, name),
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf("bucket %q", e.bucket), "AccessDenied"),
			}},
		})
		if policy.Denied.Load() == 0 {
			t.Error("the bucket policy saw no unencrypted PUT")
		}
	})
}

// TestAccProvider_ObjectSettingsValidation: malformed or conflicting
// encryption and ACL settings are refused with a diagnostic that names the
// rule, before any request.
func TestAccProvider_ObjectSettingsValidation(t *testing.T) {
	e := newAccEnv(t)
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	lock := e.name("objects/lock")
	cases := []struct {
		name      string
		overrides map[string]string
		want      string
	}{
		{"customer key not base64", map[string]string{"sse_customer_key": `"not*base64!"`},
			`Invalid sse_customer_key.*not valid base64`},
		{"customer key of 16 bytes", map[string]string{"sse_customer_key": fmt.Sprintf("%q", short)},
			`Invalid sse_customer_key.*32 bytes.*not 16 bytes`},
		{"customer key with encrypt", map[string]string{"sse_customer_key": fmt.Sprintf("%q", testSSECKey), "encrypt": "true"},
			`Invalid encryption or ACL settings.*exclude each other`},
		{"customer key with a KMS key", map[string]string{"sse_customer_key": fmt.Sprintf("%q", testSSECKey),
			"kms_key_id": `"alias/locks"`, "encrypt": "true"}, `Invalid Attribute Combination.*kms_key_id`},
		{"KMS key without encrypt", map[string]string{"kms_key_id": `"alias/locks"`},
			`Invalid encryption or ACL settings.*encryption is not turned on`},
		{"unknown ACL", map[string]string{"acl": `"owner-only"`},
			`Invalid acl.*unknown canned ACL "owner-only".*bucket-owner-full-control`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(tc.overrides) + leaseConfig(e.bucket, lock),
					ExpectError: matchError(tc.want),
				}},
			})
		})
	}
}

// TestProvider_CustomerKeyNeverShown: the diagnostics about a customer key
// never contain it, whether the attribute validator or Configure refuses it.
func TestProvider_CustomerKeyNeverShown(t *testing.T) {
	badKeys := []string{
		"c2l4dGVlbi1ieXRlLWtleQ==",                      // 16 bytes
		"not*base64!but-long-enough-to-be-recognisable", // not base64
		testSSECKey, // right, but with encrypt below
	}
	validators := objectAttributes()["sse_customer_key"].(provschema.StringAttribute).Validators
	for _, key := range badKeys {
		var diags diag.Diagnostics
		req := validator.StringRequest{Path: path.Root("sse_customer_key"), ConfigValue: types.StringValue(key)}
		for _, sv := range validators {
			if _, ok := sv.(ruleValidator); !ok {
				continue // ConflictsWith needs a whole configuration
			}
			resp := &validator.StringResponse{}
			sv.ValidateString(t.Context(), req, resp)
			diags.Append(resp.Diagnostics...)
		}
		cfg := providerModelV0{Region: types.StringValue("us-east-1"), SkipCredentialsValidation: types.BoolValue(true),
			Encrypt: types.BoolValue(true), SSECustomerKey: types.StringValue(key)}
		if _, d := newClientFactory(t.Context(), cfg, &s3lockProvider{}); d != nil {
			diags.Append(d)
		} else {
			t.Errorf("Configure accepted key %q with encrypt = true", key)
		}
		for _, d := range diags {
			if strings.Contains(d.Summary()+d.Detail(), key) {
				t.Errorf("diagnostic %q: %q shows the customer key", d.Summary(), d.Detail())
			}
		}
	}
}

// TestNewClientFactory_RunGuardGetsTheObjectSettings: the run guard renews
// a run's ephemeral leases with a client of its own, built from the
// configuration the provider hands it: the encryption and ACL must be in it,
// or its renewals are refused by a bucket that requires them.
func TestNewClientFactory_RunGuardGetsTheObjectSettings(t *testing.T) {
	cfg := providerModelV0{Region: types.StringValue("us-east-1"), SkipCredentialsValidation: types.BoolValue(true),
		ACL: types.StringValue("bucket-owner-full-control"), Encrypt: types.BoolValue(true)}
	f, d := newClientFactory(t.Context(), cfg, &s3lockProvider{run: &runguard.Client{}})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	if f.run == nil {
		t.Error("the run guard is not used")
	}
	if got := f.guardConfig.Objects; got.ACL != "bucket-owner-full-control" || !got.Encrypt {
		t.Errorf("the guard's configuration carries %+v; want the ACL and the encryption", got)
	}
}
