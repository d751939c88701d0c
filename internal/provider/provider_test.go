package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	ephschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	provschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	resschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestMain(m *testing.M) {
	cleanup, err := prepareTerraformEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "preparing the terraform environment:", err)
		os.Exit(1)
	}
	code := s3test.Main(m)
	cleanup()
	os.Exit(code)
}

// testCLI is the Terraform or OpenTofu binary the acceptance tests run
// (set by TestMain when TF_ACC is set).
var testCLI tfharness.CLI

// prepareTerraformEnv makes the acceptance tests independent of the
// machine's environment: terraform reads its CLI configuration from
// TF_CLI_CONFIG_FILE, which must exist (an empty file is fine), and the
// tests run $TF_ACC_TERRAFORM_PATH, else the terraform binary on PATH,
// under the provider namespace s3lock and, unless told otherwise, the
// registry host at which that CLI resolves s3lock/s3lock
// (registry.opentofu.org for OpenTofu). Nothing here makes terraform
// download.
func prepareTerraformEnv() (cleanup func(), err error) {
	cleanup = func() {}
	if f := os.Getenv("TF_CLI_CONFIG_FILE"); f == "" || !fileExists(f) {
		dir, err := os.MkdirTemp("", "s3lock-provider-test-")
		if err != nil {
			return cleanup, err
		}
		cfg := filepath.Join(dir, "terraformrc")
		if err := os.WriteFile(cfg, nil, 0o600); err != nil {
			return cleanup, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		if err := os.Setenv("TF_CLI_CONFIG_FILE", cfg); err != nil {
			return cleanup, err
		}
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		if p, err := exec.LookPath("terraform"); err == nil {
			if err := os.Setenv("TF_ACC_TERRAFORM_PATH", p); err != nil {
				return cleanup, err
			}
		}
	}
	if os.Getenv("TF_ACC_PROVIDER_NAMESPACE") == "" {
		if err := os.Setenv("TF_ACC_PROVIDER_NAMESPACE", "s3lock"); err != nil {
			return cleanup, err
		}
	}
	if os.Getenv("TF_ACC") == "" || os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		return cleanup, nil // no acceptance tests, or none that can run
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if testCLI, err = tfharness.Detect(ctx, os.Getenv("TF_ACC_TERRAFORM_PATH")); err != nil {
		return cleanup, err
	}
	switch host := os.Getenv("TF_ACC_PROVIDER_HOST"); host {
	case "":
		if err := os.Setenv("TF_ACC_PROVIDER_HOST", testCLI.RegistryHost()); err != nil {
			return cleanup, err
		}
	case testCLI.RegistryHost():
	default:
		return cleanup, fmt.Errorf("TF_ACC_PROVIDER_HOST is %s, but %s resolves s3lock/s3lock at %s: unset it or set it to that host",
			host, testCLI, testCLI.RegistryHost())
	}
	return cleanup, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// accEnv is one acceptance test's corner of the store: a fresh bucket, an
// SDK client on it, and the provider configured for it.
type accEnv struct {
	ns     *s3test.Namespace
	bucket string
	// hooks are installed in the provider of every test case built from
	// protoV6Factories.
	hooks testHooks
	mu    sync.Mutex // guards hooks
	// leases are the ephemeral leases open in the test's providers.
	leases *leaseRegistry
	// offset shifts the provider's clock (see setClockOffset).
	offset atomic.Int64
	// queued ends the waiters that queue started, and waiting waits for
	// them, when the test ends.
	queued  context.Context
	waiting sync.WaitGroup
}

// newAccEnv skips the test unless TF_ACC is set, and otherwise returns a
// fresh bucket on the test server.
func newAccEnv(t *testing.T) *accEnv {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 to run it (make test does)")
	}
	t.Logf("acceptance test on %s", testCLI)
	ns := s3test.New(t)
	e := &accEnv{ns: ns, bucket: ns.Bucket, leases: newLeaseRegistry()}
	e.hooks.now = func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }
	var stopQueued context.CancelFunc
	e.queued, stopQueued = context.WithCancel(context.Background())
	t.Cleanup(func() {
		stopQueued()
		e.waiting.Wait()
	})
	// Ephemeral leases renew themselves in the (in-process) provider until
	// Terraform closes them; release any a failed step left open, as the
	// provider's main does when Terraform stops it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.leases.releaseAll(ctx)
	})
	return e
}

// name returns a lock name inside the test's namespace.
func (e *accEnv) name(s string) string { return e.ns.Name(s) }

// setClockOffset moves the provider's clock by d from now on.
func (e *accEnv) setClockOffset(d time.Duration) { e.offset.Store(int64(d)) }

