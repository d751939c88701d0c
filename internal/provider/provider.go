// Package provider implements the s3lock Terraform provider: a lease resource,
// an ephemeral lease and two data sources over the s3lock package. Every S3
// request goes through s3lock; this package only maps Terraform's lifecycle
// onto it.
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ provider.Provider                       = (*s3lockProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*s3lockProvider)(nil)
)

// defaultMaxRetries is how often a failed S3 request is retried by the AWS
// SDK: two retries (three attempts) is the SDK's own default, and keeps an
// unreachable endpoint from stalling a plan for long.
const defaultMaxRetries = 2

// maxRetryBackoff caps the AWS SDK's backoff between two attempts.
const maxRetryBackoff = 5 * time.Second

// s3lockProvider is the provider. Its hooks are nil outside tests.
type s3lockProvider struct {
	version string
	hooks   testHooks
	// leases are the ephemeral leases open in this process.
	leases *leaseRegistry
	// run, when set, holds ephemeral leases for the whole Terraform run
	// (see ephemeral_lease_run.go); nil: one lease per phase.
	run *runguard.Client
}

// testHooks let the acceptance tests observe and steer the provider that
// runs in their process. All fields are optional.
type testHooks struct {
	// now replaces time.Now where the provider decides on time (the
	// renew_before window).
	now func() time.Time
	// onWait is called, in addition to logging, whenever a waiting
	// acquisition finds the lock held.
	onWait func(*s3lock.HeldError)
}

// providerModelV0 is the provider configuration.
type providerModelV0 struct {
	Region                    types.String     `tfsdk:"region"`
	Profile                   types.String     `tfsdk:"profile"`
	AccessKey                 types.String     `tfsdk:"access_key"`
	SecretKey                 types.String     `tfsdk:"secret_key"`
	Token                     types.String     `tfsdk:"token"`
	Endpoints                 *endpointsModel  `tfsdk:"endpoints"`
	UsePathStyle              types.Bool       `tfsdk:"use_path_style"`
	SkipCredentialsValidation types.Bool       `tfsdk:"skip_credentials_validation"`
	AssumeRole                *assumeRoleModel `tfsdk:"assume_role"`
	MaxRetries                types.Int64      `tfsdk:"max_retries"`
	Holder                    types.String     `tfsdk:"holder"`
	ExpectedBucketOwner       types.String     `tfsdk:"expected_bucket_owner"`
}

type endpointsModel struct {
	S3  types.String `tfsdk:"s3"`
	STS types.String `tfsdk:"sts"`
}

type assumeRoleModel struct {
	RoleARN     types.String `tfsdk:"role_arn"`
	SessionName types.String `tfsdk:"session_name"`
	ExternalID  types.String `tfsdk:"external_id"`
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
func NewWithCleanup(version string) (func() provider.Provider, func(context.Context) ([]s3lock.Token, error)) {
	return NewForRun(version, nil)
}

// NewForRun is NewWithCleanup for a provider process that Terraform started:
// with run set, each ephemeral lease is held for the whole Terraform run by
// the run's guard process, across the run's phases and provider processes;
// the cleanup function then has nothing of its own to release.
func NewForRun(version string, run *runguard.Client) (func() provider.Provider, func(context.Context) ([]s3lock.Token, error)) {
	leases := newLeaseRegistry()
	return func() provider.Provider {
		return &s3lockProvider{version: version, leases: leases, run: run}
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
			"endpoints": schema.SingleNestedAttribute{
				MarkdownDescription: "Custom service endpoints, for S3-compatible stores (MinIO, Ceph, versitygw, R2, ...) " +
					"or private endpoints.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"s3": schema.StringAttribute{
						MarkdownDescription: "URL of the S3 API, e.g. `https://minio.example.com:9000`. Defaults to " +
							"`AWS_ENDPOINT_URL_S3` or AWS's own endpoint for the region.",
						Optional:   true,
						Validators: []validator.String{endpointValidator{}},
					},
					"sts": schema.StringAttribute{
						MarkdownDescription: "URL of the STS API, used by `assume_role` and the credential check. " +
							"Defaults to `AWS_ENDPOINT_URL_STS` or AWS's own endpoint.",
						Optional:   true,
						Validators: []validator.String{endpointValidator{}},
					},
				},
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
			"assume_role": schema.SingleNestedAttribute{
				MarkdownDescription: "Assume an IAM role (with STS `AssumeRole`) and use its credentials.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"role_arn": schema.StringAttribute{
						MarkdownDescription: "ARN of the role to assume.",
						Required:            true,
						Validators: []validator.String{
							stringvalidator.RegexMatches(arnPattern, "must be an ARN, e.g. arn:aws:iam::123456789012:role/locks"),
						},
					},
					"session_name": schema.StringAttribute{
						MarkdownDescription: "Session name of the assumed role; shows up in CloudTrail.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.LengthBetween(2, 64)},
					},
					"external_id": schema.StringAttribute{
						MarkdownDescription: "External id the role's trust policy requires, if any.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.LengthBetween(2, 1224)},
					},
				},
			},
			"max_retries": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("How often the AWS SDK retries an S3 or STS request that failed "+
					"in a way that may pass (throttling, 5xx, connection errors). Default %d; keep it low so that "+
					"an unreachable endpoint fails fast. Once a lease resource is waiting for a held lock, it rides "+
					"out such failures until its create timeout; before that they fail the apply at once.", defaultMaxRetries),
				Optional:   true,
				Validators: []validator.Int64{int64validator.Between(0, 25)},
			},
			"holder": schema.StringAttribute{
				MarkdownDescription: "Identity written into the leases this provider takes, shown to everyone who " +
					"finds the lock held. Defaults to `user@host`. It is informational: a lease is proven by a " +
					"random nonce, never by its holder name.",
				Optional:   true,
				Validators: []validator.String{holderValidator{}},
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
}

