// Package awsclient builds the *s3.Client that s3lock talks through, from a
// plain Options struct that both the s3lock CLI and the Terraform provider
// fill from their own configuration.
//
// It loads the AWS configuration the standard way (config.LoadDefaultConfig),
// so the usual environment variables (AWS_ACCESS_KEY_ID, AWS_PROFILE,
// AWS_REGION, AWS_ENDPOINT_URL_S3, ...) and the shared config and credentials
// files work as they do for the AWS CLI; explicit Options fields take
// precedence over them. On top of that it sets timeouts and a retry policy
// sized for a lock service: small requests that should answer in
// milliseconds, where an unreachable store must be reported within seconds,
// not after minutes of retries.
//
// New makes no request: wrong credentials or an unreachable endpoint show up
// on the first call.
package awsclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
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
	// DefaultSessionName is the role session name of AssumeRole when none is
	// given.
	DefaultSessionName = "s3lock"
)

// Errors returned by New. Branch on them with errors.Is.
var (
	// ErrInvalidOptions means a field of Options is malformed or a required
	// companion field is missing.
	ErrInvalidOptions = errors.New("awsclient: invalid options")
	// ErrNoRegion means no region was given and none is configured in the
	// environment or the shared config files, and there is no custom
	// endpoint to fall back to DefaultEndpointRegion for.
	ErrNoRegion = errors.New("awsclient: no AWS region configured")
)

// Options say how to reach S3 and with which credentials. The zero value
// uses the standard AWS configuration chain with the package defaults.
type Options struct {
	// Region of the bucket. Empty: AWS_REGION, AWS_DEFAULT_REGION or the
	// profile's region; with a custom Endpoint, DefaultEndpointRegion if
	// none of those is set.
	Region string
	// Profile names a profile of the shared config and credentials files.
	// Empty: AWS_PROFILE, else "default".
	Profile string
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
	// AssumeRole, when set, makes the client assume this IAM role with the
	// credentials found by the rest of the options.
	AssumeRole *AssumeRole
	// STSEndpoint overrides the STS endpoint (for AssumeRole and STSClient).
	STSEndpoint string

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

	// AppID is sent in the User-Agent header (e.g. "s3lock-cli"), so that
	// the store's logs show which tool made a request.
	AppID string
}

// AssumeRole names an IAM role to assume through STS.
type AssumeRole struct {
	// RoleARN is the role to assume (required).
	RoleARN string
	// SessionName names the role session in CloudTrail (default
	// DefaultSessionName).
	SessionName string
	// ExternalID is passed to STS when the role's trust policy requires one.
	ExternalID string
	// Duration of the role session; zero for STS's default (one hour).
	// Credentials are refreshed before they expire.
	Duration time.Duration
}

// New returns an S3 client configured by opts. It reads the environment and
// the shared AWS files but sends no request; ctx bounds only that loading
// (credential providers that need the network, such as SSO or the instance
// metadata service, run lazily on the first request, under that request's
// context).
func New(ctx context.Context, opts Options) (*s3.Client, error) {
	cfg, err := LoadConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	return S3Client(cfg, opts), nil
}

// S3Client returns the S3 client for a configuration loaded by LoadConfig
// with the same options (endpoint, addressing).
func S3Client(cfg aws.Config, opts Options) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.UsePathStyle
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		// S3-compatible stores often send no response checksum; that is
		// not worth a warning on every request.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// STSClient returns an STS client for a configuration loaded by LoadConfig
// with the same options (STS endpoint).
func STSClient(cfg aws.Config, opts Options) *sts.Client {
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		if opts.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(opts.STSEndpoint)
		}
	})
}

// LoadConfig returns the aws.Config that New builds its client from: region,
// credentials (assumed role included), HTTP client and retryer. The custom
// Endpoint and path-style addressing are S3 client settings and are not part
// of it, so the same config can serve other AWS clients (STS, say).
func LoadConfig(ctx context.Context, opts Options) (aws.Config, error) {
	if err := opts.validate(); err != nil {
		return aws.Config{}, err
	}
	connect := orDefault(opts.ConnectTimeout, DefaultConnectTimeout)
	response := orDefault(opts.ResponseTimeout, DefaultResponseTimeout)
	attempts := opts.MaxAttempts
	if attempts == 0 {
		attempts = DefaultMaxAttempts
	}
	backoff := orDefault(opts.MaxBackoff, DefaultMaxBackoff)

	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = connect }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = connect
			t.ResponseHeaderTimeout = response
		})
	loaders := []func(*config.LoadOptions) error{
		// The SDK's own logger writes unstructured lines to stderr; what
		// matters reaches the caller as errors.
		config.WithLogger(logging.Nop{}),
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = backoff
			})
		}),
	}
	if opts.Region != "" {
		loaders = append(loaders, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		loaders = append(loaders, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.AccessKey != "" {
		loaders = append(loaders, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, opts.Token)))
	}
	if opts.AppID != "" {
		loaders = append(loaders, config.WithAppID(opts.AppID))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsclient: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if opts.Endpoint == "" {
			return aws.Config{}, ErrNoRegion
		}
		cfg.Region = DefaultEndpointRegion
	}
	if ar := opts.AssumeRole; ar != nil {
		name := ar.SessionName
		if name == "" {
			name = DefaultSessionName
		}
		provider := stscreds.NewAssumeRoleProvider(STSClient(cfg, opts), ar.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = name
			if ar.ExternalID != "" {
				o.ExternalID = aws.String(ar.ExternalID)
			}
			if ar.Duration > 0 {
				o.Duration = ar.Duration
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	return cfg, nil
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
	}
	for _, ep := range []string{o.Endpoint, o.STSEndpoint} {
		if ep == "" {
			continue
		}
		if err := ValidateEndpoint(ep); err != nil {
			return bad("%v", err)
		}
	}
	if ar := o.AssumeRole; ar != nil {
		switch {
		case ar.RoleARN == "":
			return bad("assume role needs a role ARN")
		case !strings.HasPrefix(ar.RoleARN, "arn:"):
			return bad("role ARN %q does not start with \"arn:\"", ar.RoleARN)
		case ar.Duration < 0:
			return bad("assume role duration %s is negative", ar.Duration)
		}
	}
	return nil
}

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
