package s3lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestNew_RejectsBadConfiguration: New and ValidateConfig refuse each invalid bucket name and option with the same ErrInvalidConfig.
func TestNew_RejectsBadConfiguration(t *testing.T) {
	api := &s3.Client{}
	cases := []struct {
		name   string
		bucket string
		opts   []s3lock.Option
		want   string
	}{
		{"empty bucket", "", nil, "bucket name is empty"},
		{"uppercase bucket", "MyBucket", nil, `contains 'M'`},
		{"short bucket", "ab", nil, "is 2 characters long"},
		{"bucket with ..", "a..b", nil, `contains ".."`},
		{"bucket as IP", "192.168.1.1", nil, "IP address"},
		{"bucket starting with -", "-abc", nil, "must start and end"},
		{"lease too short", "ok-bucket", []s3lock.Option{s3lock.WithLeaseDuration(time.Second)}, "lease duration 1s is outside"},
		{"lease too long", "ok-bucket", []s3lock.Option{s3lock.WithLeaseDuration(31 * 24 * time.Hour)}, "is outside"},
		{"renew not below lease", "ok-bucket", []s3lock.Option{s3lock.WithLeaseDuration(10 * time.Second), s3lock.WithRenewInterval(6 * time.Second)}, "more than half the lease duration"},
		{"renew zero", "ok-bucket", []s3lock.Option{s3lock.WithRenewInterval(0)}, "shorter than 100ms"},
		{"history zero", "ok-bucket", []s3lock.Option{s3lock.WithHistory(0)}, "history 0 is outside"},
		{"history too long", "ok-bucket", []s3lock.Option{s3lock.WithHistory(501)}, "history 501 is outside"},
		{"empty holder", "ok-bucket", []s3lock.Option{s3lock.WithHolder(" ")}, "holder is empty"},
		{"holder with newline", "ok-bucket", []s3lock.Option{s3lock.WithHolder("a\nb")}, "control or format characters"},
		{"poll too fast", "ok-bucket", []s3lock.Option{s3lock.WithPollInterval(time.Millisecond)}, "poll interval"},
		{"bad owner", "ok-bucket", []s3lock.Option{s3lock.WithExpectedBucketOwner("abc")}, "12-digit"},
		{"nil logger", "ok-bucket", []s3lock.Option{s3lock.WithLogger(nil)}, "logger is nil"},
		{"nil option", "ok-bucket", []s3lock.Option{nil}, "nil Option"},
		{"bad probe prefix", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("../x/")}, "probe prefix"},
		{"probe prefix without its trailing slash", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("locks")}, "ending in '/'"},
		{"probe prefix naming the probe segment itself", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("locks/s3lock-probe/")}, "adds itself"},
		{"probe prefix with the probe segment inside", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("s3lock-probe/x/")}, "reserved"},
		{"probe prefix with an empty segment", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("a//")}, "empty path segment"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s3lock.New(api, tc.bucket, tc.opts...)
			if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			if verr := s3lock.ValidateConfig(tc.bucket, tc.opts...); verr == nil || verr.Error() != err.Error() {
				t.Errorf("ValidateConfig = %v; want New's error %v", verr, err)
			}
		})
	}
	if _, err := s3lock.New(api, "locks--usw2-az1--x-s3"); err != nil {
		t.Errorf("New(a directory bucket) = %v; want it accepted (listed whole: TestDirectoryBuckets_*)", err)
	}
	if _, err := s3lock.New(nil, "ok-bucket"); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("New(nil api) = %v; want ErrInvalidConfig", err)
	}
	if err := s3lock.ValidateConfig("ok-bucket", s3lock.WithProbePrefix("locks/")); err != nil {
		t.Errorf("ValidateConfig of good options = %v; want nil", err)
	}
}
