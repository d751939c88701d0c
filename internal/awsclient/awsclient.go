// Package awsclient builds the *s3.Client that s3lock talks through, from a
// plain Options struct that both the s3lock CLI and the Terraform provider
// fill from their own configuration. The settings carry the meanings of
// Terraform's S3 backend settings of the same names (see each field).
//
// It loads the AWS configuration the standard way (config.LoadDefaultConfig),
// so the usual environment variables (AWS_ACCESS_KEY_ID, AWS_PROFILE,
// AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_CA_BUNDLE, HTTPS_PROXY, AWS_ROLE_ARN,
// ...) and the shared config and credentials files work as they do for the
// AWS CLI; explicit Options fields take precedence over them. On top of that
// it sets timeouts and a retry policy sized for a lock service: small
// requests that should answer in milliseconds, where an unreachable store
// must be reported within seconds, not after minutes of retries.
//
// Files named in Options (shared files, a CA bundle, a web identity token)
// are read when the configuration is loaded, so that a wrong path is
// reported at once; otherwise New makes no request: wrong credentials or an
// unreachable endpoint show up on the first call.
//
// The file layout: options.go the options and their rules, awsclient.go
// the loading and the clients, paths.go the files the options name,
// roles.go the assumed roles (assume_role, assume_role_with_web_identity),
// transport.go the HTTP client (timeouts, TLS, retries), proxy.go the proxy
// rules, checksums.go skip_s3_checksum, objects.go the settings of the
// objects s3lock writes.
package awsclient

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sso"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// New returns an S3 client configured by opts. It reads the environment and
// the shared AWS files but sends no request; ctx bounds only that loading
// (credential providers that need the network, such as SSO, STS or the
// instance metadata service, run lazily on the first request, under that
// request's context).
func New(ctx context.Context, opts Options) (*s3.Client, error) {
	cfg, err := LoadConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	return S3Client(cfg, opts), nil
}

// S3Client returns the S3 client for a configuration loaded by LoadConfig
// with the same options (endpoint, addressing, checksums).
func S3Client(cfg aws.Config, opts Options) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.UsePathStyle
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		// S3-compatible stores often send no response checksum; that is
		// not worth a warning on every request.
		o.DisableLogOutputChecksumValidationSkipped = true
		if opts.SkipS3Checksum {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			o.APIOptions = append(o.APIOptions, contentMD5Instead)
		}
	})
}

// STSClient returns an STS client for a configuration loaded by LoadConfig
// with the same options (STS endpoint and region).
func STSClient(cfg aws.Config, opts Options) *sts.Client {
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		if opts.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(opts.STSEndpoint)
		}
		if opts.STSRegion != "" {
			o.Region = opts.STSRegion
		}
	})
}

