package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
)

// The provider block: its model, the settings not known yet, and the AWS
// client options it sets.

// providerModelV0 is the provider configuration.
type providerModelV0 struct {
	Region                    types.String      `tfsdk:"region"`
	Profile                   types.String      `tfsdk:"profile"`
	SharedConfigFiles         types.List        `tfsdk:"shared_config_files"`
	SharedCredentialsFiles    types.List        `tfsdk:"shared_credentials_files"`
	AccessKey                 types.String      `tfsdk:"access_key"`
	SecretKey                 types.String      `tfsdk:"secret_key"`
	Token                     types.String      `tfsdk:"token"`
	Endpoints                 *endpointsModel   `tfsdk:"endpoints"`
	UsePathStyle              types.Bool        `tfsdk:"use_path_style"`
	SkipCredentialsValidation types.Bool        `tfsdk:"skip_credentials_validation"`
	AssumeRole                *assumeRoleModel  `tfsdk:"assume_role"`
	AssumeRoleWithWebIdentity *webIdentityModel `tfsdk:"assume_role_with_web_identity"`
	STSRegion                 types.String      `tfsdk:"sts_region"`
	UseFIPSEndpoint           types.Bool        `tfsdk:"use_fips_endpoint"`
	UseDualStackEndpoint      types.Bool        `tfsdk:"use_dualstack_endpoint"`
	SkipRegionValidation      types.Bool        `tfsdk:"skip_region_validation"`
	SkipRequestingAccountID   types.Bool        `tfsdk:"skip_requesting_account_id"`
	SkipMetadataAPICheck      types.Bool        `tfsdk:"skip_metadata_api_check"`
	SkipS3Checksum            types.Bool        `tfsdk:"skip_s3_checksum"`
	CustomCABundle            types.String      `tfsdk:"custom_ca_bundle"`
	Insecure                  types.Bool        `tfsdk:"insecure"`
	HTTPProxy                 types.String      `tfsdk:"http_proxy"`
	HTTPSProxy                types.String      `tfsdk:"https_proxy"`
	NoProxy                   types.String      `tfsdk:"no_proxy"`
	RetryMode                 types.String      `tfsdk:"retry_mode"`
	MaxRetries                types.Int64       `tfsdk:"max_retries"`
	Holder                    types.String      `tfsdk:"holder"`
	ExpectedBucketOwner       types.String      `tfsdk:"expected_bucket_owner"`
	Encrypt                   types.Bool        `tfsdk:"encrypt"`
	KMSKeyID                  types.String      `tfsdk:"kms_key_id"`
	SSECustomerKey            types.String      `tfsdk:"sse_customer_key"`
	ACL                       types.String      `tfsdk:"acl"`
}

type endpointsModel struct {
	S3  types.String `tfsdk:"s3"`
	STS types.String `tfsdk:"sts"`
	SSO types.String `tfsdk:"sso"`
	IAM types.String `tfsdk:"iam"`
}

type assumeRoleModel struct {
	RoleARN           types.String `tfsdk:"role_arn"`
	SessionName       types.String `tfsdk:"session_name"`
	ExternalID        types.String `tfsdk:"external_id"`
	Duration          types.String `tfsdk:"duration"`
	Policy            types.String `tfsdk:"policy"`
	PolicyARNs        types.Set    `tfsdk:"policy_arns"`
	Tags              types.Map    `tfsdk:"tags"`
	TransitiveTagKeys types.Set    `tfsdk:"transitive_tag_keys"`
	SourceIdentity    types.String `tfsdk:"source_identity"`
}

type webIdentityModel struct {
	RoleARN              types.String `tfsdk:"role_arn"`
	WebIdentityToken     types.String `tfsdk:"web_identity_token"`
	WebIdentityTokenFile types.String `tfsdk:"web_identity_token_file"`
	SessionName          types.String `tfsdk:"session_name"`
	Duration             types.String `tfsdk:"duration"`
	Policy               types.String `tfsdk:"policy"`
	PolicyARNs           types.Set    `tfsdk:"policy_arns"`
}

// setting is one value of the provider block and where it is.
type setting struct {
	path  path.Path
	value attr.Value
}

