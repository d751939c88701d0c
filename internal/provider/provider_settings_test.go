package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	provschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The connection settings of the S3 backend (TLS, proxies, web identity,
// ...), through the real terraform against versitygw. Where no real server
// runs offline, the test says what stands in for it.

// blockWith is a provider block of exactly these settings.
func blockWith(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(requiredProviders("s3lock") + "provider \"s3lock\" {\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s = %s\n", k, args[k])
	}
	b.WriteString("}\n")
	return b.String()
}

// storeArgs are the provider settings that reach tg with its static
// credentials.
func storeArgs(tg s3test.Target) map[string]string {
	return map[string]string{
		"region":                      fmt.Sprintf("%q", tg.Region),
		"use_path_style":              "true",
		"skip_credentials_validation": "true",
		"holder":                      `"terraform-test"`,
		"endpoints":                   fmt.Sprintf("{ s3 = %q }", tg.Endpoint),
		"access_key":                  fmt.Sprintf("%q", tg.AccessKey),
		"secret_key":                  fmt.Sprintf("%q", tg.SecretKey),
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// heldOn checks, with client, that the lease resource's lock is held at the
// epoch in state.
func heldOn(client *s3.Client, bucket, name string) tfresource.TestCheckFunc {
	return func(s *terraform.State) error {
		c, err := s3lock.New(client, bucket, s3lock.WithHolder("observer"))
		if err != nil {
			return err
		}
		st, err := c.Current(context.Background(), name)
		if err != nil {
			return err
		}
		epoch, err := stateAttr(s, "s3lock_lease.test", "epoch")
		if err != nil {
			return err
		}
		if !st.Held || fmt.Sprint(st.Epoch) != epoch {
			return fmt.Errorf("lock %q: held %v at epoch %d, state says epoch %s", name, st.Held, st.Epoch, epoch)
		}
		return nil
	}
}

// TestAccProvider_CustomCABundle: a store with a self-signed certificate
// (versitygw serving HTTPS) refuses a provider that does not trust it with a
// certificate error that names the remedy; with its CA in custom_ca_bundle,
// or in AWS_CA_BUNDLE, the provider takes the lease.
func TestAccProvider_CustomCABundle(t *testing.T) {
	e := newAccEnv(t)
	st := s3test.NewTLSStore(t)
	args := storeArgs(st.Target)

	t.Run("untrusted", func(t *testing.T) {
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(args, "max_retries", "0")) + leaseConfig(st.Bucket, "tls/untrusted"),
				ExpectError: matchError("Could not acquire lock", "tls: failed to verify certificate",
					"certificate signed by unknown authority", "custom CA bundle", "AWS_CA_BUNDLE"),
			}},
		})
	})
	t.Run("custom_ca_bundle", func(t *testing.T) {
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(args, "custom_ca_bundle", fmt.Sprintf("%q", st.CAFile))) + leaseConfig(st.Bucket, "tls/bundle"),
				Check:  heldOn(st.Client, st.Bucket, "tls/bundle"),
			}},
		})
	})
	t.Run("AWS_CA_BUNDLE", func(t *testing.T) {
		t.Setenv("AWS_CA_BUNDLE", st.CAFile) // the provider runs in this process
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(args) + leaseConfig(st.Bucket, "tls/env"),
				Check:  heldOn(st.Client, st.Bucket, "tls/env"),
			}},
		})
	})
}

