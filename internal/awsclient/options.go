package awsclient

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of the timeout and retry settings, used when the Options field is
// zero.
const (
	// DefaultConnectTimeout bounds one TCP connect (and, separately, one TLS
	// handshake): a reachable S3 endpoint connects in milliseconds, so a few
	// seconds only matter for an address that drops packets.
	DefaultConnectTimeout = 3 * time.Second
	// DefaultResponseTimeout bounds the wait for the response headers of one
	// attempt once the request is sent. Lock objects are tiny; an answer
	// this late means the attempt is better retried.
	DefaultResponseTimeout = 15 * time.Second
	// DefaultMaxAttempts is how many times one call is tried in all (the
	// SDK's standard retryer). Three attempts ride out a dropped connection
	// or a 503 without hiding an endpoint that is down.
	DefaultMaxAttempts = 3
	// DefaultMaxBackoff caps the wait between attempts (the SDK's default is
	// 20 seconds, far longer than a lock operation should stall).
	DefaultMaxBackoff = 2 * time.Second
	// DefaultEndpointRegion is the region used with a custom Endpoint when
	// no region is configured anywhere: S3-compatible stores usually accept
	// any region in the signature, and most default to this one.
	DefaultEndpointRegion = "us-east-1"
	// DefaultSessionName is the role session name of AssumeRole and
	// AssumeRoleWithWebIdentity when none is given.
	DefaultSessionName = "s3lock"
)

// The retry modes of RetryMode, those of the S3 backend's retry_mode.
const (
	// RetryModeStandard retries with exponential backoff and a retry quota.
	RetryModeStandard = "standard"
	// RetryModeAdaptive is standard plus client-side rate limiting once the
	// store throttles.
	RetryModeAdaptive = "adaptive"
)

// Errors returned by New. Branch on them with errors.Is.
var (
	// ErrInvalidOptions means a field of Options is malformed, a required
	// companion field is missing, two fields exclude each other, or a file
	// named in Options cannot be read.
	ErrInvalidOptions = errors.New("invalid AWS settings")
	// ErrNoRegion means no region was given and none is configured in the
	// environment or the shared config files, and there is no custom
	// endpoint to fall back to DefaultEndpointRegion for.
	ErrNoRegion = errors.New("no AWS region configured")
)