// settings lists every value of the provider block.
func (m providerModelV0) settings() []setting {
	root := func(name string, v attr.Value) setting { return setting{path.Root(name), v} }
	out := []setting{
		root("region", m.Region), root("profile", m.Profile),
		root("shared_config_files", m.SharedConfigFiles), root("shared_credentials_files", m.SharedCredentialsFiles),
		root("access_key", m.AccessKey), root("secret_key", m.SecretKey), root("token", m.Token),
		root("use_path_style", m.UsePathStyle), root("skip_credentials_validation", m.SkipCredentialsValidation),
		root("sts_region", m.STSRegion), root("use_fips_endpoint", m.UseFIPSEndpoint),
		root("use_dualstack_endpoint", m.UseDualStackEndpoint), root("skip_region_validation", m.SkipRegionValidation),
		root("skip_requesting_account_id", m.SkipRequestingAccountID),
		root("skip_metadata_api_check", m.SkipMetadataAPICheck), root("skip_s3_checksum", m.SkipS3Checksum),
		root("custom_ca_bundle", m.CustomCABundle), root("insecure", m.Insecure),
		root("http_proxy", m.HTTPProxy), root("https_proxy", m.HTTPSProxy), root("no_proxy", m.NoProxy),
		root("retry_mode", m.RetryMode), root("max_retries", m.MaxRetries),
		root("holder", m.Holder), root("expected_bucket_owner", m.ExpectedBucketOwner),
		root("encrypt", m.Encrypt), root("kms_key_id", m.KMSKeyID), root("sse_customer_key", m.SSECustomerKey),
		root("acl", m.ACL),
	}
	if e := m.Endpoints; e != nil {
		at := func(name string, v attr.Value) setting { return setting{path.Root("endpoints").AtName(name), v} }
		out = append(out, at("s3", e.S3), at("sts", e.STS), at("sso", e.SSO), at("iam", e.IAM))
	}
	if ar := m.AssumeRole; ar != nil {
		at := func(name string, v attr.Value) setting { return setting{path.Root("assume_role").AtName(name), v} }
		out = append(out, at("role_arn", ar.RoleARN), at("session_name", ar.SessionName),
			at("external_id", ar.ExternalID), at("duration", ar.Duration), at("policy", ar.Policy),
			at("policy_arns", ar.PolicyARNs), at("tags", ar.Tags), at("transitive_tag_keys", ar.TransitiveTagKeys),
			at("source_identity", ar.SourceIdentity))
	}
	if w := m.AssumeRoleWithWebIdentity; w != nil {
		at := func(name string, v attr.Value) setting {
			return setting{path.Root("assume_role_with_web_identity").AtName(name), v}
		}
		out = append(out, at("role_arn", w.RoleARN), at("web_identity_token", w.WebIdentityToken),
			at("web_identity_token_file", w.WebIdentityTokenFile), at("session_name", w.SessionName),
			at("duration", w.Duration), at("policy", w.Policy), at("policy_arns", w.PolicyARNs))
	}
	return out
}

// unknowns lists the settings whose value, or one of whose elements, is
// not known yet.
func (m providerModelV0) unknowns() []path.Path {
	var out []path.Path
	for _, s := range m.settings() {
		if isUnknown(s.value) {
			out = append(out, s.path)
		}
	}
	return out
}

// isUnknown reports whether v, or an element of a collection v, is unknown.
func isUnknown(v attr.Value) bool {
	if v.IsUnknown() {
		return true
	}
	var elems []attr.Value
	switch c := v.(type) {
	case types.List:
		elems = c.Elements()
	case types.Set:
		elems = c.Elements()
	case types.Map:
		for _, e := range c.Elements() {
			elems = append(elems, e)
		}
	}
	for _, e := range elems {
		if e.IsUnknown() {
			return true
		}
	}
	return false
}