// TestAccProvider_Proxy: with http_proxy (or https_proxy, through a CONNECT
// tunnel) every request goes through the proxy, counted there; with the
// endpoint in no_proxy none does.
func TestAccProvider_Proxy(t *testing.T) {
	e := newAccEnv(t)
	if !e.ns.Target.Local {
		t.Skip("needs the local server's static credentials")
	}
	tg := e.ns.Target
	args := storeArgs(tg)
	host := strings.TrimPrefix(tg.Endpoint, "http://")
	onlyTo := func(p *s3test.ForwardProxy, want string) tfresource.TestCheckFunc {
		return func(*terraform.State) error {
			if p.Count() == 0 {
				return fmt.Errorf("no request went through the proxy")
			}
			for _, r := range p.Requests() {
				if r.Host != want || r.Refused {
					return fmt.Errorf("the proxy carried %s %s, want only requests for %s", r.Method, r.Host, want)
				}
			}
			return nil
		}
	}

	t.Run("http_proxy", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		name := e.name("proxy/http")
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			CheckDestroy:             checkReleased(t, e, name, 1),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(args, "http_proxy", fmt.Sprintf("%q", proxy.URL))) + leaseConfig(e.bucket, name),
				Check:  tfresource.ComposeAggregateTestCheckFunc(checkLeaseMatchesStore(t, e, "s3lock_lease.test", name), onlyTo(proxy, host)),
			}},
		})
	})
	t.Run("no_proxy names the endpoint", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		name := e.name("proxy/bypassed")
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(args, "http_proxy", fmt.Sprintf("%q", proxy.URL), "no_proxy", `"example.com, 127.0.0.1"`)) +
					leaseConfig(e.bucket, name),
				Check: tfresource.ComposeAggregateTestCheckFunc(checkLeaseMatchesStore(t, e, "s3lock_lease.test", name),
					func(*terraform.State) error {
						if n := proxy.Count(); n != 0 {
							return fmt.Errorf("%d requests went through the proxy, want none", n)
						}
						return nil
					}),
			}},
		})
	})
	tunnels := func(p *s3test.ForwardProxy) tfresource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, r := range p.Requests() {
				if r.Method != http.MethodConnect {
					return fmt.Errorf("the proxy got %s %s, want CONNECT tunnels", r.Method, r.Host)
				}
			}
			return nil
		}
	}
	t.Run("https_proxy", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(storeArgs(st.Target), "https_proxy", fmt.Sprintf("%q", proxy.URL),
					"custom_ca_bundle", fmt.Sprintf("%q", st.CAFile))) + leaseConfig(st.Bucket, "proxy/https"),
				Check: tfresource.ComposeAggregateTestCheckFunc(heldOn(st.Client, st.Bucket, "proxy/https"),
					onlyTo(proxy, strings.TrimPrefix(st.Endpoint, "https://")), tunnels(proxy)),
			}},
		})
	})
	// As in the S3 backend, http_proxy alone also carries https:// requests
	// (a regression test: a backend block's http_proxy once left all of
	// them direct), and https_proxy = "" sends them directly.
	t.Run("http_proxy carries https", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(storeArgs(st.Target), "http_proxy", fmt.Sprintf("%q", proxy.URL),
					"custom_ca_bundle", fmt.Sprintf("%q", st.CAFile))) + leaseConfig(st.Bucket, "proxy/http-for-https"),
				Check: tfresource.ComposeAggregateTestCheckFunc(heldOn(st.Client, st.Bucket, "proxy/http-for-https"),
					onlyTo(proxy, strings.TrimPrefix(st.Endpoint, "https://")), tunnels(proxy)),
			}},
		})
	})
	t.Run(`https_proxy = ""`, func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: blockWith(with(storeArgs(st.Target), "http_proxy", fmt.Sprintf("%q", proxy.URL), "https_proxy", `""`,
					"custom_ca_bundle", fmt.Sprintf("%q", st.CAFile))) + leaseConfig(st.Bucket, "proxy/https-direct"),
				Check: tfresource.ComposeAggregateTestCheckFunc(heldOn(st.Client, st.Bucket, "proxy/https-direct"),
					func(*terraform.State) error {
						if n := proxy.Count(); n != 0 {
							return fmt.Errorf("%d requests went through the proxy (%v), want none", n, proxy.Hosts())
						}
						return nil
					}),
			}},
		})
	})
}

// TestAccProvider_FalseOverridesTheEnvironment: use_fips_endpoint = false
// overrides AWS_USE_FIPS_ENDPOINT, as the S3 backend's setting does (a
// regression test: false was read as not set). With the variable alone,
// the SDK refuses every request to the custom endpoint, which has no FIPS
// variant.
func TestAccProvider_FalseOverridesTheEnvironment(t *testing.T) {
	e := newAccEnv(t)
	if !e.ns.Target.Local {
		t.Skip("needs the local server's static credentials")
	}
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true") // the provider runs in this process
	args := with(storeArgs(e.ns.Target), "max_retries", "0")
	name := e.name("fips/off")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkReleased(t, e, name, 1),
		Steps: []tfresource.TestStep{
			{
				Config:      blockWith(args) + leaseConfig(e.bucket, e.name("fips/env")),
				ExpectError: matchError("FIPS"),
			},
			{
				Config: blockWith(with(args, "use_fips_endpoint", "false")) + leaseConfig(e.bucket, name),
				Check:  checkLeaseMatchesStore(t, e, "s3lock_lease.test", name),
			},
		},
	})
}