// protoV6Factories returns the provider, with the env's hooks as they are
// when terraform starts it, and any extra providers (such as echo).
func (e *accEnv) protoV6Factories(extra ...map[string]func() (tfprotov6.ProviderServer, error)) map[string]func() (tfprotov6.ProviderServer, error) {
	f := map[string]func() (tfprotov6.ProviderServer, error){
		"s3lock": func() (tfprotov6.ProviderServer, error) {
			e.mu.Lock()
			h := e.hooks
			e.mu.Unlock()
			return providerserver.NewProtocol6WithError(&s3lockProvider{version: "test", hooks: h, leases: e.leases})()
		},
	}
	for _, m := range extra {
		for k, v := range m {
			f[k] = v
		}
	}
	return f
}

// factoriesWith returns the provider with the given hooks.
func (e *accEnv) factoriesWith(h testHooks) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"s3lock": func() (tfprotov6.ProviderServer, error) {
			return providerserver.NewProtocol6WithError(&s3lockProvider{version: "test", hooks: h, leases: e.leases})()
		},
	}
}

// setOnWait installs a wait hook in the providers terraform starts from now on.
func (e *accEnv) setOnWait(fn func(*s3lock.HeldError)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hooks.onWait = fn
}

// providerConfig is the terraform block and the provider block for the test
// server. Settings in overrides replace or add provider arguments (raw HCL
// values).
func (e *accEnv) providerConfig(overrides map[string]string) string {
	return requiredProviders("s3lock") + e.providerBlock(overrides)
}

// requiredProviders is a terraform block that requires the named providers
// from the host and namespace the tests serve them under (the addresses
// terraform-plugin-testing gives them). The tests write it themselves
// because terraform-plugin-testing does not add it to import steps.
func requiredProviders(names ...string) string {
	host, ns := os.Getenv("TF_ACC_PROVIDER_HOST"), os.Getenv("TF_ACC_PROVIDER_NAMESPACE")
	if host == "" {
		host = tfharness.TerraformRegistryHost
	}
	var b strings.Builder
	b.WriteString("terraform {\n  required_providers {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %s = { source = \"%s/%s/%s\" }\n", n, host, ns, n)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// providerBlock is the provider block for the test server.
func (e *accEnv) providerBlock(overrides map[string]string) string {
	tg := e.ns.Target
	args := map[string]string{
		"region":                      fmt.Sprintf("%q", tg.Region),
		"use_path_style":              fmt.Sprint(tg.PathStyle),
		"skip_credentials_validation": "true",
		"holder":                      `"terraform-test"`,
	}
	if tg.Endpoint != "" {
		args["endpoints"] = fmt.Sprintf("{ s3 = %q }", tg.Endpoint)
	}
	if tg.AccessKey != "" {
		args["access_key"] = fmt.Sprintf("%q", tg.AccessKey)
		args["secret_key"] = fmt.Sprintf("%q", tg.SecretKey)
	}
	for k, v := range overrides {
		args[k] = v
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("provider \"s3lock\" {\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s = %s\n", k, args[k])
	}
	b.WriteString("}\n")
	return b.String()
}

// sdk returns an s3lock client on the env's bucket, as another process
// (a pipeline step, an operator) would use it.
func (e *accEnv) sdk(t *testing.T, holder string) *s3lock.Client {
	t.Helper()
	c, err := s3lock.New(e.ns.Client, e.bucket, s3lock.WithHolder(holder))
	if err != nil {
		t.Fatalf("s3lock.New: %v", err)
	}
	return c
}

// current reads a lock with the SDK.
func (e *accEnv) current(t *testing.T, name string) s3lock.State {
	t.Helper()
	st, err := e.sdk(t, "observer").Current(context.Background(), name)
	if err != nil {
		t.Fatalf("Current(%q): %v", name, err)
	}
	return st
}

// hold acquires name with the SDK, as another holder, and releases it at the
// end of the test if it is still held. The lease does not renew itself.
func (e *accEnv) hold(t *testing.T, holder, name string, d time.Duration, opts ...s3lock.Option) *s3lock.Lease {
	t.Helper()
	opts = append([]s3lock.Option{s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(d)}, opts...)
	l, err := e.sdk(t, holder).TryAcquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("acquiring %q as %s: %v", name, holder, err)
	}
	t.Cleanup(func() {
		if err := l.Release(context.Background()); err != nil && !errors.Is(err, s3lock.ErrLeaseLost) {
			t.Errorf("releasing %s: %v", l.Token().Key(), err)
		}
	})
	return l
}

