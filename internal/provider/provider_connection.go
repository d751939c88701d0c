package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
)

// The provider's connection settings beyond region and credentials: custom
// endpoints, assumed roles, TLS, proxies, retries and the S3 backend's
// skip_* switches, with the S3 backend's names and meanings. Their rules and
// their effect live in awsclient (shared with the CLI); the schema only
// checks what it can before Configure and says where a setting does not
// apply to a lock service.

// connectionAttributes are the schema of the connection settings.
func connectionAttributes() map[string]schema.Attribute {
	attrs := map[string]schema.Attribute{
		"endpoints":                     endpointsAttribute(),
		"assume_role":                   assumeRoleAttribute(),
		"assume_role_with_web_identity": webIdentityAttribute(),
		"shared_config_files": schema.ListAttribute{
			MarkdownDescription: "Paths of the AWS shared configuration files to read instead of the default " +
				"(`AWS_CONFIG_FILE`, else `~/.aws/config`). A leading `~/` is the home directory, a relative path is " +
				"relative to the directory Terraform runs in; each file must be readable. Same as the S3 backend's " +
				"`shared_config_files`.",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
		},
		"shared_credentials_files": schema.ListAttribute{
			MarkdownDescription: "Paths of the AWS shared credentials files to read instead of the default " +
				"(`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`). A leading `~/` is the home directory, a " +
				"relative path is relative to the directory Terraform runs in; each file must be readable. Same as the " +
				"S3 backend's `shared_credentials_files`.",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
		},
		"sts_region": schema.StringAttribute{
			MarkdownDescription: "AWS region of STS requests (`assume_role`, `assume_role_with_web_identity`, the " +
				"credential check). Defaults to `region`. Same as the S3 backend's `sts_region`.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"retry_mode": schema.StringAttribute{
			MarkdownDescription: "How the AWS SDK retries: `standard` (exponential backoff), or `adaptive` (standard " +
				"plus client-side rate limiting once the store throttles). Defaults to `AWS_RETRY_MODE`, then the shared " +
				"configuration's `retry_mode`, then `standard`. `max_retries` bounds both. Same as the S3 backend's `retry_mode`.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.OneOf(awsclient.RetryModeStandard, awsclient.RetryModeAdaptive)},
		},
		"use_fips_endpoint": schema.BoolAttribute{
			MarkdownDescription: "Use AWS's FIPS endpoints for S3 and STS. `true` excludes `endpoints.s3` and " +
				"`endpoints.sts`, which the AWS SDK does not turn into FIPS variants; `false` turns them off whatever " +
				"`AWS_USE_FIPS_ENDPOINT` says. Default: `AWS_USE_FIPS_ENDPOINT` or the shared configuration's " +
				"`use_fips_endpoint`. Same as the S3 backend's `use_fips_endpoint`.",
			Optional: true,
		},
		"use_dualstack_endpoint": schema.BoolAttribute{
			MarkdownDescription: "Use AWS's dual-stack (IPv4 and IPv6) endpoints for S3 and STS. `true` excludes " +
				"`endpoints.s3` and `endpoints.sts`; `false` turns them off whatever `AWS_USE_DUALSTACK_ENDPOINT` says. " +
				"Default: `AWS_USE_DUALSTACK_ENDPOINT` or the shared configuration's `use_dualstack_endpoint`. Same as " +
				"the S3 backend's `use_dualstack_endpoint`.",
			Optional: true,
		},
		"skip_region_validation": schema.BoolAttribute{
			MarkdownDescription: "Accept a `region` that does not look like an AWS region name (`us-east-1`, " +
				"`eu-central-2`, ...). The check only applies without a custom S3 endpoint: S3-compatible stores name " +
				"their regions as they like. Default `false`. Same as the S3 backend's `skip_region_validation`.",
			Optional: true,
		},
		"skip_requesting_account_id": schema.BoolAttribute{
			MarkdownDescription: "Accepted so that an S3 backend block can be copied, and has no effect: the " +
				"provider never requests the AWS account id (the backend needs it for `allowed_account_ids`, which a lock " +
				"service has no use for). Same name as the S3 backend's `skip_requesting_account_id`.",
			Optional: true,
		},
		"skip_metadata_api_check": schema.BoolAttribute{
			MarkdownDescription: "Never ask the EC2 instance metadata service (IMDS) for credentials, so that a " +
				"machine without it does not wait for it; `false` does ask it, whatever `AWS_EC2_METADATA_DISABLED` " +
				"says. Default: the AWS SDK's (`AWS_EC2_METADATA_DISABLED`). Same as the S3 backend's " +
				"`skip_metadata_api_check`.",
			Optional: true,
		},
		"skip_s3_checksum": schema.BoolAttribute{
			MarkdownDescription: "Send none of the AWS SDK's flexible checksum headers (`x-amz-checksum-*`, " +
				"`x-amz-sdk-checksum-algorithm`) and check no checksum in responses: for S3-compatible stores (Hetzner, " +
				"older Ceph and MinIO, ...) that reject them. `DeleteObjects` (the cleanup of old epochs), whose " +
				"checksum S3 requires, then sends `Content-MD5` instead, as the AWS SDKs did before 2025. Default " +
				"`false`. Same as the S3 backend's `skip_s3_checksum`.",
			Optional: true,
		},
	}
	for name, attr := range transportAttributes() {
		attrs[name] = attr
	}
	return attrs
}

