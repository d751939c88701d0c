package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
)

// The connection flags beyond bucket, endpoint, region and profile:
// Terraform's S3 backend settings of the same names, dashed, translated into
// awsclient.Options, which applies them for the CLI and the provider alike.

// Environment variables of the connection settings that have no AWS
// variable of their own. The others (AWS_CA_BUNDLE, HTTPS_PROXY,
// AWS_ROLE_ARN, AWS_RETRY_MODE, ...) are read where the AWS SDKs read them.
const (
	envSTSRegion            = "S3LOCK_STS_REGION"
	envInsecure             = "S3LOCK_INSECURE"
	envSkipRegionValidation = "S3LOCK_SKIP_REGION_VALIDATION"
	envSkipS3Checksum       = "S3LOCK_SKIP_S3_CHECKSUM"
	envWebIdentityToken     = "S3LOCK_WEB_IDENTITY_TOKEN"
	envAssumeRoleARN        = "S3LOCK_ASSUME_ROLE_ARN"
	envAssumeRoleSession    = "S3LOCK_ASSUME_ROLE_SESSION_NAME"
	envAssumeRoleExternalID = "S3LOCK_ASSUME_ROLE_EXTERNAL_ID"
)

// connectionFlags registers the connection flags beyond bucket, endpoint,
// region and profile: Terraform's S3 backend settings of the same names,
// dashed. Their environment variables are the AWS ones where AWS has one.
func (a *app) connectionFlags(pf *pflag.FlagSet) {
	c := &a.conn
	pf.StringVar(&c.STSEndpoint, "sts-endpoint", "", "URL of the STS API, for assumed roles (env AWS_ENDPOINT_URL_STS)")
	pf.StringVar(&c.STSRegion, "sts-region", "", "region of STS requests; default the bucket's (env "+envSTSRegion+")")
	pf.StringVar(&c.SSOEndpoint, "sso-endpoint", "", "URL of the IAM Identity Center portal API, for SSO profiles (env AWS_ENDPOINT_URL_SSO)")
	pf.StringSliceVar(&c.SharedConfigFiles, "shared-config-files", nil, "AWS config files to read instead of ~/.aws/config (env AWS_CONFIG_FILE)")
	pf.StringSliceVar(&c.SharedCredentialsFiles, "shared-credentials-files", nil, "AWS credentials files to read instead of ~/.aws/credentials (env AWS_SHARED_CREDENTIALS_FILE)")
	pf.StringVar(&c.CustomCABundle, "custom-ca-bundle", "", "PEM file of the CA certificates the endpoints' certificates chain to (env AWS_CA_BUNDLE)")
	pf.BoolVar(&c.Insecure, "insecure", false, "accept any TLS certificate, unverified: for tests only (env "+envInsecure+")")
	// The proxies and the switches below are read in resolveConnectionEnv:
	// given, even as "" or false, they override their AWS variables.
	pf.String(flagHTTPProxy, "", "proxy of http:// requests, and of https:// ones unless --https-proxy or HTTPS_PROXY is set (env HTTP_PROXY)")
	pf.String(flagHTTPSProxy, "", `proxy of https:// requests; "" for none, whatever HTTPS_PROXY says (env HTTPS_PROXY)`)
	pf.StringVar(&c.NoProxy, "no-proxy", "", "hosts reached without a proxy: domains, IP addresses, CIDR ranges, or * (env NO_PROXY)")
	pf.StringVar(&c.RetryMode, "retry-mode", "", "how the AWS SDK retries: standard or adaptive (env AWS_RETRY_MODE)")
	pf.Bool(flagFIPS, false, "use AWS's FIPS endpoints; =false: not, whatever AWS_USE_FIPS_ENDPOINT says (env AWS_USE_FIPS_ENDPOINT)")
	pf.Bool(flagDualStack, false, "use AWS's dual-stack (IPv6) endpoints; =false: not, whatever AWS_USE_DUALSTACK_ENDPOINT says (env AWS_USE_DUALSTACK_ENDPOINT)")
	pf.BoolVar(&c.SkipRegionValidation, "skip-region-validation", false, "accept a region that is not named like AWS's (env "+envSkipRegionValidation+")")
	pf.Bool(flagSkipMetadata, false, "never ask the EC2 instance metadata service for credentials; =false: ask it, whatever AWS_EC2_METADATA_DISABLED says (env AWS_EC2_METADATA_DISABLED)")
	pf.BoolVar(&c.SkipS3Checksum, "skip-s3-checksum", false, "send no flexible checksum headers (x-amz-checksum-*), for stores that reject them; "+
		"DeleteObjects then sends Content-MD5 (env "+envSkipS3Checksum+")")

	ar := &a.assumeRole
	pf.StringVar(&ar.RoleARN, "assume-role-arn", "", "assume this IAM role with STS AssumeRole (env "+envAssumeRoleARN+")")
	pf.StringVar(&ar.SessionName, "assume-role-session-name", "", "session name of the assumed role (env "+envAssumeRoleSession+")")
	pf.StringVar(&ar.ExternalID, "assume-role-external-id", "", "external id the role's trust policy requires (env "+envAssumeRoleExternalID+")")
	durationFlag(pf, &ar.Duration, "assume-role-duration", 0, "validity of the role's credentials", roleDurationSpec)
	pf.StringVar(&ar.Policy, "assume-role-policy", "", "IAM policy (JSON) that further restricts the role's session")
	pf.StringSliceVar(&ar.PolicyARNs, "assume-role-policy-arns", nil, "managed policies that further restrict the role's session")
	pf.StringToStringVar(&ar.Tags, "assume-role-tags", nil, "session tags, key=value,...")
	pf.Lookup("assume-role-tags").DefValue = "" // not "[]" in --help
	pf.StringSliceVar(&ar.TransitiveTagKeys, "assume-role-transitive-tag-keys", nil, "keys of the session tags that pass on to chained roles")
	pf.StringVar(&ar.SourceIdentity, "assume-role-source-identity", "", "source identity of the role's session")

	w := &a.webIdentity
	pf.StringVar(&w.RoleARN, "web-identity-role-arn", "", "assume this role with STS AssumeRoleWithWebIdentity (env AWS_ROLE_ARN)")
	pf.StringVar(&w.WebIdentityTokenFile, "web-identity-token-file", "", "file of the OIDC token (env AWS_WEB_IDENTITY_TOKEN_FILE)")
	pf.StringVar(&w.WebIdentityToken, "web-identity-token", "", "the OIDC token itself; prefer env "+envWebIdentityToken+" or a file: a flag's value shows in ps")
	pf.StringVar(&w.SessionName, "web-identity-session-name", "", "session name of the web identity's role (env AWS_ROLE_SESSION_NAME)")
	durationFlag(pf, &w.Duration, "web-identity-duration", 0, "validity of the web identity role's credentials", roleDurationSpec)
	pf.StringVar(&w.Policy, "web-identity-policy", "", "IAM policy (JSON) that further restricts the web identity role's session")
	pf.StringSliceVar(&w.PolicyARNs, "web-identity-policy-arns", nil, "managed policies that further restrict the web identity role's session")
}

