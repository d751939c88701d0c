// Package provider implements the s3lock Terraform provider: a lease resource
// (with a resource identity and a list resource for `terraform query`), an
// ephemeral lease, two data sources and two actions over the s3lock package.
// Every S3 request goes through s3lock, and so does every rule about leases
// (when one is lost, when to wait, what a valid name or prefix is); this
// package only maps Terraform's lifecycle onto it.
//
// Where things are: provider.go is the provider and its schema,
// provider_config.go its configuration model, provider_connection.go and
// provider_objects.go the schema of its AWS and object settings,
// client_factory.go the one place that builds an s3lock client,
// diagnostics.go every diagnostic (one wording per situation),
// validators.go the attribute validators, timing.go
// the provider's numbers, resource_lease*.go, ephemeral_lease*.go,
// data_source_*.go, list_*.go and action_*.go one file per object,
// lease_common.go what they share.
package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/statestore"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ provider.Provider                       = (*s3lockProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*s3lockProvider)(nil)
	_ provider.ProviderWithListResources      = (*s3lockProvider)(nil)
	_ provider.ProviderWithActions            = (*s3lockProvider)(nil)
	_ provider.ProviderWithStateStores        = (*s3lockProvider)(nil)
)

// s3lockProvider is the provider. Its hooks are nil outside tests.
type s3lockProvider struct {
	version string
	hooks   testHooks
	// leases are the ephemeral leases open in this process.
	leases *leaseRegistry
	// run, when set, holds ephemeral leases for the whole Terraform run
	// (see ephemeral_lease_run.go); when nil, noRun says why not, and
	// only leases with scope = "phase" can be had. claims orders this
	// process's claims of the run's leases.
	run    *runguard.Client
	noRun  error
	claims *runClaims
}

// New returns a constructor of the provider for providerserver.
func New(version string) func() provider.Provider {
	p, _ := NewWithCleanup(version)
	return p
}

// NewWithCleanup returns a constructor of the provider for providerserver,
// and a function to call once the provider server has stopped (Terraform
// stops it at the end of each command). The function releases the ephemeral
// leases that Terraform opened in this process but did not close, which
// happens when a run fails or is interrupted; it returns the leases it
// released. Without it such a lease lapses after its lease_duration.
//
// Such a provider is not started by Terraform, so it cannot hold an
// ephemeral lease for a whole run: leases that ask for one fail
// (runguard.ErrNotTerraform), those with scope = "phase" work.
func NewWithCleanup(version string) (func() provider.Provider, func(context.Context) ([]s3lock.Token, error)) {
	return NewForRun(version, nil, fmt.Errorf("%w: it is served in-process (a test harness)", runguard.ErrNotTerraform))
}

// NewForRun is NewWithCleanup for a provider process that Terraform started:
// with run set, each ephemeral lease is held for the whole Terraform run by
// the run's guard process, across the run's phases and provider processes;
// the cleanup function then has nothing of its own to release. With run
// nil, noRun says why the run has no guard: ephemeral leases that ask for
// the whole run fail with it.
func NewForRun(version string, run *runguard.Client, noRun error) (func() provider.Provider, func(context.Context) ([]s3lock.Token, error)) {
	if run == nil && noRun == nil {
		noRun = errors.New("runguard: no run guard was set up for this provider process")
	}
	leases, claims := newLeaseRegistry(), newRunClaims()
	return func() provider.Provider {
		return &s3lockProvider{version: version, leases: leases, run: run, noRun: noRun, claims: claims}
	}, leases.releaseAll
}

func (p *s3lockProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "s3lock"
	resp.Version = p.version
}

