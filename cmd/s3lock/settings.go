package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
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

// durationSpec says which values a duration flag takes. A negative value
// is never one; 0 is one only when zero says what it means.
type durationSpec struct {
	// min and max bound the values other than 0 (0: no bound); --help
	// shows them after the usage.
	min, max time.Duration
	// zero is what 0 means, e.g. "0 tries once", appended to the usage;
	// "" refuses 0 (a flag whose absence means something 0 could not say).
	zero string
	// defText is the default that --help shows when the flag's absence is
	// not one fixed duration ("STS's, 1h"): the variable then stays 0 when
	// the flag is not given, and 0 must be refused (zero "").
	defText string
}

// Duration flags that take a lease: the SDK's limits, 0 refused (a lease
// of 0 would otherwise be taken for the SDK's default of a minute).
var leaseSpec = durationSpec{min: s3lock.MinLeaseDuration, max: s3lock.MaxLeaseDuration}

// durationFlag registers a duration flag with default def that takes the
// values spec allows and refuses any other with an error that names the
// range and the default.
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string, spec durationSpec) {
	if spec.min > 0 || spec.max > 0 {
		usage += " (" + spec.rangeText() + ")"
	}
	if spec.zero != "" {
		usage += "; " + spec.zero
	}
	defText := spec.defText
	if defText == "" {
		defText = helpDuration(def)
	}
	fs.Var(&checkedDuration{p: p, spec: spec, name: name, defText: defText}, name, usage)
	*p = def
	fs.Lookup(name).DefValue = defText
}

// rangeText is the range of the values other than 0: "2s to 720h", "at
// least 2s", "at most 1h" or "more than 0".
func (s durationSpec) rangeText() string {
	switch {
	case s.min > 0 && s.max > 0:
		return helpDuration(s.min) + " to " + helpDuration(s.max)
	case s.min > 0:
		return "at least " + helpDuration(s.min)
	case s.max > 0:
		return "at most " + helpDuration(s.max)
	}
	return "more than 0"
}

// helpDuration writes d as people write it: 720h, 10m, 1h30m, 2s, 100ms.
func helpDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// checkedDuration is the value of a duration flag: it refuses what its
// spec does not allow.
type checkedDuration struct {
	p             *time.Duration
	spec          durationSpec
	name, defText string
}

func (d *checkedDuration) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d *checkedDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (examples: 90s, 5m, 1h30m)")
	}
	sp := d.spec
	switch {
	case v < 0 && sp.zero != "":
		return fmt.Errorf("must not be negative; %s", sp.zero)
	case v == 0 && sp.zero != "":
	case v <= 0, sp.min > 0 && v < sp.min, sp.max > 0 && v > sp.max:
		// pflag names the flag and the value first.
		return fmt.Errorf("must be %s; leave --%s out for the default (%s)", sp.mustBe(), d.name, d.defText)
	}
	*d.p = v
	return nil
}

// mustBe completes "must be": "2s to 720h" reads "between 2s and 720h".
func (s durationSpec) mustBe() string {
	if s.min > 0 && s.max > 0 {
		return "between " + helpDuration(s.min) + " and " + helpDuration(s.max)
	}
	return s.rangeText()
}

func (d *checkedDuration) Type() string { return "duration" }
