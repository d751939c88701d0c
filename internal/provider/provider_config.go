package provider

import (
	"os"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
)

// The provider block: its model, the settings not known yet, and the AWS
// client options it sets.

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
	Encrypt                   types.Bool       `tfsdk:"encrypt"`
	KMSKeyID                  types.String     `tfsdk:"kms_key_id"`
	SSECustomerKey            types.String     `tfsdk:"sse_customer_key"`
	ACL                       types.String     `tfsdk:"acl"`
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
	check(path.Root("encrypt"), m.Encrypt.IsUnknown())
	check(path.Root("kms_key_id"), m.KMSKeyID.IsUnknown())
	check(path.Root("sse_customer_key"), m.SSECustomerKey.IsUnknown())
	check(path.Root("acl"), m.ACL.IsUnknown())
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
