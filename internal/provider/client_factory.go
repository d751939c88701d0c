package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// clientFactory is what the provider hands to its resources and data
// sources: it makes the s3lock client for a bucket. The AWS configuration and
// the S3 client (with its connection pool) are built once, in Configure; an
// s3lock.Client is a small value without per-lock state, so one is made per
// operation, with a logger bound to that operation's context (tflog needs
// it to route the SDK's log lines to Terraform's log).
type clientFactory struct {
	api     s3lock.S3API
	options []s3lock.Option
	hooks   testHooks
	leases  *leaseRegistry // nil: not tracked
	// run holds ephemeral leases for the whole run (nil: noRun says why
	// only per-phase leases can be had), with guardConfig to build the
	// guard's client (runGuardConfig adds the holder); claims orders this
	// process's claims of them.
	run         *runguard.Client
	noRun       error
	guardConfig runguard.ClientConfig
	claims      *runClaims
	// secrets names the secrets written in the provider block itself
	// (inlineSecrets): the state store warns of them.
	secrets []string
}

// credentialsCheckTimeout bounds the check of the credentials with STS
// (GetCallerIdentity, retries included) when the provider is configured:
// the one request the provider makes itself rather than through the s3lock
// SDK, bounded as the SDK bounds one of its requests by default.
const credentialsCheckTimeout = 30 * time.Second

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

// newClientFactory builds the factory from the provider configuration: the
// AWS configuration (checking the credentials with STS unless told not to),
// the S3 client and the s3lock options.
func newClientFactory(ctx context.Context, cfg providerModelV0, p *s3lockProvider) (*clientFactory, diag.Diagnostic) {
	objects := objectSettings(cfg)
	objectOpts, err := objects.Options()
	if err != nil {
		return nil, invalidObjectSettings(err)
	}
	awsOpts, err := awsOptions(ctx, cfg)
	if err != nil {
		return nil, invalidAWSConfig(err)
	}
	awsCfg, err := awsclient.LoadConfig(ctx, awsOpts)
	if errors.Is(err, awsclient.ErrNoRegion) {
		return nil, noRegion()
	}
	if err != nil {
		return nil, invalidAWSConfig(err)
	}
	if !cfg.SkipCredentialsValidation.ValueBool() {
		if err := validateCredentials(ctx, awsCfg, awsOpts); err != nil {
			return nil, invalidAWSCredentials(err)
		}
	}
	// One identity for every lease this provider process takes: the
	// holder setting, or the SDK's default, which is one per process.
	holder := cfg.Holder.ValueString()
	owner := cfg.ExpectedBucketOwner.ValueString()
	var opts []s3lock.Option
	if holder != "" {
		opts = append(opts, s3lock.WithHolder(holder))
	}
	if owner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(owner))
	}
	opts = append(opts, objectOpts...)
	f := &clientFactory{api: awsclient.S3Client(awsCfg, awsOpts), options: opts,
		hooks: p.hooks, leases: p.leases, run: p.run, noRun: p.noRun, claims: p.claims,
		// The run guard renews the run's leases with its own client: it
		// needs the same encryption and ACL, and the same holder.
		guardConfig: runguard.ClientConfig{AWS: awsOpts, ExpectedBucketOwner: owner, Objects: objects},
		secrets:     inlineSecrets(cfg)}
	if holder == "" {
		holder = "(the SDK's default, one per process)"
	}
	// Never the customer key: only whether one is set.
	tflog.Debug(ctx, "configured the s3lock provider", map[string]any{
		"region": awsCfg.Region, "endpoint": endpointName(cfg), "holder": holder,
		"encrypt": objects.Encrypt, "kms_key_id": objects.KMSKeyID, "sse_c": objects.SSECustomerKey != "", "acl": objects.ACL,
	})
	return f, nil
}

// validateCredentials asks STS who the credentials belong to.
func validateCredentials(ctx context.Context, awsCfg aws.Config, opts awsclient.Options) error {
	ctx, cancel := context.WithTimeout(ctx, credentialsCheckTimeout)
	defer cancel()
	out, err := awsclient.STSClient(awsCfg, opts).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return err
	}
	tflog.Debug(ctx, "AWS credentials validated", map[string]any{"account": aws.ToString(out.Account), "arn": aws.ToString(out.Arn)})
	return nil
}

// client returns the s3lock client for bucket, or reports why there is none
// (the provider is not configured yet, or the settings are invalid). It is
// the one place the provider makes a client.
func (f *clientFactory) client(ctx context.Context, bucket string, diags *diag.Diagnostics) (*s3lock.Client, bool) {
	if f == nil {
		diags.Append(notConfigured())
		return nil, false
	}
	c, err := f.newClient(ctx, bucket)
	if err != nil {
		diags.Append(invalidClientSettings(bucket, err))
		return nil, false
	}
	return c, true
}

// newClient is client for callers that report the error themselves.
func (f *clientFactory) newClient(ctx context.Context, bucket string) (*s3lock.Client, error) {
	opts := append([]s3lock.Option{s3lock.WithLogger(newTFLogger(ctx))}, f.options...)
	return s3lock.New(f.api, bucket, opts...)
}

// runGuardConfig is the configuration of the run guard's client for the
// leases that c acquires: guardConfig with c's holder, so that the guard's
// renewals write the holder the lease was acquired with.
func (f *clientFactory) runGuardConfig(c *s3lock.Client) runguard.ClientConfig {
	cfg := f.guardConfig
	cfg.Holder = c.Holder()
	return cfg
}

// now is the provider's clock.
func (f *clientFactory) now() time.Time {
	if f.hooks.now != nil {
		return f.hooks.now()
	}
	return time.Now()
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