// roleDurationSpec is the range of a role session's duration; without the
// flag (0, which it refuses), STS's default.
var roleDurationSpec = durationSpec{min: awsclient.MinRoleDuration, max: awsclient.MaxRoleDuration, defText: "STS's, 1h"}

// The connection flags whose values resolveConnectionEnv reads from the
// flag set: an Options field that tells "not given" from "" or false.
const (
	flagHTTPProxy    = "http-proxy"
	flagHTTPSProxy   = "https-proxy"
	flagFIPS         = "use-fips-endpoint"
	flagDualStack    = "use-dualstack-endpoint"
	flagSkipMetadata = "skip-metadata-api-check"
)

// resolveConnectionEnv fills the connection flags that have an s3lock
// variable, and decides whether the role flags are in use. A flag given
// wins over the variables of its setting and of the settings it excludes
// (--custom-ca-bundle over S3LOCK_INSECURE, --web-identity-token-file over
// S3LOCK_WEB_IDENTITY_TOKEN).
func (a *app) resolveConnectionEnv(flags *pflag.FlagSet) error {
	if err := a.explicitConnectionFlags(flags); err != nil {
		return err
	}
	fromEnv(flags, &a.conn.STSRegion, "sts-region", envSTSRegion)
	for _, b := range []struct {
		p         *bool
		flag, env string
		unless    string // a flag that excludes this one
	}{
		{&a.conn.Insecure, "insecure", envInsecure, "custom-ca-bundle"},
		{&a.conn.SkipRegionValidation, "skip-region-validation", envSkipRegionValidation, ""},
		{&a.conn.SkipS3Checksum, "skip-s3-checksum", envSkipS3Checksum, ""},
	} {
		if b.unless != "" && flags.Changed(b.unless) {
			continue
		}
		if err := boolFromEnv(flags, b.p, b.flag, b.env); err != nil {
			return err
		}
	}
	fromEnv(flags, &a.assumeRole.RoleARN, "assume-role-arn", envAssumeRoleARN)
	fromEnv(flags, &a.assumeRole.SessionName, "assume-role-session-name", envAssumeRoleSession)
	fromEnv(flags, &a.assumeRole.ExternalID, "assume-role-external-id", envAssumeRoleExternalID)
	if !flags.Changed("web-identity-token-file") {
		fromEnv(flags, &a.webIdentity.WebIdentityToken, "web-identity-token", envWebIdentityToken)
	}
	flags.Visit(func(f *pflag.Flag) {
		a.useAssumeRole = a.useAssumeRole || strings.HasPrefix(f.Name, "assume-role-")
		a.useWebIdentity = a.useWebIdentity || strings.HasPrefix(f.Name, "web-identity-")
	})
	ar := a.assumeRole
	a.useAssumeRole = a.useAssumeRole || ar.RoleARN != "" || ar.SessionName != "" || ar.ExternalID != ""
	if a.useAssumeRole && ar.RoleARN == "" {
		return roleARNMissing(flags)
	}
	// AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE alone is the AWS
	// SDK's own web identity, in its place in the credential chain.
	a.useWebIdentity = a.useWebIdentity || a.webIdentity.WebIdentityToken != ""
	return nil
}

