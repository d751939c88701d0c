package s3lock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
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
		{"max hold zero", "ok-bucket", []s3lock.Option{s3lock.WithMaxHold(0)}, "maximum hold 0s is not positive"},
		{"max hold negative", "ok-bucket", []s3lock.Option{s3lock.WithMaxHold(-time.Minute)}, "maximum hold -1m0s is not positive"},
		{"max hold within the default lease", "ok-bucket", []s3lock.Option{s3lock.WithMaxHold(30 * time.Second)},
			"maximum hold 30s (WithMaxHold) must be longer than the lease duration 1m0s (WithLeaseDuration)"},
		{"max hold equal to the lease", "ok-bucket", []s3lock.Option{s3lock.WithMaxHold(10 * time.Second), s3lock.WithLeaseDuration(10 * time.Second)},
			"maximum hold 10s (WithMaxHold) must be longer than the lease duration 10s"},
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
	if err := s3lock.ValidateConfig("ok-bucket", s3lock.WithHolder("ci")); err != nil {
		t.Errorf("ValidateConfig of good options = %v; want nil", err)
	}
}

// TestOptions_ZeroDurationIsRefusedNotADefault: every duration option
// refuses 0 and negative values with ErrInvalidConfig naming the option and
// its range, rather than taking 0 for a default (issue 36: a CLI lease of 0
// became the SDK's one minute). The one duration with a meaning for 0 is
// WithWait: it tries once, as documented.
func TestOptions_ZeroDurationIsRefusedNotADefault(t *testing.T) {
	c, err := s3lock.New(&s3.Client{}, "ok-bucket") // refused options make no request
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		for _, tc := range []struct {
			name string
			opt  s3lock.Option
			says string
		}{
			{"WithLeaseDuration", s3lock.WithLeaseDuration(d), "lease duration " + d.String() + " is outside [2s, 720h0m0s]"},
			{"WithRenewInterval", s3lock.WithRenewInterval(d), "renew interval " + d.String() + " is shorter than 100ms"},
			{"WithPollInterval", s3lock.WithPollInterval(d), "poll interval " + d.String() + " is outside [10ms, 1m0s]"},
			{"WithRequestTimeout", s3lock.WithRequestTimeout(d), "request timeout " + d.String() + " is shorter than 100ms"},
		} {
			t.Run(tc.name+"("+d.String()+")", func(t *testing.T) {
				if err := s3lock.ValidateConfig("ok-bucket", tc.opt); !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("ValidateConfig(%s(%s)) = %v; want ErrInvalidConfig saying %q", tc.name, d, err, tc.says)
				}
			})
		}
		type acquireCase struct {
			name string
			opt  s3lock.Option
			says string
		}
		cases := []acquireCase{{"WithLeaseDuration", s3lock.WithLeaseDuration(d), "lease duration " + d.String() + " is outside [2s, 720h0m0s]"}}
		if d < 0 { // WithWait(0) tries once: TestOptions_WaitZeroTriesOnce
			cases = append(cases, acquireCase{"WithWait", s3lock.WithWait(d), "wait -1s is negative; 0 tries once"})
		}
		for _, tc := range cases {
			t.Run(tc.name+"("+d.String()+")", func(t *testing.T) {
				_, err := c.Acquire(t.Context(), "lock", tc.opt)
				if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("Acquire(%s(%s)) = %v; want ErrInvalidConfig saying %q", tc.name, d, err, tc.says)
				}
			})
		}
	}
}

// TestOptions_WaitZeroTriesOnce: WithWait(0) is what its documentation says,
// one attempt: a held lock is reported at once, not waited for.
func TestOptions_WaitZeroTriesOnce(t *testing.T) {
	ns := s3test.New(t)
	holder := newLockClient(t, ns, "holder", nil)
	name := ns.Name("wait-zero")
	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	var held *s3lock.HeldError
	other := newLockClient(t, ns, "other", nil)
	if _, err := other.Acquire(t.Context(), name, s3lock.WithWait(0)); !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) ||
		held.Holder != "holder" || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire(WithWait(0)) of a held lock = %v; want ErrHeld by holder at once", err)
	}
}

// TestOptions_OneTypeForTheClientAndEachAcquisition: the options that say
// how a lease is taken, given to New, are the client's defaults for every
// acquisition, and one acquisition's own override them; the options that
// configure the client are refused by an acquisition, naming the option.
func TestOptions_OneTypeForTheClientAndEachAcquisition(t *testing.T) {
	ns := s3test.New(t)
	c := newLockClient(t, ns, "defaults", []s3lock.Option{s3lock.WithLeaseDuration(7 * time.Second),
		s3lock.WithMetadata(map[string]string{"team": "infra"})})
	l, err := c.TryAcquire(t.Context(), ns.Name("defaults"))
	if err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.LeaseDuration != 7*time.Second || st.Metadata["team"] != "infra" {
		t.Errorf("lease %s with metadata %v; want the client's 7s and team=infra", st.LeaseDuration, st.Metadata)
	}
	mustRelease(t, l)
	l, err = c.TryAcquire(t.Context(), ns.Name("own"), s3lock.WithLeaseDuration(9*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.LeaseDuration != 9*time.Second || st.Metadata["team"] != "infra" {
		t.Errorf("lease %s with metadata %v; want its own 9s and the client's team=infra", st.LeaseDuration, st.Metadata)
	}
	mustRelease(t, l)
	for name, opt := range map[string]s3lock.Option{"WithHolder": s3lock.WithHolder("x"),
		"WithClock": s3lock.WithClock(s3test.OffsetClock{}), "WithLogger": s3lock.WithLogger(slog.Default()),
		"WithObserver": s3lock.WithObserver(observerFunc(func(observe.Event) {})), "WithPollInterval": s3lock.WithPollInterval(time.Second),
		"WithRequestTimeout": s3lock.WithRequestTimeout(time.Second), "WithExpectedBucketOwner": s3lock.WithExpectedBucketOwner("123456789012"),
		"WithACL": s3lock.WithACL("private"), "WithServerSideEncryption": s3lock.WithServerSideEncryption(""),
		"WithSSECustomerKey": s3lock.WithSSECustomerKey(make([]byte, 32))} {
		_, err := c.TryAcquire(t.Context(), ns.Name("refused"), opt)
		if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), name+" configures the client: pass it to New") {
			t.Errorf("TryAcquire(%s) = %v; want ErrInvalidConfig naming %s as the client's", name, err, name)
		}
	}
}