// transportAttributes are the schema of the TLS and proxy settings.
func transportAttributes() map[string]schema.Attribute {
	loopback := "Once any of `http_proxy`, `https_proxy` or `no_proxy` is set, the proxies also carry requests to " +
		"`localhost` and loopback addresses (with the environment alone, Go never proxies those, nor does the S3 " +
		"backend): list them in `no_proxy` to reach them directly."
	proxy := func(scheme, name, env, meaning string) schema.StringAttribute {
		return schema.StringAttribute{
			MarkdownDescription: "URL of the proxy for " + scheme + " requests (S3 and STS), e.g. " +
				"`http://proxy.example.com:3128`. Defaults to `" + env + "` (or its lower-case form); `\"\"` is no " +
				"proxy, whatever `" + env + "` says. " + meaning + loopback + " Same as the S3 backend's `" + name + "`.",
			Optional: true,
			Validators: []validator.String{ruleValidator{description: "must be empty or an http, https or socks5 URL with a host",
				rule: awsclient.ValidateProxy, report: reportAWSSetting}},
		}
	}
	return map[string]schema.Attribute{
		"custom_ca_bundle": schema.StringAttribute{
			MarkdownDescription: "PEM file of the CA certificates that the endpoints' TLS certificates must chain to, " +
				"instead of the system's: for a store with a self-signed or private-CA certificate. Defaults to " +
				"`AWS_CA_BUNDLE`. A leading `~/` is the home directory, a relative path is relative to the directory " +
				"Terraform runs in. Excludes `insecure`. Same as the S3 backend's `custom_ca_bundle`.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"insecure": schema.BoolAttribute{
			MarkdownDescription: "Accept any TLS certificate, unverified. Only for tests: anyone on the path can then " +
				"read and change the lock requests. Excludes `custom_ca_bundle`. Default `false`. Same as the S3 " +
				"backend's `insecure`.",
			Optional: true,
		},
		"http_proxy": proxy("http://", "http_proxy", "HTTP_PROXY", "As for the S3 backend, it also carries https:// "+
			"requests unless `https_proxy` or `HTTPS_PROXY` is set: set `https_proxy = \"\"` to send those directly. "),
		"https_proxy": proxy("https://", "https_proxy", "HTTPS_PROXY", "Not set, and without `HTTPS_PROXY`, it is "+
			"`http_proxy` when that is set. "),
		"no_proxy": schema.StringAttribute{
			MarkdownDescription: "Hosts reached without a proxy, comma-separated: domain names (with their " +
				"subdomains; a leading `.` for subdomains only), IP addresses, CIDR ranges, each with an optional " +
				"`:port`, or `*` for all. Defaults to `NO_PROXY` (or `no_proxy`), whose entries of other syntaxes " +
				"(`172.16.*`, `[fd00::]/8`) are ignored, as Go ignores them. Same as the S3 backend's `no_proxy`.",
			Optional: true,
			Validators: []validator.String{ruleValidator{description: "must be a comma-separated list of hosts",
				rule: awsclient.ValidateNoProxy, report: reportAWSSetting}},
		},
	}
}

func endpointsAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		MarkdownDescription: "Custom service endpoints, for S3-compatible stores (MinIO, Ceph, versitygw, R2, ...) " +
			"or private endpoints. Same as the S3 backend's `endpoints`.",
		Optional: true,
		Attributes: map[string]schema.Attribute{
			"s3": schema.StringAttribute{
				MarkdownDescription: "URL of the S3 API, e.g. `https://minio.example.com:9000`. Defaults to " +
					"`AWS_ENDPOINT_URL_S3` or AWS's own endpoint for the region.",
				Optional:   true,
				Validators: []validator.String{endpointValidator()},
			},
			"sts": schema.StringAttribute{
				MarkdownDescription: "URL of the STS API, used by `assume_role`, `assume_role_with_web_identity` and " +
					"the credential check. Defaults to `AWS_ENDPOINT_URL_STS` or AWS's own endpoint.",
				Optional:   true,
				Validators: []validator.String{endpointValidator()},
			},
			"sso": schema.StringAttribute{
				MarkdownDescription: "URL of the IAM Identity Center (SSO) portal API, which SSO profiles get their " +
					"credentials from. Defaults to `AWS_ENDPOINT_URL_SSO` or AWS's own endpoint.",
				Optional:   true,
				Validators: []validator.String{endpointValidator()},
			},
			"iam": schema.StringAttribute{
				MarkdownDescription: "URL of the IAM API. Accepted so that an S3 backend block can be copied, and " +
					"checked, but unused: a lock service makes no IAM request.",
				Optional:   true,
				Validators: []validator.String{endpointValidator()},
			},
		},
	}
}

// Validators shared by the two role blocks.
var (
	arnValidator = ruleValidator{description: "must be an ARN, e.g. arn:aws:iam::123456789012:role/locks",
		rule: awsclient.ValidateARN, report: reportAWSSetting}
	policyValidator = ruleValidator{description: "must be an IAM policy document (a JSON object)",
		rule: awsclient.ValidatePolicy, report: reportAWSSetting}
	roleDurationValidator = durationValidator{min: awsclient.MinRoleDuration, max: awsclient.MaxRoleDuration}
	roleNameValidator     = ruleValidator{description: "must be 2 to 64 letters, digits or +=,.@-",
		rule: awsclient.ValidateSessionName, report: reportAWSSetting}
)

// roleSessionAttributes are what assume_role and
// assume_role_with_web_identity share.
func roleSessionAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"duration": schema.StringAttribute{
			MarkdownDescription: "How long the role's credentials are valid, e.g. `1h30m`, between `15m` and `12h` " +
				"(the role's maximum session duration may be shorter). They are renewed before they expire. Default: " +
				"STS's, one hour.",
			Optional:   true,
			Validators: []validator.String{roleDurationValidator},
		},
		"policy": schema.StringAttribute{
			MarkdownDescription: "IAM policy (JSON) that further restricts the role's permissions for this session.",
			Optional:            true,
			Validators:          []validator.String{policyValidator},
		},
		"policy_arns": schema.SetAttribute{
			MarkdownDescription: "ARNs of managed IAM policies that further restrict the role's permissions for this " +
				"session (at most 10).",
			ElementType: types.StringType,
			Optional:    true,
			Validators: []validator.Set{setvalidator.SizeAtMost(awsclient.MaxPolicyARNs),
				setvalidator.ValueStringsAre(arnValidator)},
		},
		"session_name": schema.StringAttribute{
			MarkdownDescription: "Session name of the assumed role; shows up in CloudTrail. Default `" +
				awsclient.DefaultSessionName + "`.",
			Optional:   true,
			Validators: []validator.String{roleNameValidator},
		},
	}
}