// LoadConfig returns the aws.Config that New builds its client from: region,
// credentials (assumed roles included), HTTP client and retryer. The custom
// Endpoint and path-style addressing are S3 client settings and are not part
// of it, so the same config can serve other AWS clients (STS, say). It
// resolves opts first (Options.Resolved).
func LoadConfig(ctx context.Context, opts Options) (aws.Config, error) {
	opts, err := opts.Resolved()
	if err != nil {
		return aws.Config{}, err
	}
	if err := opts.validate(); err != nil {
		return aws.Config{}, err
	}
	loaders, err := opts.loaders()
	if err != nil {
		return aws.Config{}, err
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	var noProfile config.SharedConfigProfileNotExistError
	switch {
	case errors.As(err, &noProfile):
		return aws.Config{}, fmt.Errorf("%w: the AWS profile %q is in none of the shared config files "+
			"(AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE, by default ~/.aws/config and ~/.aws/credentials): "+
			"correct AWS_PROFILE or the profile setting, or add the profile", ErrInvalidOptions, noProfile.Profile)
	case err != nil:
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if err := opts.checkRegion(&cfg); err != nil {
		return aws.Config{}, err
	}
	if err := opts.setRetryer(ctx, &cfg); err != nil {
		return aws.Config{}, err
	}
	opts.assumeRoles(&cfg)
	return cfg, nil
}

// loaders are the options of config.LoadDefaultConfig for o.
func (o Options) loaders() ([]func(*config.LoadOptions) error, error) {
	httpClient, caBundle, err := o.httpClient()
	if err != nil {
		return nil, err
	}
	loaders := []func(*config.LoadOptions) error{
		// The SDK's own logger writes unstructured lines to stderr; what
		// matters reaches the caller as errors.
		config.WithLogger(logging.Nop{}),
		config.WithHTTPClient(httpClient),
		config.WithRetryer(o.retryer(RetryModeStandard)),
		config.WithAPIOptions([]func(*middleware.Stack) error{certificateHint}),
	}
	if caBundle != nil {
		// As LoadOptions it takes precedence over AWS_CA_BUNDLE, which the
		// SDK would otherwise add.
		loaders = append(loaders, config.WithCustomCABundle(caBundle))
	}
	loaders = append(loaders, o.switches()...)
	if o.Region != "" {
		loaders = append(loaders, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		loaders = append(loaders, config.WithSharedConfigProfile(o.Profile))
	}
	if len(o.SharedConfigFiles) > 0 {
		loaders = append(loaders, config.WithSharedConfigFiles(o.SharedConfigFiles))
	}
	if len(o.SharedCredentialsFiles) > 0 {
		loaders = append(loaders, config.WithSharedCredentialsFiles(o.SharedCredentialsFiles))
	}
	if o.AccessKey != "" {
		loaders = append(loaders, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, o.Token)))
	}
	if o.AppID != "" {
		loaders = append(loaders, config.WithAppID(o.AppID))
	}
	if o.SSOEndpoint != "" {
		loaders = append(loaders, config.WithSSOProviderOptions(o.ssoEndpoint))
	}
	if o.STSEndpoint != "" || o.STSRegion != "" {
		// The roles the SDK assumes itself (a profile's role_arn,
		// AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE) use the same STS.
		loaders = append(loaders,
			config.WithAssumeRoleCredentialOptions(func(ar *stscreds.AssumeRoleOptions) { ar.Client = o.stsOf(ar.Client) }),
			config.WithWebIdentityRoleCredentialOptions(func(w *stscreds.WebIdentityRoleOptions) {
				if c, ok := w.Client.(*sts.Client); ok {
					w.Client = o.stsFrom(c)
				}
			}))
	}
	return loaders, nil
}

// switches are the loaders of the switches set explicitly: as LoadOptions
// they take precedence over the environment (AWS_EC2_METADATA_DISABLED,
// AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT) and the shared config,
// off as well as on.
func (o Options) switches() []func(*config.LoadOptions) error {
	var loaders []func(*config.LoadOptions) error
	if skip := o.SkipMetadataAPICheck; skip != nil {
		state := imds.ClientEnabled
		if *skip {
			state = imds.ClientDisabled
		}
		loaders = append(loaders, config.WithEC2IMDSClientEnableState(state))
	}
	if fips := o.UseFIPSEndpoint; fips != nil {
		state := aws.FIPSEndpointStateDisabled
		if *fips {
			state = aws.FIPSEndpointStateEnabled
		}
		loaders = append(loaders, config.WithUseFIPSEndpoint(state))
	}
	if dual := o.UseDualStackEndpoint; dual != nil {
		state := aws.DualStackEndpointStateDisabled
		if *dual {
			state = aws.DualStackEndpointStateEnabled
		}
		loaders = append(loaders, config.WithUseDualStackEndpoint(state))
	}
	return loaders
}

// stsOf is the STS client of an SDK-made AssumeRole provider, rebuilt with
// STSEndpoint and STSRegion.
func (o Options) stsOf(c stscreds.AssumeRoleAPIClient) stscreds.AssumeRoleAPIClient {
	if sc, ok := c.(*sts.Client); ok {
		return o.stsFrom(sc)
	}
	return c
}

// stsFrom rebuilds an STS client that the SDK made with STSEndpoint and
// STSRegion.
func (o Options) stsFrom(c *sts.Client) *sts.Client {
	return sts.New(c.Options(), func(so *sts.Options) {
		if o.STSEndpoint != "" {
			so.BaseEndpoint = aws.String(o.STSEndpoint)
		}
		if o.STSRegion != "" {
			so.Region = o.STSRegion
		}
	})
}

// ssoEndpoint points the SSO credential provider's portal client at
// SSOEndpoint. The SDK builds that client from the profile's SSO region; it
// is rebuilt here from its own options with the endpoint changed.
func (o Options) ssoEndpoint(so *ssocreds.Options) {
	if c, ok := so.Client.(*sso.Client); ok {
		so.Client = sso.New(c.Options(), func(opts *sso.Options) { opts.BaseEndpoint = aws.String(o.SSOEndpoint) })
	}
}

// awsRegionPattern is the shape of AWS region names in every partition: a
// prefix of 2 to 4 letters, words, a number: us-east-1, eu-central-2,
// us-gov-west-1, cn-northwest-1, us-isob-east-1, eu-isoe-west-1,
// eusc-de-east-1 (the European Sovereign Cloud), ...
var awsRegionPattern = regexp.MustCompile(`^[a-z]{2,4}(-[a-z]+)+-[0-9]+$`)

// regionLabel is what any region name must be, on any store: the SDK puts it
// in host names and the signature's scope.
var regionLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)

// checkRegion applies the default region of custom endpoints and checks the
// region's name where it must be AWS's.
func (o Options) checkRegion(cfg *aws.Config) error {
	// The S3 client's base endpoint includes the one of the environment
	// and the shared config (AWS_ENDPOINT_URL_S3, services sections).
	custom := o.Endpoint != "" || s3.NewFromConfig(*cfg).Options().BaseEndpoint != nil
	if cfg.Region == "" {
		if !custom {
			return ErrNoRegion
		}
		cfg.Region = DefaultEndpointRegion
	}
	if !regionLabel.MatchString(cfg.Region) {
		// The SDK signs with the region and puts it in host names: it
		// refuses such a name in every request ("invalid input region"),
		// which read as an unreachable store.
		return fmt.Errorf("%w: region %q is not a region name (letters, digits and hyphens, such as us-east-1): correct --region, AWS_REGION or the profile's region",
			ErrInvalidOptions, cfg.Region)
	}
	if o.SkipRegionValidation {
		return nil
	}
	if !custom && !awsRegionPattern.MatchString(cfg.Region) {
		return fmt.Errorf("%w: region %q is not the name of an AWS region, such as us-east-1 or eu-central-1: "+
			"correct it, or skip the region validation if the name is right", ErrInvalidOptions, cfg.Region)
	}
	if o.STSRegion != "" && o.STSEndpoint == "" && !awsRegionPattern.MatchString(o.STSRegion) {
		return fmt.Errorf("%w: STS region %q is not the name of an AWS region, such as us-east-1: "+
			"correct it, or skip the region validation if the name is right", ErrInvalidOptions, o.STSRegion)
	}
	return nil
}