func (p *s3lockProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The s3lock provider takes, holds and releases locks kept in an S3 bucket " +
			"(epoch objects written with S3 conditional writes), and reads who holds them. " +
			"The connection settings use the same names as Terraform's S3 backend, so a backend " +
			"block can be copied. Credentials also come from the standard AWS environment " +
			"variables, shared configuration files and instance roles.",
		Attributes: map[string]schema.Attribute{
			"region": schema.StringAttribute{
				MarkdownDescription: "AWS region of the buckets. Defaults to `AWS_REGION`, `AWS_DEFAULT_REGION` " +
					"or the shared configuration's region; with a custom `endpoints.s3` and none of those, `us-east-1` " +
					"(what S3-compatible stores usually expect).",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"profile": schema.StringAttribute{
				MarkdownDescription: "Name of the AWS shared configuration profile to use (default `AWS_PROFILE`, then `default`).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"access_key": schema.StringAttribute{
				MarkdownDescription: "AWS access key id. Requires `secret_key`. Defaults to the standard AWS credential chain.",
				Optional:            true,
				Validators: []validator.String{
					stringvalidator.LengthAtLeast(1),
					stringvalidator.AlsoRequires(path.MatchRoot("secret_key")),
				},
			},
			"secret_key": schema.StringAttribute{
				MarkdownDescription: "AWS secret access key. Requires `access_key`.",
				Optional:            true,
				Sensitive:           true,
				Validators: []validator.String{
					stringvalidator.LengthAtLeast(1),
					stringvalidator.AlsoRequires(path.MatchRoot("access_key")),
				},
			},
			"token": schema.StringAttribute{
				MarkdownDescription: "AWS session token, for temporary credentials given in `access_key` and `secret_key`.",
				Optional:            true,
				Sensitive:           true,
				Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("access_key"))},
			},
			"use_path_style": schema.BoolAttribute{
				MarkdownDescription: "Address buckets as `https://endpoint/bucket` rather than `https://bucket.endpoint`. " +
					"Most S3-compatible stores need this. Default `false`.",
				Optional: true,
			},
			"skip_credentials_validation": schema.BoolAttribute{
				MarkdownDescription: "Skip checking the credentials with STS `GetCallerIdentity` when the provider is " +
					"configured. Set it for S3-compatible stores that have no STS. Default `false`.",
				Optional: true,
			},
			"max_retries": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("How often the AWS SDK retries an S3 or STS request that failed "+
					"in a way that may pass (throttling, 5xx, connection errors). Default %d; keep it low so that "+
					"an unreachable endpoint fails fast. Once a lease resource is waiting for a held lock, it rides "+
					"out such failures until its create timeout; before that they fail the apply at once.", defaultMaxRetries),
				Optional:   true,
				Validators: []validator.Int64{int64validator.Between(0, maxMaxRetries)},
			},
			"holder": schema.StringAttribute{
				MarkdownDescription: "Identity written into the leases this provider takes, shown to everyone who " +
					"finds the lock held. Defaults to s3lock's own default identity, `user@host:pid` plus a random " +
					"suffix (one per provider process). It is informational: a lease is proven by a random nonce, " +
					"never by its holder name.",
				Optional:   true,
				Validators: []validator.String{holderValidator()},
			},
			"expected_bucket_owner": schema.StringAttribute{
				MarkdownDescription: "AWS account id (12 digits) that must own the buckets: every request fails " +
					"if a bucket belongs to another account.",
				Optional: true,
				Validators: []validator.String{
					stringvalidator.RegexMatches(accountIDPattern, "must be a 12-digit AWS account id"),
				},
			},
		},
	}
	for name, attr := range objectAttributes() {
		resp.Schema.Attributes[name] = attr
	}
	for name, attr := range connectionAttributes() {
		resp.Schema.Attributes[name] = attr
	}
}

func (p *s3lockProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, u := range cfg.unknowns() {
		resp.Diagnostics.Append(settingUnknown(u))
	}
	if resp.Diagnostics.HasError() {
		return
	}
	f, d := newClientFactory(ctx, cfg, p)
	if d != nil {
		resp.Diagnostics.Append(d)
		return
	}
	resp.DataSourceData = f
	resp.ResourceData = f
	resp.EphemeralResourceData = f
	resp.ListResourceData = f
	resp.ActionData = f
	resp.StateStoreData = f
}

// StateStores are for state_store blocks (Terraform's pluggable state
// storage, experimental in Terraform 1.15 and 1.16).
func (p *s3lockProvider) StateStores(context.Context) []func() statestore.StateStore {
	return []func() statestore.StateStore{NewStateStore}
}

func (p *s3lockProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewLeaseResource}
}

func (p *s3lockProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{NewLeaseEphemeralResource}
}

func (p *s3lockProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewLeaseDataSource, NewLeasesDataSource}
}

// ListResources are for `terraform query` (Terraform 1.14 and later).
func (p *s3lockProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewLeaseListResource}
}

// Actions are for action blocks and `terraform apply -invoke` (Terraform
// 1.14 and later).
func (p *s3lockProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewForceReleaseAction, NewVerifyAction}
}
