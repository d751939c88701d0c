package provider

import (
	"os"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
)

// The provider settings for the objects s3lock writes: encryption and a
// canned ACL, with the names and meanings of Terraform's S3 backend. Their
// rules live in awsclient (shared with the CLI) and the SDK.

// envSSECustomerKey is where the S3 backend, and so the provider, also reads
// the SSE-C key: better than the configuration, which may be committed.
const envSSECustomerKey = "AWS_SSE_CUSTOMER_KEY"

// objectAttributes are the schema of the object settings.
func objectAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"encrypt": schema.BoolAttribute{
			MarkdownDescription: "Encrypt the lock objects at rest with server-side encryption: SSE-S3 (`AES256`), " +
				"or SSE-KMS when `kms_key_id` is set. Buckets whose policy denies unencrypted `PutObject` need it. " +
				"Excludes `sse_customer_key`. Default `false`. Same as the S3 backend's `encrypt`.",
			Optional: true,
		},
		"kms_key_id": schema.StringAttribute{
			MarkdownDescription: "KMS key (ID, ARN or alias) for SSE-KMS; needs `encrypt = true`. The credentials then " +
				"need `kms:GenerateDataKey` and `kms:Decrypt` on the key. Same as the S3 backend's `kms_key_id`.",
			Optional: true,
			Validators: []validator.String{
				stringvalidator.LengthAtLeast(1),
				stringvalidator.ConflictsWith(path.MatchRoot("sse_customer_key")),
			},
		},
		"sse_customer_key": schema.StringAttribute{
			MarkdownDescription: "Customer-provided key for SSE-C: the base64 of 32 bytes (e.g. from " +
				"`openssl rand -base64 32`). It is sent with every write and every read, and never logged. " +
				"Defaults to `" + envSSECustomerKey + "`, the better place for it. Excludes `encrypt` and " +
				"`kms_key_id`. Same as the S3 backend's `sse_customer_key`.",
			Optional:  true,
			Sensitive: true,
			Validators: []validator.String{
				ruleValidator{description: "must be the base64 of 32 bytes",
					rule: func(key string) error {
						_, err := awsclient.ObjectSettings{SSECustomerKey: key}.Options()
						return err
					},
					// The report never shows the value.
					report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidSetting(p, err) }},
				stringvalidator.ConflictsWith(path.MatchRoot("kms_key_id")),
			},
		},
		"acl": schema.StringAttribute{
			MarkdownDescription: "Canned ACL put on every lock object, e.g. `bucket-owner-full-control` for a bucket " +
				"of another account that requires it. Same as the S3 backend's `acl`.",
			Optional: true,
			Validators: []validator.String{
				ruleValidator{description: "must be a canned ACL such as bucket-owner-full-control",
					rule: func(acl string) error {
						_, err := awsclient.ObjectSettings{ACL: acl}.Options()
						return err
					},
					report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidSetting(p, err) }},
			},
		},
	}
}

// objectSettings translates the provider block's object settings.
func objectSettings(cfg providerModelV0) awsclient.ObjectSettings {
	s := awsclient.ObjectSettings{
		Encrypt:        cfg.Encrypt.ValueBool(),
		KMSKeyID:       cfg.KMSKeyID.ValueString(),
		SSECustomerKey: cfg.SSECustomerKey.ValueString(),
		ACL:            cfg.ACL.ValueString(),
	}
	if cfg.SSECustomerKey.IsNull() {
		s.SSECustomerKey = os.Getenv(envSSECustomerKey)
	}
	return s
}