// Options say how to reach S3 and with which credentials. The zero value
// uses the standard AWS configuration chain with the package defaults.
//
// Options travel as JSON (to the provider's run guard), so every field is
// plain data; call Resolved before they leave the process, so that the files
// they name and what they take from the environment mean the same there.
//
// The pointer fields tell "not set" (nil) from a value set explicitly,
// false or empty included, which then overrides the environment and the
// shared config, as the S3 backend's settings of the same names do.
type Options struct {
	// Region of the bucket. Empty: AWS_REGION, AWS_DEFAULT_REGION or the
	// profile's region; with a custom Endpoint, DefaultEndpointRegion if
	// none of those is set.
	Region string
	// Profile names a profile of the shared config and credentials files.
	// Empty: AWS_PROFILE, else "default".
	Profile string
	// SharedConfigFiles and SharedCredentialsFiles replace the shared config
	// and credentials files (default AWS_CONFIG_FILE, else ~/.aws/config, and
	// AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials). A leading "~/"
	// is the home directory, a relative path is relative to the current
	// directory (Resolved makes both absolute). Each file named must be
	// readable.
	SharedConfigFiles      []string
	SharedCredentialsFiles []string
	// AccessKey, SecretKey and Token are static credentials. They take
	// precedence over every other source; AccessKey and SecretKey go
	// together, and Token needs both.
	AccessKey string
	SecretKey string
	Token     string
	// Endpoint is the base URL of an S3-compatible store, e.g.
	// http://127.0.0.1:7070. Empty: AWS's own endpoints (or
	// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL when set).
	Endpoint string
	// UsePathStyle addresses buckets as https://host/bucket instead of
	// https://bucket.host, as most S3-compatible stores require.
	UsePathStyle bool
	// AssumeRoleWithWebIdentity, when set, gets credentials from STS
	// AssumeRoleWithWebIdentity with an OIDC token (from CI, Kubernetes, ...)
	// instead of the credentials found by the rest of the options.
	AssumeRoleWithWebIdentity *WebIdentity
	// AssumeRole, when set, makes the client assume this IAM role with the
	// credentials found by the rest of the options (those of
	// AssumeRoleWithWebIdentity when it is set too).
	AssumeRole *AssumeRole
	// STSEndpoint overrides the STS endpoint (for the assumed roles and
	// STSClient).
	STSEndpoint string
	// STSRegion is the region of STS requests; empty: Region.
	STSRegion string
	// SSOEndpoint overrides the endpoint of the IAM Identity Center (SSO)
	// portal API, which SSO profiles get their credentials from.
	SSOEndpoint string
	// UseFIPSEndpoint and UseDualStackEndpoint turn AWS's FIPS and
	// dual-stack (IPv6) endpoints on (true) or off (false), whatever
	// AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT and the shared config
	// say; nil leaves it to those. True excludes a custom Endpoint or
	// STSEndpoint, which the SDK would not resolve.
	UseFIPSEndpoint      *bool
	UseDualStackEndpoint *bool
	// SkipRegionValidation accepts a region that does not look like an AWS
	// region name. The check only applies without a custom S3 endpoint:
	// S3-compatible stores name their regions as they like.
	SkipRegionValidation bool
	// SkipMetadataAPICheck true never asks the EC2 instance metadata service
	// (IMDS) for credentials or a region; false does, whatever
	// AWS_EC2_METADATA_DISABLED says; nil leaves it to that variable.
	SkipMetadataAPICheck *bool
	// SkipS3Checksum sends none of the SDK's flexible checksum headers
	// (x-amz-checksum-*, x-amz-sdk-checksum-algorithm), and checks no
	// checksum in responses, for S3-compatible stores that reject them. The
	// one request s3lock makes whose checksum S3 requires, DeleteObjects,
	// then carries Content-MD5 instead (see checksums.go).
	SkipS3Checksum bool

	// CustomCABundle is a PEM file of the certificates that the endpoints'
	// TLS certificates must chain to, instead of the system's. Empty:
	// AWS_CA_BUNDLE. It excludes Insecure.
	CustomCABundle string
	// caBundleFromEnv says that Resolved took CustomCABundle from
	// AWS_CA_BUNDLE, so that errors name the variable. (It does not travel
	// as JSON; errors elsewhere name the setting.)
	caBundleFromEnv bool
	// Insecure accepts any TLS certificate. It excludes CustomCABundle.
	Insecure bool
	// HTTPProxy and HTTPSProxy are the proxies of http:// and https://
	// requests, NoProxy the hosts reached without one (comma-separated
	// domains, IP addresses, CIDR ranges, with an optional port, or "*").
	// With the meanings of the S3 backend's http_proxy, https_proxy and
	// no_proxy (aws-sdk-go-base's legacy proxy mode): a nil proxy falls back
	// to its environment variable (HTTP_PROXY, HTTPS_PROXY, or their
	// lower-case forms), an empty one means none; HTTPProxy alone also
	// carries https:// requests when neither HTTPSProxy nor HTTPS_PROXY is
	// set. An empty NoProxy falls back to NO_PROXY (or no_proxy), whose
	// malformed entries are ignored, as Go ignores them; a malformed NoProxy
	// is an error. When any of the three is set, the proxies also apply to
	// loopback hosts, which Go's environment-only proxy rules never send
	// through a proxy; see proxy.go.
	HTTPProxy  *string
	HTTPSProxy *string
	NoProxy    string

	// ConnectTimeout bounds one TCP connect and one TLS handshake
	// (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for the response headers of one
	// attempt (default DefaultResponseTimeout).
	ResponseTimeout time.Duration
	// MaxAttempts is how many times one call is tried in all (default
	// DefaultMaxAttempts; 1 disables retries).
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (default DefaultMaxBackoff).
	MaxBackoff time.Duration
	// RetryMode is RetryModeStandard or RetryModeAdaptive. Empty:
	// AWS_RETRY_MODE, else the shared config's retry_mode, else standard.
	RetryMode string

	// AppID is sent in the User-Agent header (e.g. "s3lock-cli"), so that
	// the store's logs show which tool made a request.
	AppID string
}