// awsOptions translates the provider block into the options of the AWS
// client shared with the CLI: the standard chain (environment, shared files,
// instance roles), overridden by what the provider block sets, false and ""
// included where the S3 backend lets them override the environment. The
// options are resolved (awsclient.Options.Resolved): they go to the run
// guard, which runs in another directory. The validators have checked the
// values; an error here names a value that reached Configure without them,
// or a path that cannot be resolved.
func awsOptions(ctx context.Context, cfg providerModelV0) (awsclient.Options, error) {
	o := awsclient.Options{
		Region:               cfg.Region.ValueString(),
		Profile:              cfg.Profile.ValueString(),
		AccessKey:            cfg.AccessKey.ValueString(),
		SecretKey:            cfg.SecretKey.ValueString(),
		Token:                cfg.Token.ValueString(),
		UsePathStyle:         cfg.UsePathStyle.ValueBool(),
		STSRegion:            cfg.STSRegion.ValueString(),
		UseFIPSEndpoint:      cfg.UseFIPSEndpoint.ValueBoolPointer(),
		UseDualStackEndpoint: cfg.UseDualStackEndpoint.ValueBoolPointer(),
		SkipRegionValidation: cfg.SkipRegionValidation.ValueBool(),
		SkipMetadataAPICheck: cfg.SkipMetadataAPICheck.ValueBoolPointer(),
		SkipS3Checksum:       cfg.SkipS3Checksum.ValueBool(),
		CustomCABundle:       cfg.CustomCABundle.ValueString(),
		Insecure:             cfg.Insecure.ValueBool(),
		HTTPProxy:            cfg.HTTPProxy.ValueStringPointer(),
		HTTPSProxy:           cfg.HTTPSProxy.ValueStringPointer(),
		NoProxy:              cfg.NoProxy.ValueString(),
		RetryMode:            cfg.RetryMode.ValueString(),
		MaxAttempts:          defaultMaxRetries + 1,
		MaxBackoff:           maxRetryBackoff,
	}
	if !cfg.MaxRetries.IsNull() {
		o.MaxAttempts = int(cfg.MaxRetries.ValueInt64()) + 1
	}
	var err error
	if o.SharedConfigFiles, err = stringsOf(ctx, "shared_config_files", cfg.SharedConfigFiles); err != nil {
		return o, err
	}
	if o.SharedCredentialsFiles, err = stringsOf(ctx, "shared_credentials_files", cfg.SharedCredentialsFiles); err != nil {
		return o, err
	}
	if e := cfg.Endpoints; e != nil {
		o.Endpoint, o.STSEndpoint, o.SSOEndpoint = e.S3.ValueString(), e.STS.ValueString(), e.SSO.ValueString()
	}
	if ar := cfg.AssumeRole; ar != nil {
		if o.AssumeRole, err = ar.options(ctx); err != nil {
			return o, err
		}
	}
	if w := cfg.AssumeRoleWithWebIdentity; w != nil {
		if o.AssumeRoleWithWebIdentity, err = w.options(ctx); err != nil {
			return o, err
		}
	}
	return o.Resolved()
}

func (ar assumeRoleModel) options(ctx context.Context) (*awsclient.AssumeRole, error) {
	o := &awsclient.AssumeRole{
		RoleARN:        ar.RoleARN.ValueString(),
		SessionName:    ar.SessionName.ValueString(),
		ExternalID:     ar.ExternalID.ValueString(),
		Policy:         ar.Policy.ValueString(),
		SourceIdentity: ar.SourceIdentity.ValueString(),
	}
	var err error
	if o.Duration, err = parseDuration("assume_role.duration", ar.Duration, 0); err != nil {
		return nil, err
	}
	if o.PolicyARNs, err = stringsOf(ctx, "assume_role.policy_arns", ar.PolicyARNs); err != nil {
		return nil, err
	}
	if o.TransitiveTagKeys, err = stringsOf(ctx, "assume_role.transitive_tag_keys", ar.TransitiveTagKeys); err != nil {
		return nil, err
	}
	if !ar.Tags.IsNull() {
		if d := ar.Tags.ElementsAs(ctx, &o.Tags, false); d.HasError() {
			return nil, diagError("assume_role.tags", d)
		}
	}
	return o, nil
}

func (w webIdentityModel) options(ctx context.Context) (*awsclient.WebIdentity, error) {
	o := &awsclient.WebIdentity{
		RoleARN:              w.RoleARN.ValueString(),
		WebIdentityToken:     w.WebIdentityToken.ValueString(),
		WebIdentityTokenFile: w.WebIdentityTokenFile.ValueString(),
		SessionName:          w.SessionName.ValueString(),
		Policy:               w.Policy.ValueString(),
	}
	var err error
	if o.Duration, err = parseDuration("assume_role_with_web_identity.duration", w.Duration, 0); err != nil {
		return nil, err
	}
	if o.PolicyARNs, err = stringsOf(ctx, "assume_role_with_web_identity.policy_arns", w.PolicyARNs); err != nil {
		return nil, err
	}
	return o, nil
}

// stringCollection is a list or a set of strings.
type stringCollection interface {
	IsNull() bool
	ElementsAs(context.Context, any, bool) diag.Diagnostics
}

// stringsOf returns the strings of a list or set (nil when null).
func stringsOf(ctx context.Context, attr string, v stringCollection) ([]string, error) {
	if v.IsNull() {
		return nil, nil
	}
	var out []string
	if d := v.ElementsAs(ctx, &out, false); d.HasError() {
		return nil, diagError(attr, d)
	}
	return out, nil
}

// diagError is the first error of d as an error about attr.
func diagError(attr string, d diag.Diagnostics) error {
	e := d.Errors()[0]
	return fmt.Errorf("%s: %s: %s", attr, e.Summary(), e.Detail())
}

// endpointName names the S3 endpoint for the log.
func endpointName(cfg providerModelV0) string {
	if cfg.Endpoints != nil && cfg.Endpoints.S3.ValueString() != "" {
		return cfg.Endpoints.S3.ValueString()
	}
	if v := os.Getenv("AWS_ENDPOINT_URL_S3"); v != "" {
		return v
	}
	return "AWS"
}