// explicitConnectionFlags sets the Options fields of the flags given, ""
// and false included.
func (a *app) explicitConnectionFlags(flags *pflag.FlagSet) error {
	for _, s := range []struct {
		flag string
		p    **string
	}{{flagHTTPProxy, &a.conn.HTTPProxy}, {flagHTTPSProxy, &a.conn.HTTPSProxy}} {
		if !flags.Changed(s.flag) {
			continue
		}
		v, err := flags.GetString(s.flag)
		if err != nil {
			return err
		}
		*s.p = &v
	}
	for _, b := range []struct {
		flag string
		p    **bool
	}{{flagFIPS, &a.conn.UseFIPSEndpoint}, {flagDualStack, &a.conn.UseDualStackEndpoint}, {flagSkipMetadata, &a.conn.SkipMetadataAPICheck}} {
		if !flags.Changed(b.flag) {
			continue
		}
		v, err := flags.GetBool(b.flag)
		if err != nil {
			return err
		}
		*b.p = &v
	}
	return nil
}

// roleARNMissing is an assume-role setting without the role: it names the
// flag or the variable that asked for the role.
func roleARNMissing(flags *pflag.FlagSet) error {
	var by string
	flags.Visit(func(f *pflag.Flag) {
		if by == "" && strings.HasPrefix(f.Name, "assume-role-") && f.Name != "assume-role-arn" {
			by = "--" + f.Name
		}
	})
	for _, env := range []string{envAssumeRoleSession, envAssumeRoleExternalID} {
		if by == "" && os.Getenv(env) != "" {
			by = env
		}
	}
	if by == "" {
		by = `--assume-role-arn ""`
	}
	return usagef("assume role: a role ARN is required: %s asks to assume a role, so set --assume-role-arn or %s "+
		"(or drop %s)", by, envAssumeRoleARN, by)
}

// awsOptions are the AWS client options of the connection flags.
func (a *app) awsOptions() awsclient.Options {
	o := a.conn
	o.Region, o.Profile, o.Endpoint, o.UsePathStyle = a.region, a.profile, a.endpoint, a.pathStyle
	o.AppID = "s3lock-cli"
	if a.useAssumeRole {
		ar := a.assumeRole
		o.AssumeRole = &ar
	}
	if a.useWebIdentity {
		w := a.webIdentity
		o.AssumeRoleWithWebIdentity = &w
	}
	return o
}