// TestAccProvider_AssumeRoleWithWebIdentity: with a token file and
// assume_role_with_web_identity the provider calls STS
// AssumeRoleWithWebIdentity with the role and the token, checks the
// credentials it got with GetCallerIdentity, and takes the lease with them.
// The STS is s3test's local one (no real STS runs offline): it checks the
// role and the token and hands out the credentials versitygw accepts.
func TestAccProvider_AssumeRoleWithWebIdentity(t *testing.T) {
	e := newAccEnv(t)
	if !e.ns.Target.Local {
		t.Skip("needs the local server's static credentials")
	}
	tg := e.ns.Target
	const role, token = "arn:aws:iam::123456789012:role/ci-locks", "eyJhbGciOiJSUzI1NiJ9.ci.sig"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	// No static credentials: only the web identity's.
	base := map[string]string{
		"region":         fmt.Sprintf("%q", tg.Region),
		"use_path_style": "true",
		"holder":         `"terraform-test"`,
	}

	t.Run("token file", func(t *testing.T) {
		sts := s3test.NewSTS(t, s3test.STSConfig{Roles: []string{role}, WebIdentityToken: token,
			AccessKey: tg.AccessKey, SecretKey: tg.SecretKey})
		name := e.name("oidc/file")
		cfg := blockWith(with(base,
			"endpoints", fmt.Sprintf("{ s3 = %q, sts = %q }", tg.Endpoint, sts.URL),
			"assume_role_with_web_identity", fmt.Sprintf("{\n    role_arn = %q\n    web_identity_token_file = %q\n"+
				"    session_name = \"pipeline-42\"\n    duration = \"30m\"\n  }", role, tokenFile),
		)) + leaseConfig(e.bucket, name)
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			CheckDestroy:             checkReleased(t, e, name, 1),
			Steps: []tfresource.TestStep{{
				Config: cfg,
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkLeaseMatchesStore(t, e, "s3lock_lease.test", name),
					func(*terraform.State) error {
						calls := sts.Calls("AssumeRoleWithWebIdentity")
						if len(calls) == 0 {
							return fmt.Errorf("STS got no AssumeRoleWithWebIdentity (calls: %+v)", sts.Calls(""))
						}
						for _, c := range calls {
							f := c.Form
							if c.Status != http.StatusOK || f.Get("RoleArn") != role || f.Get("WebIdentityToken") != token ||
								f.Get("RoleSessionName") != "pipeline-42" || f.Get("DurationSeconds") != "1800" {
								return fmt.Errorf("STS got %v (answered %d)", f, c.Status)
							}
						}
						ids := sts.Calls("GetCallerIdentity")
						if len(ids) == 0 || ids[0].AccessKey != tg.AccessKey {
							return fmt.Errorf("the credentials were not checked with the assumed role's: %+v", ids)
						}
						return nil
					},
				),
			}},
		})
	})
	t.Run("wrong token", func(t *testing.T) {
		sts := s3test.NewSTS(t, s3test.STSConfig{Roles: []string{role}, WebIdentityToken: "another",
			AccessKey: tg.AccessKey, SecretKey: tg.SecretKey})
		cfg := blockWith(with(base,
			"endpoints", fmt.Sprintf("{ s3 = %q, sts = %q }", tg.Endpoint, sts.URL),
			"assume_role_with_web_identity", fmt.Sprintf("{\n    role_arn = %q\n    web_identity_token = %q\n  }", role, token),
		)) + leaseConfig(e.bucket, e.name("oidc/refused"))
		tfresource.ParallelTest(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config:      cfg,
				ExpectError: matchError("Invalid AWS credentials", "AssumeRoleWithWebIdentity", "InvalidIdentityToken"),
			}},
		})
	})
}