// queue starts an ordered Acquire of name by holder with the SDK, as another
// pipeline run would (opts give its order), and returns once it waits in the
// lock's line. It leaves the line when the test ends; if it is served before,
// it releases the lock at once. It may be called from any goroutine.
func (e *accEnv) queue(holder, name string, opts ...s3lock.Option) error {
	c, err := s3lock.New(e.ns.Client, e.bucket, s3lock.WithHolder(holder))
	if err != nil {
		return err
	}
	inLine := make(chan struct{})
	var once sync.Once
	observe := s3lock.WithWaitObserver(func(*s3lock.HeldError) { once.Do(func() { close(inLine) }) })
	done := make(chan error, 1)
	e.waiting.Go(func() {
		l, err := c.Acquire(e.queued, name, append(opts, s3lock.WithoutAutoRenew(), observe)...)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	})
	select {
	case <-inLine:
		return nil
	case err := <-done:
		return fmt.Errorf("%s never queued for %q: %w", holder, name, err)
	case <-time.After(time.Minute):
		return fmt.Errorf("%s did not queue for %q within a minute", holder, name)
	}
}

// onceWaiting calls fn, in a goroutine of its own, the first time a provider
// started from now on reports waiting for holder's lease.
func (e *accEnv) onceWaiting(holder string, fn func()) {
	var once sync.Once
	e.setOnWait(func(h *s3lock.HeldError) {
		if h.Holder == holder {
			once.Do(func() { go fn() })
		}
	})
}

// line reads the line of name with the SDK.
func (e *accEnv) line(name string) ([]s3lock.Waiter, error) {
	c, err := s3lock.New(e.ns.Client, e.bucket, s3lock.WithHolder("observer"))
	if err != nil {
		return nil, err
	}
	return c.Line(context.Background(), name)
}

// waitLapsed waits until the newest lease of name is neither held nor
// released (it lapsed).
func (e *accEnv) waitLapsed(t *testing.T, name string) {
	t.Helper()
	testkit.Eventually(t, time.Minute, name+" to lapse", func() bool { return !e.current(t, name).Held })
}

// stateAttr returns an attribute of a resource in the shimmed state.
func stateAttr(s *terraform.State, addr, key string) (string, error) {
	rs, ok := s.RootModule().Resources[addr]
	if !ok {
		return "", fmt.Errorf("%s is not in state", addr)
	}
	v, ok := rs.Primary.Attributes[key]
	if !ok {
		return "", fmt.Errorf("%s has no attribute %s", addr, key)
	}
	return v, nil
}

// matchError compiles a diagnostic regexp in which spaces match any run of
// white space: terraform wraps long diagnostics.
func matchError(parts ...string) *regexp.Regexp {
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, " ", `\s+`)
	}
	return regexp.MustCompile("(?s)" + strings.Join(parts, ".*"))
}

// ephemeralVersions skips on versions without ephemeral resources:
// Terraform below 1.10, OpenTofu below 1.11.
var ephemeralVersions = []tfversion.TerraformVersionCheck{
	tfversion.SkipBelow(tfversion.Version1_10_0),
	versionCheck(func(_ context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
		if testCLI.IsOpenTofu() && req.TerraformVersion.Core().LessThan(tfversion.Version1_11_0) {
			resp.Skip = fmt.Sprintf("OpenTofu %s has no ephemeral resources (they came in 1.11)", req.TerraformVersion)
		}
	}),
}

// versionCheck is a tfversion check written as a function. The checks that
// terraform-plugin-testing provides compare OpenTofu's version number as if
// it were Terraform's; a versionCheck can consult testCLI.
type versionCheck func(context.Context, tfversion.CheckTerraformVersionRequest, *tfversion.CheckTerraformVersionResponse)

func (f versionCheck) CheckTerraformVersion(ctx context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
	f(ctx, req, resp)
}

