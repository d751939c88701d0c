package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Diagnostics of the provider's own configuration, and of the attribute
// validators.

// errNotConfigured is reported when an operation runs before Configure.
var errNotConfigured = errors.New("the s3lock provider has not been configured; this is a bug in the provider, please report it")

// notConfigured is an operation that ran before Configure.
func notConfigured() diag.Diagnostic {
	return diag.NewErrorDiagnostic("Provider not configured", errNotConfigured.Error())
}

// unexpectedProviderData is provider data of the wrong type (factoryFrom).
func unexpectedProviderData(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unexpected provider data", err.Error())
}

// invalidClientSettings is an s3lock client that could not be made for a
// bucket.
func invalidClientSettings(bucket string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid lock settings", fmt.Sprintf("The s3lock client for bucket %q cannot be "+
		"made: %v", bucket, err))
}

// settingUnknown is a provider setting not known when Terraform configures
// the provider.
func settingUnknown(p path.Path) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Provider setting not known yet",
		fmt.Sprintf("The s3lock provider cannot be configured while %s is unknown: it must be known when "+
			"Terraform plans. Set it from a variable or a value that does not depend on a resource.", p))
}

// noRegion is an AWS configuration without a region.
func noRegion() diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("region"), "No AWS region",
		"The s3lock provider needs a region to sign its requests: set region in the provider block, "+
			"or AWS_REGION in the environment. (With a custom endpoints.s3 it defaults to us-east-1.)")
}

// invalidAWSConfig is an AWS configuration that could not be loaded.
func invalidAWSConfig(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid AWS configuration",
		"The s3lock provider could not load its AWS configuration: "+err.Error())
}

// invalidAWSCredentials is credentials that STS did not confirm.
func invalidAWSCredentials(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid AWS credentials",
		"The s3lock provider could not confirm its credentials with STS GetCallerIdentity: "+err.Error()+
			"\n\nFor an S3-compatible store without STS, set skip_credentials_validation = true.")
}

// invalidObjectSettings is object settings (encryption, ACL) that awsclient
// or the SDK refused as a whole, such as a KMS key without encrypt, or
// SSE-C with encrypt. The error never contains the customer key.
func invalidObjectSettings(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid encryption or ACL settings", objectSettingsReason(err)+
		"\n\nIn the provider block, encrypt = true is SSE-S3, or SSE-KMS with kms_key_id; sse_customer_key "+
		"(or "+envSSECustomerKey+") is SSE-C and excludes both; acl is a canned ACL.")
}

// Attribute validators.

// invalidSetting is one provider setting that an awsclient or SDK rule
// refused: an object setting (an SSE-C key that is not the base64 of 32
// bytes, an unknown ACL; the error never contains the value) or a
// connection setting (an ARN, a session policy, a proxy URL, whose password
// the error hides, a no_proxy list).
func invalidSetting(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid "+p.String(), objectSettingsReason(err))
}

// objectSettingsReason is the rule an object setting broke, without the
// error's package prefix.
func objectSettingsReason(err error) string {
	msg := err.Error()
	for _, prefix := range []string{s3lock.ErrInvalidConfig.Error() + ": ", awsclient.ErrInvalidOptions.Error() + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg + "."
}

// invalidBucket is a bucket name s3lock.ValidateConfig refused.
func invalidBucket(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid bucket name", strings.TrimPrefix(err.Error(), "s3lock: "))
}

// invalidHolder is a holder identity s3lock.ValidateHolder refused.
func invalidHolder(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid holder", err.Error())
}

// invalidOrder is an order s3lock.ParseOrder refused.
func invalidOrder(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid order", strings.TrimPrefix(err.Error(), "s3lock: ")+
		". Pick \"newest\" for deploys of successive commits (an older commit must not deploy after a newer "+
		"one), \"fifo\" for changes that must apply in the order they were queued (migrations), \"none\" to "+
		"race for the lock as waiters without order do.")
}

// invalidEndpoint is an endpoint that is not an http or https URL.
func invalidEndpoint(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid endpoint", err.Error()+".")
}

// invalidLockName is a lock name s3lock.ValidateName refused; where names
// the bucket (" for bucket \"b\"") when known.
func invalidLockName(p path.Path, name, where, reason string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid lock name",
		fmt.Sprintf("Lock name %q%s is invalid: %s. A lock name is a key path inside the bucket: segments of "+
			"letters, digits and -_.=+@,:!~ separated by single slashes, e.g. \"deploy/prod\".", name, where, reason))
}

// invalidPrefix is a prefix s3lock.ValidatePrefix refused.
func invalidPrefix(p path.Path, prefix, reason string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid prefix",
		fmt.Sprintf("Prefix %q is invalid: %s. A prefix is the beginning of a lock name, e.g. \"deploy/\", "+
			"or empty for every lock.", prefix, reason))
}

// notADuration is a duration attribute that does not parse; lock is
// lockContext's description of the lock.
func notADuration(p path.Path, raw, lock string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid duration",
		fmt.Sprintf("%s = %q%s is not a duration: write a number with a unit, such as \"90s\", \"5m\" or \"1h30m\" "+
			"(units: ms, s, m, h).", p, raw, lock))
}

// durationOutOfRange is a duration attribute outside [lo, hi]; zero says
// that "0s" is accepted too.
func durationOutOfRange(p path.Path, raw, lock string, lo, hi time.Duration, zero bool) diag.Diagnostic {
	orZero := ""
	if zero {
		orZero = ` (or "0s")`
	}
	return diag.NewAttributeErrorDiagnostic(p, "Duration out of range", fmt.Sprintf("%s = %q%s is outside the allowed range [%s, %s]%s.",
		p, raw, lock, formatDuration(lo), formatDuration(hi), orZero))
}