func (p *s3lockProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, u := range cfg.unknowns() {
		resp.Diagnostics.AddAttributeError(u, "Provider setting not known yet",
			fmt.Sprintf("The s3lock provider cannot be configured while %s is unknown: it must be known when "+
				"Terraform plans. Set it from a variable or a value that does not depend on a resource.", u))
	}
	if resp.Diagnostics.HasError() {
		return
	}

	awsOpts := awsOptions(cfg)
	awsCfg, err := awsclient.LoadConfig(ctx, awsOpts)
	if errors.Is(err, awsclient.ErrNoRegion) {
		resp.Diagnostics.AddAttributeError(path.Root("region"), "No AWS region",
			"The s3lock provider needs a region to sign its requests: set region in the provider block, "+
				"or AWS_REGION in the environment. (With a custom endpoints.s3 it defaults to us-east-1.)")
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Invalid AWS configuration", "The s3lock provider could not load its AWS configuration: "+err.Error())
		return
	}
	if !cfg.SkipCredentialsValidation.ValueBool() {
		if err := validateCredentials(ctx, awsCfg, awsOpts); err != nil {
			resp.Diagnostics.AddError("Invalid AWS credentials",
				"The s3lock provider could not confirm its credentials with STS GetCallerIdentity: "+err.Error()+
					"\n\nFor an S3-compatible store without STS, set skip_credentials_validation = true.")
			return
		}
	}

	api := awsclient.S3Client(awsCfg, awsOpts)

	holder := cfg.Holder.ValueString()
	if holder == "" {
		holder = defaultHolder()
	}
	opts := []s3lock.Option{s3lock.WithHolder(holder)}
	if owner := cfg.ExpectedBucketOwner.ValueString(); owner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(owner))
	}
	f := &clientFactory{api: api, options: opts, holder: holder, hooks: p.hooks, leases: p.leases, run: p.run,
		guardConfig: runguard.ClientConfig{AWS: awsOpts, Holder: holder, ExpectedBucketOwner: cfg.ExpectedBucketOwner.ValueString()}}
	tflog.Debug(ctx, "configured the s3lock provider", map[string]any{
		"region": awsCfg.Region, "endpoint": f.endpoint(cfg), "holder": holder,
	})
	resp.DataSourceData = f
	resp.ResourceData = f
	resp.EphemeralResourceData = f
}

// unknowns lists the settings whose value is not known yet.
func (m providerModelV0) unknowns() []path.Path {
	var out []path.Path
	check := func(p path.Path, unknown bool) {
		if unknown {
			out = append(out, p)
		}
	}
	check(path.Root("region"), m.Region.IsUnknown())
	check(path.Root("profile"), m.Profile.IsUnknown())
	check(path.Root("access_key"), m.AccessKey.IsUnknown())
	check(path.Root("secret_key"), m.SecretKey.IsUnknown())
	check(path.Root("token"), m.Token.IsUnknown())
	check(path.Root("use_path_style"), m.UsePathStyle.IsUnknown())
	check(path.Root("skip_credentials_validation"), m.SkipCredentialsValidation.IsUnknown())
	check(path.Root("max_retries"), m.MaxRetries.IsUnknown())
	check(path.Root("holder"), m.Holder.IsUnknown())
	check(path.Root("expected_bucket_owner"), m.ExpectedBucketOwner.IsUnknown())
	if m.Endpoints != nil {
		check(path.Root("endpoints").AtName("s3"), m.Endpoints.S3.IsUnknown())
		check(path.Root("endpoints").AtName("sts"), m.Endpoints.STS.IsUnknown())
	}
	if m.AssumeRole != nil {
		check(path.Root("assume_role").AtName("role_arn"), m.AssumeRole.RoleARN.IsUnknown())
		check(path.Root("assume_role").AtName("session_name"), m.AssumeRole.SessionName.IsUnknown())
		check(path.Root("assume_role").AtName("external_id"), m.AssumeRole.ExternalID.IsUnknown())
	}
	return out
}