func TestAccProvider_Diagnostics(t *testing.T) {
	e := newAccEnv(t)
	wrongSecret := map[string]string{"secret_key": `"not-the-secret"`, "access_key": fmt.Sprintf("%q", e.ns.Target.AccessKey)}
	unreachable := map[string]string{"endpoints": `{ s3 = "http://127.0.0.1:1" }`}
	denier, denyingEndpoint := newOutageProxy(t, e.ns.Target.Endpoint)
	denier.deny.Store(true)
	denied := map[string]string{"endpoints": fmt.Sprintf("{ s3 = %q }", denyingEndpoint)}
	lock := e.name("diag/lock")
	cases := []struct {
		name      string
		overrides map[string]string
		config    string
		want      *regexp.Regexp
	}{
		{
			name:      "unreachable endpoint, data source",
			overrides: unreachable,
			config:    fmt.Sprintf("data \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("Could not read lock", fmt.Sprintf("bucket %q", e.bucket), "s3://"+e.bucket+"/"+lock, "connection refused"),
		},
		{
			name:      "unreachable endpoint, resource",
			overrides: unreachable,
			config:    fmt.Sprintf("resource \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("Could not acquire lock", fmt.Sprintf("bucket %q", e.bucket), "s3://"+e.bucket+"/"+lock, "unreachable"),
		},
		{
			name:      "access denied, resource",
			overrides: wrongSecret,
			config:    fmt.Sprintf("resource \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("Could not acquire lock", fmt.Sprintf("bucket %q", e.bucket), "s3://"+e.bucket+"/"+lock, "access denied|SignatureDoesNotMatch", "credentials"),
		},
		{
			name:      "access denied by the store's policy, resource",
			overrides: denied,
			config:    fmt.Sprintf("resource \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want: matchError("Could not acquire lock", fmt.Sprintf("bucket %q", e.bucket), "s3://"+e.bucket+"/"+lock,
				"AccessDenied", "s3:ListBucket"),
		},
		{
			name:      "access denied, data source",
			overrides: wrongSecret,
			config:    fmt.Sprintf("data \"s3lock_leases\" \"x\" {\n  bucket = %q\n}\n", e.bucket),
			want:      matchError("Could not list locks", fmt.Sprintf("bucket %q", e.bucket), "SignatureDoesNotMatch"),
		},
		{
			name:   "leases prefix with a leading slash",
			config: fmt.Sprintf("data \"s3lock_leases\" \"x\" {\n  bucket = %q\n  prefix = \"/abs\"\n}\n", e.bucket),
			want:   matchError("Invalid prefix", `Prefix "/abs"`, "starts with a slash"),
		},
		{
			name:   "missing bucket",
			config: fmt.Sprintf("data \"s3lock_lease\" \"x\" {\n  bucket = \"s3lock-no-such-bucket\"\n  name = %q\n}\n", lock),
			want:   matchError("Could not read lock", `bucket "s3lock-no-such-bucket"`, "does not exist"),
		},
		{
			name:      "endpoint not a URL",
			overrides: map[string]string{"endpoints": `{ s3 = "localhost:9000" }`},
			config:    fmt.Sprintf("data \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("Invalid endpoint", "localhost:9000"),
		},
		{
			name:      "expected bucket owner not an account id",
			overrides: map[string]string{"expected_bucket_owner": `"12345"`},
			config:    fmt.Sprintf("data \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("expected_bucket_owner", "12-digit"),
		},
		{
			name:      "blank holder",
			overrides: map[string]string{"holder": `"  "`},
			config:    fmt.Sprintf("data \"s3lock_lease\" \"x\" {\n  bucket = %q\n  name = %q\n}\n", e.bucket, lock),
			want:      matchError("Invalid holder", "blank"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(tc.overrides) + tc.config,
					ExpectError: tc.want,
				}},
			})
		})
	}
}

// TestProvider_Descriptions checks that every schema element has a
// MarkdownDescription, which the generated docs are made of.
func TestProvider_Descriptions(t *testing.T) {
	var missing []string
	check := func(where, desc string) {
		if strings.TrimSpace(desc) == "" {
			missing = append(missing, where)
		}
	}
	for _, ts := range providerSchemas(t.Context()) {
		check(ts.where, ts.desc)
		walkAttributes(ts.where, ts.attrs, check)
		for name, b := range ts.blocks {
			check(ts.where+"."+name, b.desc)
			for an, a := range b.attrs {
				d := a.(interface{ GetDescription() string })
				check(ts.where+"."+name+"."+an, a.(describedAttribute).GetMarkdownDescription()+d.GetDescription())
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("schema elements without MarkdownDescription:\n  %s", strings.Join(missing, "\n  "))
	}
}

// typeSchema is one schema the provider serves: its own, a resource's, an
// ephemeral resource's, a data source's or a state store's.
type typeSchema struct {
	where  string       // "provider", "s3lock_lease", "ephemeral s3lock_lease", "data …", "state_store …"
	desc   string       // its MarkdownDescription
	config tfsdk.Config // a configuration of it with nothing set
	attrs  map[string]any
	blocks map[string]schemaBlock // a resource's single nested blocks (timeouts)
}

// schemaBlock is a single nested block of a resource's schema.
type schemaBlock struct {
	desc  string
	attrs map[string]any
}

// providerSchemas returns every schema the provider serves, for tests that
// walk them all (descriptions, duration inputs).
func providerSchemas(ctx context.Context) []typeSchema {
	p := New("test")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	out := []typeSchema{{where: "provider", desc: ps.Schema.MarkdownDescription,
		config: nullConfig(ctx, tfsdk.Config{Schema: ps.Schema}), attrs: anyMap(ps.Schema.Attributes)}}
	for _, f := range p.Resources(ctx) {
		r := f()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &s)
		ts := typeSchema{where: md.TypeName, desc: s.Schema.MarkdownDescription, config: nullConfig(ctx, tfsdk.Config{Schema: s.Schema}),
			attrs: anyMap(s.Schema.Attributes), blocks: map[string]schemaBlock{}}
		for name, b := range s.Schema.Blocks {
			sb := schemaBlock{desc: b.GetMarkdownDescription()}
			if nb, ok := b.(resschema.SingleNestedBlock); ok {
				sb.attrs = anyMap(nb.Attributes)
			}
			ts.blocks[name] = sb
		}
		out = append(out, ts)
	}
	for _, f := range p.(provider.ProviderWithEphemeralResources).EphemeralResources(ctx) {
		r := f()
		var md ephemeral.MetadataResponse
		r.Metadata(ctx, ephemeral.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s ephemeral.SchemaResponse
		r.Schema(ctx, ephemeral.SchemaRequest{}, &s)
		out = append(out, typeSchema{where: "ephemeral " + md.TypeName, desc: s.Schema.MarkdownDescription,
			config: nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), attrs: anyMap(s.Schema.Attributes)})
	}
	for _, f := range p.DataSources(ctx) {
		d := f()
		var md datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &s)
		out = append(out, typeSchema{where: "data " + md.TypeName, desc: s.Schema.MarkdownDescription,
			config: nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), attrs: anyMap(s.Schema.Attributes)})
	}
	for _, f := range p.(provider.ProviderWithStateStores).StateStores(ctx) {
		st := f()
		var md statestore.MetadataResponse
		st.Metadata(ctx, statestore.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s statestore.SchemaResponse
		st.Schema(ctx, statestore.SchemaRequest{}, &s)
		out = append(out, typeSchema{where: "state_store " + md.TypeName, desc: s.Schema.MarkdownDescription,
			config: nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), attrs: anyMap(s.Schema.Attributes)})
	}
	return out
}