func (o Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case (o.AccessKey == "") != (o.SecretKey == ""):
		return bad("an access key and a secret key must be given together")
	case o.Token != "" && o.AccessKey == "":
		return bad("a session token needs an access key and a secret key")
	case o.ConnectTimeout < 0, o.ResponseTimeout < 0, o.MaxBackoff < 0:
		return bad("timeouts must not be negative")
	case o.MaxAttempts < 0:
		return bad("max attempts %d is negative", o.MaxAttempts)
	case strings.TrimSpace(o.Region) != o.Region:
		return bad("region %q has surrounding spaces", o.Region)
	case strings.TrimSpace(o.STSRegion) != o.STSRegion:
		return bad("STS region %q has surrounding spaces", o.STSRegion)
	case o.RetryMode != "" && o.RetryMode != RetryModeStandard && o.RetryMode != RetryModeAdaptive:
		return bad("retry mode %q is neither %q nor %q", o.RetryMode, RetryModeStandard, RetryModeAdaptive)
	case o.Insecure && o.CustomCABundle != "":
		return bad("insecure turns certificate checks off, which makes the custom CA bundle pointless: " +
			"keep the CA bundle, or drop it to accept any certificate")
	}
	for _, ep := range []string{o.Endpoint, o.STSEndpoint, o.SSOEndpoint} {
		if ep == "" {
			continue
		}
		if err := ValidateEndpoint(ep); err != nil {
			return bad("%v", err)
		}
	}
	if err := o.validateEndpointVariants(); err != nil {
		return bad("%v", err)
	}
	if err := o.validateFiles(); err != nil {
		return bad("%v", err)
	}
	if err := o.validateProxies(); err != nil {
		return bad("%v", err)
	}
	if err := o.validateRoles(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// validateEndpointVariants rejects FIPS and dual-stack endpoints together
// with a custom endpoint: the SDK resolves those variants only for AWS's own
// endpoints, and would fail every request.
func (o Options) validateEndpointVariants() error {
	for _, v := range []struct {
		on   *bool
		name string
	}{{o.UseFIPSEndpoint, "FIPS"}, {o.UseDualStackEndpoint, "dual-stack"}} {
		switch {
		case !isTrue(v.on):
		case o.Endpoint != "":
			return fmt.Errorf("%s endpoints cannot be combined with the custom S3 endpoint %s: they are variants "+
				"of AWS's own endpoints; drop one of the two settings", v.name, o.Endpoint)
		case o.STSEndpoint != "":
			return fmt.Errorf("%s endpoints cannot be combined with the custom STS endpoint %s: they are variants "+
				"of AWS's own endpoints; drop one of the two settings", v.name, o.STSEndpoint)
		}
	}
	return nil
}

// validateFiles checks that the files named in the options can be read.
func (o Options) validateFiles() error {
	for _, set := range []struct {
		what  string
		files []string
	}{{"shared config file", o.SharedConfigFiles}, {"shared credentials file", o.SharedCredentialsFiles}} {
		for _, f := range set.files {
			if err := readable(set.what, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// isTrue reports whether an optional switch is set to true.
func isTrue(p *bool) bool { return p != nil && *p }

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// ValidateEndpoint checks that an endpoint is an http:// or https:// URL with
// a host and without credentials in it (they would end up in logs).
func ValidateEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("endpoint %q is not an http:// or https:// URL with a host, e.g. https://s3.example.com:9000", endpoint)
	case u.User != nil:
		return fmt.Errorf("endpoint %s must not contain credentials; give an access key and secret key instead", u.Redacted())
	}
	return nil
}