// awsOptions translates the provider block into the options of the AWS
// client shared with the CLI: the standard chain (environment, shared files,
// instance roles), overridden by what the provider block sets.
func awsOptions(cfg providerModelV0) awsclient.Options {
	o := awsclient.Options{
		Region:       cfg.Region.ValueString(),
		Profile:      cfg.Profile.ValueString(),
		AccessKey:    cfg.AccessKey.ValueString(),
		SecretKey:    cfg.SecretKey.ValueString(),
		Token:        cfg.Token.ValueString(),
		UsePathStyle: cfg.UsePathStyle.ValueBool(),
		MaxAttempts:  defaultMaxRetries + 1,
		MaxBackoff:   maxRetryBackoff,
	}
	if !cfg.MaxRetries.IsNull() {
		o.MaxAttempts = int(cfg.MaxRetries.ValueInt64()) + 1
	}
	if cfg.Endpoints != nil {
		o.Endpoint = cfg.Endpoints.S3.ValueString()
		o.STSEndpoint = cfg.Endpoints.STS.ValueString()
	}
	if ar := cfg.AssumeRole; ar != nil {
		o.AssumeRole = &awsclient.AssumeRole{
			RoleARN:     ar.RoleARN.ValueString(),
			SessionName: ar.SessionName.ValueString(),
			ExternalID:  ar.ExternalID.ValueString(),
		}
	}
	return o
}

// validateCredentials asks STS who the credentials belong to.
func validateCredentials(ctx context.Context, awsCfg aws.Config, opts awsclient.Options) error {
	ctx, cancel := context.WithTimeout(ctx, s3lock.DefaultRequestTimeout)
	defer cancel()
	out, err := awsclient.STSClient(awsCfg, opts).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return err
	}
	tflog.Debug(ctx, "AWS credentials validated", map[string]any{"account": aws.ToString(out.Account), "arn": aws.ToString(out.Arn)})
	return nil
}

// defaultHolder is user@host: the identity shown to others when this
// provider holds a lock.
func defaultHolder() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "terraform"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
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

// clientFactory is what the provider hands to its resources and data
// sources: it makes the s3lock client for a bucket. The AWS configuration and
// the S3 client (with its connection pool) are built once, in Configure; an
// s3lock.Client is a small value without per-lock state, so one is made per
// operation, with a logger bound to that operation's context (tflog needs
// it to route the SDK's log lines to Terraform's log).
type clientFactory struct {
	api     s3lock.S3API
	options []s3lock.Option
	holder  string
	hooks   testHooks
	leases  *leaseRegistry // nil: not tracked
	// run holds ephemeral leases for the whole run (nil: per phase), with
	// guardConfig to build the guard's client.
	run         *runguard.Client
	guardConfig runguard.ClientConfig
}

// client returns the s3lock client for bucket. Its error names the bucket.
func (f *clientFactory) client(ctx context.Context, bucket string) (*s3lock.Client, error) {
	opts := append([]s3lock.Option{s3lock.WithLogger(newTFLogger(ctx))}, f.options...)
	return s3lock.New(f.api, bucket, opts...)
}

// now is the provider's clock.
func (f *clientFactory) now() time.Time {
	if f.hooks.now != nil {
		return f.hooks.now()
	}
	return time.Now()
}

func (f *clientFactory) endpoint(cfg providerModelV0) string {
	if cfg.Endpoints != nil && cfg.Endpoints.S3.ValueString() != "" {
		return cfg.Endpoints.S3.ValueString()
	}
	if v := os.Getenv("AWS_ENDPOINT_URL_S3"); v != "" {
		return v
	}
	return "AWS"
}

// factoryFrom checks the provider data handed to a resource or data source.
// It returns nil without a diagnostic while the provider is not configured
// yet (Terraform validates configurations before configuring providers).
func factoryFrom(data any, what string) (*clientFactory, error) {
	if data == nil {
		return nil, nil
	}
	f, ok := data.(*clientFactory)
	if !ok {
		return nil, fmt.Errorf("the %s expected provider data of type *clientFactory but got %T; "+
			"this is a bug in the provider, please report it", what, data)
	}
	return f, nil
}

// errNotConfigured is reported when an operation runs before Configure.
var errNotConfigured = errors.New("the s3lock provider has not been configured; this is a bug in the provider, please report it")

// endpointValidator checks that an endpoint is an http or https URL.
type endpointValidator struct{}

func (endpointValidator) Description(context.Context) string {
	return "must be an http:// or https:// URL with a host and no credentials"
}

func (v endpointValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (endpointValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := awsclient.ValidateEndpoint(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid endpoint", err.Error()+".")
	}
}