// anyMap is m with its values as any: the schema kinds' attribute maps have
// types of their own.
func anyMap[A any](m map[string]A) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// nullConfig is cfg (its schema) with nothing set.
func nullConfig(ctx context.Context, cfg tfsdk.Config) tfsdk.Config {
	cfg.Raw = tftypes.NewValue(cfg.Schema.Type().TerraformType(ctx), nil)
	return cfg
}

// describedAttribute is what all schema attribute kinds share.
type describedAttribute interface {
	GetMarkdownDescription() string
}

// walkAttributes calls check for every attribute, nested ones included.
func walkAttributes[A any](prefix string, attrs map[string]A, check func(where, desc string)) {
	for name, a := range attrs {
		where := prefix + "." + name
		check(where, any(a).(describedAttribute).GetMarkdownDescription())
		switch n := any(a).(type) {
		case provschema.SingleNestedAttribute:
			walkAttributes(where, n.Attributes, check)
		case dsschema.ListNestedAttribute:
			walkAttributes(where, n.NestedObject.Attributes, check)
		case resschema.SingleNestedAttribute:
			walkAttributes(where, n.Attributes, check)
		case ephschema.SingleNestedAttribute:
			walkAttributes(where, n.Attributes, check)
		}
	}
}

// TestFactoryFrom checks the provider-data type check of every resource and
// data source.
func TestFactoryFrom(t *testing.T) {
	cases := []struct {
		name    string
		data    any
		wantErr bool
		wantNil bool
	}{
		{name: "not configured yet", data: nil, wantNil: true},
		{name: "factory", data: &clientFactory{}},
		{name: "wrong type", data: "a string", wantErr: true, wantNil: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := factoryFrom(tc.data, "test")
			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want error %v", err, tc.wantErr)
			}
			if (f == nil) != tc.wantNil {
				t.Errorf("factory = %v, want nil %v", f, tc.wantNil)
			}
		})
	}
	var r leaseResource
	var resp resource.ConfigureResponse
	r.Configure(t.Context(), resource.ConfigureRequest{ProviderData: 42}, &resp)
	if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "int") {
		t.Errorf("Configure with the wrong provider data: diagnostics %v, want an error naming the type", resp.Diagnostics)
	}
}
