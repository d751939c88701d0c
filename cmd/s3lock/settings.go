package main

import (
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
)

// Environment variables read by s3lock, besides the standard AWS ones.
const (
	envBucket       = "S3LOCK_BUCKET"
	envEndpoint     = "S3LOCK_ENDPOINT"
	envPathStyle    = "S3LOCK_USE_PATH_STYLE"
	envHolder       = "S3LOCK_HOLDER"
	envToken        = runenv.Token
	envBucketOwner  = "S3LOCK_EXPECTED_BUCKET_OWNER"
	envRegionS3Lock = "S3LOCK_REGION"
	envEncrypt      = "S3LOCK_ENCRYPT"
	envKMSKeyID     = "S3LOCK_KMS_KEY_ID"
	envSSECKey      = runenv.SSECustomerKey
	envACL          = "S3LOCK_ACL"
)

// resolveEnv fills the connection flags that were not given from the
// environment.
func (a *app) resolveEnv(cmd *cobra.Command) error {
	flags := cmd.Flags()
	fromEnv(flags, &a.bucket, "bucket", envBucket)
	fromEnv(flags, &a.endpoint, "endpoint", envEndpoint)
	fromEnv(flags, &a.region, "region", envRegionS3Lock) // AWS_REGION is read by the SDK
	fromEnv(flags, &a.bucketOwner, "expected-bucket-owner", envBucketOwner)
	fromEnv(flags, &a.objects.KMSKeyID, "kms-key-id", envKMSKeyID)
	fromEnv(flags, &a.objects.SSECustomerKey, "sse-customer-key", envSSECKey)
	fromEnv(flags, &a.objects.ACL, "acl", envACL)
	if err := boolFromEnv(flags, &a.pathStyle, "use-path-style", envPathStyle); err != nil {
		return err
	}
	if err := boolFromEnv(flags, &a.objects.Encrypt, "encrypt", envEncrypt); err != nil {
		return err
	}
	if f := flags.Lookup("holder"); f != nil && !f.Changed {
		if v := os.Getenv(envHolder); v != "" {
			if err := f.Value.Set(v); err != nil {
				return err
			}
		}
	}
	return a.resolveConnectionEnv(flags)
}

// fromEnv sets *p from the first of envs that is set, unless flag was given.
func fromEnv(flags *pflag.FlagSet, p *string, flag string, envs ...string) {
	if flags.Changed(flag) {
		return
	}
	for _, e := range envs {
		if v := os.Getenv(e); v != "" {
			*p = v
			return
		}
	}
}

// boolFromEnv sets *p from env, unless flag was given.
func boolFromEnv(flags *pflag.FlagSet, p *bool, flag, env string) error {
	if flags.Changed(flag) {
		return nil
	}
	if v := os.Getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return usagef("%s=%q is not true or false", env, v)
		}
		*p = b
	}
	return nil
}

// durationFlag registers a duration flag that rejects negative values.
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	fs.Var(&nonNegDuration{p: p}, name, usage)
	*p = def
	fs.Lookup(name).DefValue = def.String()
}

type nonNegDuration struct{ p *time.Duration }

func (d *nonNegDuration) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d *nonNegDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (examples: 90s, 5m, 1h30m)")
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	*d.p = v
	return nil
}

func (d *nonNegDuration) Type() string { return "duration" }
