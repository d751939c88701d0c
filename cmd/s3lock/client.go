package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// lockConfig is what every command that locks needs beyond the connection.
type lockConfig struct {
	holder string
	// lease is the --lease of a command that takes a lease (its flag
	// refuses 0); 0 for a command that takes none (status, renew, watch),
	// whose client never uses the SDK's default.
	lease time.Duration
}

// needBucket returns a usage error when no bucket is configured.
func (a *app) needBucket() error {
	if a.bucket == "" {
		return usagef("no bucket: set --bucket or %s", envBucket)
	}
	return nil
}

// client builds the lock client for bucket, with the options for lc and
// the global flags. It validates everything it can before making
// any request.
func (a *app) client(ctx context.Context, bucket string, lc lockConfig) (*s3lock.Client, error) {
	opts, err := a.clientOptions(bucket, lc)
	if err != nil {
		return nil, err
	}
	api, err := a.s3API(ctx)
	if err != nil {
		return nil, err
	}
	return s3lock.New(api, bucket, opts...)
}

// clientOptions returns the options of a lock client for bucket, lc and
// the global flags, checked (bucket included) as New checks
// them: before the AWS configuration, whose loading may read files.
func (a *app) clientOptions(bucket string, lc lockConfig) ([]s3lock.Option, error) {
	objects, err := a.objects.Options()
	if err != nil {
		// The error never contains the customer key.
		return nil, fmt.Errorf("--encrypt, --kms-key-id, --sse-customer-key, --acl: %w", err)
	}
	if lc.holder != "" {
		if err := s3lock.ValidateHolder(lc.holder); err != nil {
			// The holder may come from the environment, set by a CI
			// template ("... ($CI_JOB_NAME)"): say where to look.
			return nil, fmt.Errorf("--holder (or %s): %w", envHolder, err)
		}
	}
	opts := append(a.lockOptions(lc), objects...)
	if err := s3lock.ValidateConfig(bucket, opts...); err != nil {
		return nil, err
	}
	return opts, nil
}

// lockOptions returns the s3lock options for lc and the global flags.
func (a *app) lockOptions(lc lockConfig) []s3lock.Option {
	var opts []s3lock.Option
	if lc.holder != "" {
		opts = append(opts, s3lock.WithHolder(lc.holder))
	}
	if lc.lease != 0 {
		opts = append(opts, s3lock.WithLeaseDuration(lc.lease))
	}
	if a.bucketOwner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(a.bucketOwner))
	}
	if a.debug {
		opts = append(opts, s3lock.WithLogger(slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	if a.stats != nil {
		opts = append(opts, s3lock.WithObserver(a.stats))
	}
	return opts
}

// s3API builds the S3 client from the connection flags and the standard
// AWS configuration. It makes no request.
func (a *app) s3API(ctx context.Context) (*s3.Client, error) {
	api, err := awsclient.New(ctx, a.awsOptions())
	if errors.Is(err, awsclient.ErrNoRegion) {
		return nil, usagef("no AWS region: set --region, %s or AWS_REGION", envRegionS3Lock)
	}
	return api, err
}