// TestAccProvider_ConnectionSettingsValidation: malformed or conflicting
// connection settings are refused with a diagnostic that names the setting
// and the rule, before any request.
func TestAccProvider_ConnectionSettingsValidation(t *testing.T) {
	e := newAccEnv(t)
	lock := e.name("settings/lock")
	role := `role_arn = "arn:aws:iam::123456789012:role/locks"`
	cases := []struct {
		name      string
		overrides map[string]string
		want      string
	}{
		{"role ARN", map[string]string{"assume_role": `{ role_arn = "locks" }`}, `Invalid assume_role.role_arn.*"locks" is not of the form arn:`},
		{"role duration too short", map[string]string{"assume_role": "{ " + role + `, duration = "5m" }`},
			`Duration out of range.*assume_role.duration = "5m".*\[15m, 12h\]`},
		{"role duration too long", map[string]string{"assume_role_with_web_identity": `{ web_identity_token = "t", duration = "13h" }`},
			`Duration out of range.*duration = "13h"`},
		{"policy not JSON", map[string]string{"assume_role": "{ " + role + `, policy = "allow all" }`}, `Invalid assume_role.policy.*not a JSON object`},
		{"policy ARN", map[string]string{"assume_role": "{ " + role + `, policy_arns = ["ReadOnly"] }`}, `policy_arns.*"ReadOnly" is not of the form arn:`},
		{"transitive keys without tags", map[string]string{"assume_role": "{ " + role + `, transitive_tag_keys = ["team"] }`},
			`Invalid Attribute Combination.*tags`},
		{"transitive key not a tag", map[string]string{"assume_role": "{ " + role + `, tags = { team = "x" }, transitive_tag_keys = ["project"] }`},
			`transitive tag key "project" is not one of the session tags`},
		{"web identity token and file", map[string]string{"assume_role_with_web_identity": `{ web_identity_token = "t", web_identity_token_file = "/tmp/t" }`},
			`Invalid Attribute Combination.*web_identity_token_file`},
		{"web identity token file missing", map[string]string{"assume_role_with_web_identity": "{ " + role + `, web_identity_token_file = "/nonexistent/token" }`},
			`Invalid AWS configuration.*web identity token file "/nonexistent/token" cannot be read`},
		{"retry mode", map[string]string{"retry_mode": `"legacy"`}, `retry_mode.*value must be one of`},
		{"proxy URL", map[string]string{"https_proxy": `"ftp://proxy:21"`}, `Invalid https_proxy.*scheme "ftp"`},
		{"no_proxy CIDR", map[string]string{"no_proxy": `"10.0.0.0/33"`}, `Invalid no_proxy.*not a CIDR range`},
		{"CA bundle missing", map[string]string{"custom_ca_bundle": `"/nonexistent/ca.pem"`},
			`Invalid AWS configuration.*custom CA bundle "/nonexistent/ca.pem" cannot be read`},
		{"insecure with a CA bundle", map[string]string{"custom_ca_bundle": `"/nonexistent/ca.pem"`, "insecure": "true"},
			`Invalid AWS configuration.*insecure turns certificate checks off`},
		{"FIPS with a custom endpoint", map[string]string{"use_fips_endpoint": "true"},
			`Invalid AWS configuration.*FIPS endpoints cannot be combined with the custom S3 endpoint`},
		{"shared config file missing", map[string]string{"shared_config_files": `["/nonexistent/config"]`},
			`Invalid AWS configuration.*shared config file "/nonexistent/config" cannot be read`},
		{"session name", map[string]string{"assume_role": "{ " + role + `, session_name = "my session" }`},
			`Invalid assume_role.session_name`},
		{"SSO endpoint", map[string]string{"endpoints": `{ s3 = "http://127.0.0.1:1", sso = "portal" }`}, `Invalid endpoint.*"portal"`},
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
	t.Run("web identity without a role", func(t *testing.T) {
		t.Setenv(awsclient.EnvRoleARN, "")
		tfresource.Test(t, tfresource.TestCase{
			ProtoV6ProviderFactories: e.protoV6Factories(),
			Steps: []tfresource.TestStep{{
				Config: e.providerConfig(map[string]string{"assume_role_with_web_identity": `{ web_identity_token = "t" }`}) +
					leaseConfig(e.bucket, lock),
				ExpectError: matchError(`Invalid AWS configuration.*role ARN is required: set it, or AWS_ROLE_ARN`),
			}},
		})
	})
}

// unmappedOptions are the fields of awsclient.Options that no provider
// setting fills, and why; TestAWSOptions_EverySetting fails for any other
// field left zero, so that a new field cannot be forgotten.
var unmappedOptions = map[string]string{
	"AppID":           "the CLI's User-Agent tag; the provider's requests carry the SDK's",
	"ConnectTimeout":  "awsclient's default; the S3 backend has no such setting",
	"ResponseTimeout": "awsclient's default; the S3 backend has no such setting",
}

// zeroFields lists the exported fields of the struct v (and of the structs
// its pointer fields point to) that are zero, as paths such as
// "AssumeRole.Policy".
func zeroFields(v reflect.Value, prefix string) []string {
	var out []string
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		name := prefix + f.Name
		switch {
		case fv.IsZero():
			out = append(out, name)
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			out = append(out, zeroFields(fv.Elem(), name+".")...)
		}
	}
	return out
}