func assumeRoleAttribute() schema.SingleNestedAttribute {
	attrs := roleSessionAttributes()
	attrs["role_arn"] = schema.StringAttribute{
		MarkdownDescription: "ARN of the role to assume.",
		Required:            true,
		Validators:          []validator.String{arnValidator},
	}
	attrs["external_id"] = schema.StringAttribute{
		MarkdownDescription: "External id the role's trust policy requires, if any.",
		Optional:            true,
		Validators:          []validator.String{stringvalidator.LengthBetween(2, 1224)},
	}
	attrs["source_identity"] = schema.StringAttribute{
		MarkdownDescription: "Source identity of the session, which the role's later sessions keep.",
		Optional:            true,
		Validators:          []validator.String{roleNameValidator},
	}
	attrs["tags"] = schema.MapAttribute{
		MarkdownDescription: "Session tags (at most 50).",
		ElementType:         types.StringType,
		Optional:            true,
		Validators: []validator.Map{mapvalidator.SizeAtMost(awsclient.MaxSessionTags),
			mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 128)),
			mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(256))},
	}
	attrs["transitive_tag_keys"] = schema.SetAttribute{
		MarkdownDescription: "Keys of `tags` that pass on to the sessions of roles assumed from this one.",
		ElementType:         types.StringType,
		Optional:            true,
		Validators:          []validator.Set{setvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("tags"))},
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "Assume an IAM role with STS `AssumeRole` and use its credentials. With " +
			"`assume_role_with_web_identity` too, the web identity's role is assumed first and this one with its " +
			"credentials. Same as the S3 backend's `assume_role`.",
		Optional:   true,
		Attributes: attrs,
	}
}

func webIdentityAttribute() schema.SingleNestedAttribute {
	attrs := roleSessionAttributes()
	sibling := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
	attrs["role_arn"] = schema.StringAttribute{
		MarkdownDescription: "ARN of the role to assume. Defaults to `" + awsclient.EnvRoleARN + "`; one of the two is required.",
		Optional:            true,
		Validators:          []validator.String{arnValidator},
	}
	attrs["session_name"] = schema.StringAttribute{
		MarkdownDescription: "Session name of the assumed role; shows up in CloudTrail. Defaults to `" +
			awsclient.EnvRoleSessionName + "`, then `" + awsclient.DefaultSessionName + "`.",
		Optional:   true,
		Validators: []validator.String{roleNameValidator},
	}
	attrs["web_identity_token"] = schema.StringAttribute{
		MarkdownDescription: "The OpenID Connect (OIDC) or OAuth token itself. Excludes `web_identity_token_file`, " +
			"the better choice where the token rotates.",
		Optional:   true,
		Sensitive:  true,
		Validators: []validator.String{stringvalidator.LengthAtLeast(1), stringvalidator.ConflictsWith(sibling("web_identity_token_file"))},
	}
	attrs["web_identity_token_file"] = schema.StringAttribute{
		MarkdownDescription: "File with the OIDC or OAuth token, read again whenever the credentials are renewed " +
			"(CI runners and Kubernetes rotate it); a relative path is relative to the directory Terraform runs in. " +
			"Defaults to `" + awsclient.EnvWebIdentityTokenFile + "` when `web_identity_token` is not set either.",
		Optional:   true,
		Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "Assume an IAM role with STS `AssumeRoleWithWebIdentity`, with an OIDC token from CI " +
			"(GitHub Actions, GitLab, ...) or Kubernetes, instead of static keys. Same as the S3 backend's " +
			"`assume_role_with_web_identity`.",
		Optional:   true,
		Attributes: attrs,
	}
}

// reportAWSSetting reports a value that an awsclient rule refused.
func reportAWSSetting(p path.Path, _ string, err error) diag.Diagnostic {
	return invalidSetting(p, err)
}