// TestAWSOptions_EverySetting: every connection setting of the provider
// block reaches awsclient.Options, the one place that applies them, and the
// run guard gets them all (its configuration travels as JSON).
func TestAWSOptions_EverySetting(t *testing.T) {
	ctx := t.Context()
	home := t.TempDir()
	t.Setenv("HOME", home)
	strs := func(vs ...string) []attr.Value {
		out := make([]attr.Value, len(vs))
		for i, v := range vs {
			out[i] = types.StringValue(v)
		}
		return out
	}
	s := types.StringValue
	b := types.BoolValue(true)
	cfg := providerModelV0{
		Region: s("eu-west-1"), Profile: s("ci"),
		SharedConfigFiles:      types.ListValueMust(types.StringType, strs("~/config")),
		SharedCredentialsFiles: types.ListValueMust(types.StringType, strs("~/credentials")),
		AccessKey:              s("AKIA"), SecretKey: s("secret"), Token: s("session"),
		Endpoints:    &endpointsModel{S3: s("https://s3.example.com"), STS: s("https://sts.example.com"), SSO: s("https://sso.example.com"), IAM: s("https://iam.example.com")},
		UsePathStyle: b, STSRegion: s("eu-central-1"), UseFIPSEndpoint: b, UseDualStackEndpoint: b,
		SkipRegionValidation: b, SkipMetadataAPICheck: b, SkipS3Checksum: b, CustomCABundle: s("/ca.pem"), Insecure: b,
		HTTPProxy: s("http://p:1"), HTTPSProxy: s("http://p:2"), NoProxy: s("example.com"), RetryMode: s("adaptive"),
		MaxRetries: types.Int64Value(4),
		AssumeRole: &assumeRoleModel{RoleARN: s("arn:aws:iam::1:role/a"), SessionName: s("sa"), ExternalID: s("ext"),
			Duration: s("1h30m"), Policy: s(`{}`), PolicyARNs: types.SetValueMust(types.StringType, strs("arn:aws:iam::aws:policy/P")),
			Tags:              types.MapValueMust(types.StringType, map[string]attr.Value{"team": s("x")}),
			TransitiveTagKeys: types.SetValueMust(types.StringType, strs("team")), SourceIdentity: s("alice")},
		AssumeRoleWithWebIdentity: &webIdentityModel{RoleARN: s("arn:aws:iam::1:role/w"), WebIdentityToken: s("tok"),
			WebIdentityTokenFile: s("/tok"), SessionName: s("sw"), Duration: s("20m"), Policy: s(`{"a":1}`),
			PolicyARNs: types.SetValueMust(types.StringType, strs("arn:aws:iam::aws:policy/Q"))},
	}
	got, err := awsOptions(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	yes := func() *bool { v := true; return &v }
	str := func(v string) *string { return &v }
	want := awsclient.Options{
		Region: "eu-west-1", Profile: "ci",
		// Resolved: "~" is the home directory.
		SharedConfigFiles: []string{filepath.Join(home, "config")}, SharedCredentialsFiles: []string{filepath.Join(home, "credentials")},
		AccessKey: "AKIA", SecretKey: "secret", Token: "session",
		Endpoint: "https://s3.example.com", STSEndpoint: "https://sts.example.com", SSOEndpoint: "https://sso.example.com",
		UsePathStyle: true, STSRegion: "eu-central-1", UseFIPSEndpoint: yes(), UseDualStackEndpoint: yes(),
		SkipRegionValidation: true, SkipMetadataAPICheck: yes(), SkipS3Checksum: true, CustomCABundle: "/ca.pem", Insecure: true,
		HTTPProxy: str("http://p:1"), HTTPSProxy: str("http://p:2"), NoProxy: "example.com", RetryMode: "adaptive",
		MaxAttempts: 5, MaxBackoff: maxRetryBackoff,
		AssumeRole: &awsclient.AssumeRole{RoleARN: "arn:aws:iam::1:role/a", SessionName: "sa", ExternalID: "ext",
			Duration: 90 * time.Minute, Policy: "{}", PolicyARNs: []string{"arn:aws:iam::aws:policy/P"},
			Tags: map[string]string{"team": "x"}, TransitiveTagKeys: []string{"team"}, SourceIdentity: "alice"},
		AssumeRoleWithWebIdentity: &awsclient.WebIdentity{RoleARN: "arn:aws:iam::1:role/w", WebIdentityToken: "tok",
			WebIdentityTokenFile: "/tok", SessionName: "sw", Duration: 20 * time.Minute, Policy: `{"a":1}`,
			PolicyARNs: []string{"arn:aws:iam::aws:policy/Q"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("awsOptions:\n got %+v\nwant %+v", got, want)
	}
	// Every field of the options is filled by some setting, but those of
	// unmappedOptions: a new field must get a setting or a reason there.
	for _, f := range zeroFields(reflect.ValueOf(want), "") {
		if _, ok := unmappedOptions[f]; !ok {
			t.Errorf("awsclient.Options.%s is filled by no provider setting: map one to it in awsOptions and here, "+
				"or say in unmappedOptions why none does", f)
		}
	}

	// The run guard's configuration crosses a socket as JSON.
	raw, err := json.Marshal(runguard.ClientConfig{AWS: got})
	if err != nil {
		t.Fatal(err)
	}
	var back runguard.ClientConfig
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.AWS, want) {
		t.Fatalf("the run guard gets\n %+v\nwant %+v", back.AWS, want)
	}
}

// TestAWSOptions_ExplicitFalseAndEmpty: a switch or proxy set to false or ""
// reaches the options as set (it overrides the environment, as the S3
// backend's does), one not set as unset.
func TestAWSOptions_ExplicitFalseAndEmpty(t *testing.T) {
	no := types.BoolValue(false)
	set, err := awsOptions(t.Context(), providerModelV0{UseFIPSEndpoint: no, UseDualStackEndpoint: no, SkipMetadataAPICheck: no,
		HTTPProxy: types.StringValue(""), HTTPSProxy: types.StringValue("")})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*bool{"use_fips_endpoint": set.UseFIPSEndpoint,
		"use_dualstack_endpoint": set.UseDualStackEndpoint, "skip_metadata_api_check": set.SkipMetadataAPICheck} {
		if p == nil || *p {
			t.Errorf("%s = false reached the options as %v, want false", name, p)
		}
	}
	if set.HTTPProxy == nil || *set.HTTPProxy != "" || set.HTTPSProxy == nil || *set.HTTPSProxy != "" {
		t.Errorf(`http_proxy = "" and https_proxy = "" reached the options as %v and %v, want ""`, set.HTTPProxy, set.HTTPSProxy)
	}
	null := types.BoolNull()
	unset, err := awsOptions(t.Context(), providerModelV0{UseFIPSEndpoint: null, UseDualStackEndpoint: null,
		SkipMetadataAPICheck: null, HTTPProxy: types.StringNull(), HTTPSProxy: types.StringNull()})
	if err != nil {
		t.Fatal(err)
	}
	if unset.UseFIPSEndpoint != nil || unset.UseDualStackEndpoint != nil || unset.SkipMetadataAPICheck != nil ||
		unset.HTTPProxy != nil || unset.HTTPSProxy != nil {
		t.Errorf("settings not set reached the options as set: %+v", unset)
	}
}

// TestNewClientFactory_RunGuardGetsAbsolutePaths: the run guard runs in
// another directory (next to its socket) and loads the configuration the
// provider hands it itself, so every file in it is absolute, those of the
// environment included (a regression test: a relative custom_ca_bundle
// failed in the guard, so a whole-run lease could not be renewed).
func TestNewClientFactory_RunGuardGetsAbsolutePaths(t *testing.T) {
	st := s3test.NewTLSStore(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string {
		t.Helper()
		r, err := filepath.Rel(wd, p)
		if err != nil || filepath.IsAbs(r) {
			t.Fatalf("no relative path to %s from %s: %v", p, wd, err)
		}
		return r
	}
	dir := t.TempDir()
	token, conf := filepath.Join(dir, "token"), filepath.Join(dir, "config")
	for f, content := range map[string]string{token: "eyJ.token.sig", conf: "[default]\n"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	strs := func(v string) types.List {
		return types.ListValueMust(types.StringType, []attr.Value{types.StringValue(v)})
	}
	cfg := providerModelV0{Region: types.StringValue(st.Target.Region), SkipCredentialsValidation: types.BoolValue(true),
		Endpoints:         &endpointsModel{S3: types.StringValue(st.Endpoint)},
		CustomCABundle:    types.StringValue(rel(st.CAFile)),
		SharedConfigFiles: strs(rel(conf)), SharedCredentialsFiles: strs(rel(conf)),
		AssumeRoleWithWebIdentity: &webIdentityModel{RoleARN: types.StringValue("arn:aws:iam::1:role/w"),
			PolicyARNs: types.SetNull(types.StringType)},
	}
	// With AWS_WEB_IDENTITY_TOKEN_FILE, the SDK wants AWS_ROLE_ARN too.
	t.Setenv(awsclient.EnvWebIdentityTokenFile, rel(token))
	t.Setenv(awsclient.EnvRoleARN, "arn:aws:iam::1:role/w")
	f, d := newClientFactory(t.Context(), cfg, &s3lockProvider{run: &runguard.Client{}})
	if d != nil {
		t.Fatalf("newClientFactory: %s: %s", d.Summary(), d.Detail())
	}
	raw, err := json.Marshal(f.guardConfig)
	if err != nil {
		t.Fatal(err)
	}
	var sent runguard.ClientConfig
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	opts := sent.AWS
	if opts.CustomCABundle != st.CAFile || !reflect.DeepEqual(opts.SharedConfigFiles, []string{conf}) ||
		!reflect.DeepEqual(opts.SharedCredentialsFiles, []string{conf}) || opts.AssumeRoleWithWebIdentity == nil ||
		opts.AssumeRoleWithWebIdentity.WebIdentityTokenFile != token {
		t.Fatalf("the run guard gets %+v (web identity %+v); want every file absolute: %s, %s, %s",
			opts, opts.AssumeRoleWithWebIdentity, st.CAFile, conf, token)
	}
}

// TestProvider_ConnectionSettingsNamedAsTheBackend: the provider's index
// page maps every provider setting to its S3 backend equivalent (or says
// there is none).
func TestProvider_ConnectionSettingsNamedAsTheBackend(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "templates", "index.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Settings and their S3 backend equivalents"
	table := string(tmpl)
	i := strings.Index(table, heading)
	if i < 0 {
		t.Fatalf("templates/index.md.tmpl has no %q section", heading)
	}
	table = table[i+len(heading):]
	if j := strings.Index(table, "\n#"); j >= 0 {
		table = table[:j] // up to the next heading
	}
	var resp provider.SchemaResponse
	New("test")().Schema(t.Context(), provider.SchemaRequest{}, &resp)
	for name, a := range resp.Schema.Attributes {
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("setting %s is missing from the S3 backend table of templates/index.md.tmpl", name)
		}
		nested, ok := a.(provschema.SingleNestedAttribute)
		if !ok {
			continue
		}
		for child := range nested.Attributes {
			if !strings.Contains(table, "`"+child+"`") {
				t.Errorf("setting %s.%s is missing from the S3 backend table of templates/index.md.tmpl", name, child)
			}
		}
	}
}
