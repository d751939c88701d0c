package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

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
		{"holder with newline", "ok-bucket", []s3lock.Option{s3lock.WithHolder("a\nb")}, "control characters"},
		{"poll too fast", "ok-bucket", []s3lock.Option{s3lock.WithPollInterval(time.Millisecond)}, "poll interval"},
		{"bad owner", "ok-bucket", []s3lock.Option{s3lock.WithExpectedBucketOwner("abc")}, "12-digit"},
		{"nil logger", "ok-bucket", []s3lock.Option{s3lock.WithLogger(nil)}, "logger is nil"},
		{"nil option", "ok-bucket", []s3lock.Option{nil}, "nil Option"},
		{"bad probe prefix", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("../x/")}, "probe prefix"},
		{"probe prefix without the probe segment", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("probes/")}, `must be "s3lock-probe/"`},
		{"probe prefix under a bad prefix", "ok-bucket", []s3lock.Option{s3lock.WithProbePrefix("a//s3lock-probe/")}, "empty path segment"},
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
	if _, err := s3lock.New(nil, "ok-bucket"); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("New(nil api) = %v; want ErrInvalidConfig", err)
	}
	if err := s3lock.ValidateConfig("ok-bucket", s3lock.WithProbePrefix("locks/"+s3lock.DefaultProbePrefix)); err != nil {
		t.Errorf("ValidateConfig of good options = %v; want nil", err)
	}
}

// TestValidatePrefix: the one rule for a lock-name prefix (List, status
// --prefix, the s3lock_leases data source) accepts the beginning of every
// valid name and refuses what no name can start with.
func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "deploy/", "deploy/pr", "team/db/", "a", "x/s3lock-pro", "v1.2_x-y=z+w@h,o:s!t~/"} {
		if err := s3lock.ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v; want nil", p, err)
		}
	}
	for p, want := range map[string]string{
		"/abs":                   "starts with a slash",
		"a//":                    "empty path segment",
		"a//b":                   "empty path segment",
		"../x":                   `".." segment`,
		"a/./":                   `"." segment`,
		"x/s3lock-probe/":        "reserved for Verify",
		"has space":              "contains ' '",
		"bad\xffutf8":           "not valid UTF-8",
		strings.Repeat("n", 513): "513 bytes long",
	} {
		err := s3lock.ValidatePrefix(p)
		var ne *s3lock.NameError
		if !errors.Is(err, s3lock.ErrInvalidName) || !errors.As(err, &ne) || !ne.Prefix || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "prefix") {
			t.Errorf("ValidatePrefix(%q) = %v; want an invalid-prefix error mentioning %q", p, err, want)
		}
	}
	c, err := s3lock.New(&s3.Client{}, "some-bucket") // never called: the prefix is refused first
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context(), "/abs"); !errors.Is(err, s3lock.ErrInvalidName) {
		t.Errorf("List with a prefix no name starts with = %v; want ErrInvalidName before any request", err)
	}
}

func TestValidateName(t *testing.T) {
	valid := []string{"locks", "team/db/migrate", "a", "v1.2_x-y=z+w@h,o:s!t~", strings.Repeat("n", s3lock.MaxNameLength)}
	for _, n := range valid {
		if err := s3lock.ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v; want nil", n, err)
		}
	}
	invalid := map[string]string{
		"":                              "empty",
		"/abs":                          "starts with a slash",
		"trail/":                        "ends with a slash",
		"a//b":                          "empty path segment",
		"../escape":                     `".." segment`,
		"a/../../b":                     `".." segment`,
		"./a":                           `"." segment`,
		"a/lock-0000000001.json":        "looks like an epoch object",
		"x/s3lock-probe/y":              "reserved for Verify",
		"s3lock-probe":                  "reserved for Verify",
		"has space":                     "contains ' '",
		"tab\tname":                     `contains '\t'`,
		"back\\slash":                   `contains '\\'`,
		"bad\xffutf8":                   "not valid UTF-8",
		strings.Repeat("n", 513):        "513 bytes long",
		"percent%2e%2e":                 "contains '%'",
		"question?":                     "contains '?'",
		"star*":                         "contains '*'",
		"newline\n":                     `contains '\n'`,
		"unicode-é":                     "contains 'é'",
		"lock-1.json/inner":             "looks like an epoch object",
		"nested/lock-whatever.json/foo": "looks like an epoch object",
	}
	for n, want := range invalid {
		err := s3lock.ValidateName(n)
		var ne *s3lock.NameError
		if !errors.Is(err, s3lock.ErrInvalidName) || !errors.As(err, &ne) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateName(%q) = %v; want ErrInvalidName mentioning %q", n, err, want)
		}
	}
}

func TestBadNames_RejectedByEveryCall(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	ctx := t.Context()
	calls := map[string]func(string) error{
		"TryAcquire":   func(n string) error { _, err := c.TryAcquire(ctx, n); return err },
		"Acquire":      func(n string) error { _, err := c.Acquire(ctx, n); return err },
		"Current":      func(n string) error { _, err := c.Current(ctx, n); return err },
		"ForceRelease": func(n string) error { return c.ForceRelease(ctx, n, 1) },
		"Adopt":        func(n string) error { _, err := c.Adopt(ctx, n, 1); return err },
	}
	for call, fn := range calls {
		for _, n := range []string{"", "../outside", "a//b"} {
			if err := fn(n); !errors.Is(err, s3lock.ErrInvalidName) {
				t.Errorf("%s(%q) = %v; want ErrInvalidName", call, n, err)
			}
		}
	}
	if keys := s3test.Keys(t, ns.Client, ns.Bucket, ""); len(keys) != 0 {
		t.Errorf("invalid names wrote %v", keys)
	}
}

func putRaw(t *testing.T, ns *s3test.Namespace, key string, body []byte) {
	t.Helper()
	_, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCorruptLeaseObjects: an epoch object that is not a lease gets a clear
// error naming the bucket and key, from every reader, and ForceRelease can
// replace it.
func TestCorruptLeaseObjects(t *testing.T) {
	t.Parallel()
	huge := append([]byte(`{"leaderId":"x","pad":"`), bytes.Repeat([]byte("a"), s3lock.MaxPayloadBytes)...)
	huge = append(huge, []byte(`"}`)...)
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte("hello, world"), "not a JSON object"},
		{"JSON array", []byte(`[1,2,3]`), "not a JSON object"},
		{"truncated JSON", []byte(`{"leaderId":"x",`), "not a lease JSON document"},
		{"wrong types", []byte(`{"leaderId":7,"validityMs":"soon"}`), "not a lease JSON document"},
		{"huge", huge, "bytes"},
		{"negative validity", []byte(`{"leaderId":"x","validityMs":-5000,"expired":false}`), "validityMs is negative"},
		{"absurd validity", []byte(`{"leaderId":"x","validityMs":9000000000000000,"expired":false}`), "longer than a year"},
		{"wrong epoch inside", []byte(`{"leaderId":"x","validityMs":1000,"epoch":7}`), "claims epoch 7"},
		{"future format", []byte(`{"leaderId":"x","validityMs":1000,"s3lock":99}`), "newer s3lock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := s3test.New(t)
			c := newLockClient(t, ns, "reader", nil)
			name := ns.Name("corrupt")
			key := s3lock.Key(name, 1)
			putRaw(t, ns, key, tc.body)
			check := func(call string, err error) {
				t.Helper()
				var ce *s3lock.CorruptLeaseError
				if !errors.Is(err, s3lock.ErrCorruptLease) || !errors.As(err, &ce) {
					t.Fatalf("%s = %v; want ErrCorruptLease", call, err)
				}
				for _, part := range []string{ns.Bucket, key, tc.want} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("%s error %q does not mention %q", call, err, part)
					}
				}
			}
			_, err := c.TryAcquire(t.Context(), name)
			check("TryAcquire", err)
			_, err = c.Acquire(t.Context(), name)
			check("Acquire", err)
			_, err = c.Current(t.Context(), name)
			check("Current", err)
			states, err := c.List(t.Context(), ns.Name(""))
			if err != nil || len(states) != 1 || states[0].Name != name || states[0].Held || states[0].Phase() != s3lock.PhaseUnreadable {
				t.Fatalf("List = %+v, %v; want the lock listed, not held, unreadable", states, err)
			}
			check("List's State.Err", states[0].Err)

			if err := c.ForceRelease(t.Context(), name, 1); err != nil {
				t.Fatalf("ForceRelease of the corrupt epoch: %v", err)
			}
			l, err := c.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("TryAcquire after ForceRelease: %v", err)
			}
			mustRelease(t, l)
			if l.Epoch() != 2 {
				t.Errorf("epoch = %d; want 2", l.Epoch())
			}
		})
	}
}

// TestSeedFormatIsRead: an epoch object in the article's format (leaderId,
// validityMs, expired) is understood.
func TestSeedFormatIsRead(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "reader", nil)
	name := ns.Name("locks")
	putRaw(t, ns, s3lock.Key(name, 1), []byte(`{"leaderId":"node-1","validityMs":60000,"expired":false}`))
	_, err := c.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "node-1" || held.Epoch != 1 {
		t.Fatalf("TryAcquire over a seed-format lease = %v; want held by node-1", err)
	}
	putRaw(t, ns, s3lock.Key(name, 2), []byte(`{"leaderId":"node-1","validityMs":0,"expired":true}`))
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil || l.Epoch() != 3 {
		t.Fatalf("TryAcquire over a released seed-format lease = %v, %v; want epoch 3", l, err)
	}
	mustRelease(t, l)
}

func TestEpochAtMaximum(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	name := ns.Name("full")
	putRaw(t, ns, s3lock.Key(name, s3lock.MaxEpoch), s3lock.EncodeReleasedForTest("old", s3lock.MaxEpoch, time.Minute))
	_, err := c.TryAcquire(t.Context(), name)
	if !errors.Is(err, s3lock.ErrEpochExhausted) || !strings.Contains(err.Error(), "9999999999") {
		t.Fatalf("TryAcquire at the maximum epoch = %v; want ErrEpochExhausted", err)
	}
	if _, err := c.Acquire(t.Context(), name); !errors.Is(err, s3lock.ErrEpochExhausted) {
		t.Fatalf("Acquire at the maximum epoch = %v; want ErrEpochExhausted at once", err)
	}
}

// TestForeignKeysAreIgnored: keys under a lock's prefix that are not epoch
// objects neither break acquisition nor count as epochs.
func TestForeignKeysAreIgnored(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	name := ns.Name("mixed")
	for _, k := range []string{
		name + "/README.txt",
		name + "/lock-abc.json",
		name + "/lock-00000000001.json", // eleven digits
		name + "/lock-0000000000.json",  // epoch 0
		name + "/lock-0000000009.json.bak",
		name + "/lock-00000000x9.json",
	} {
		putRaw(t, ns, k, []byte("not a lease"))
	}
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire among foreign keys: %v", err)
	}
	mustRelease(t, l)
	if l.Epoch() != 1 {
		t.Errorf("epoch = %d; want 1", l.Epoch())
	}
	states, err := c.List(t.Context(), ns.Name(""))
	if err != nil || len(states) != 1 || states[0].Name != name {
		t.Errorf("List = %+v, %v; want only %s", states, err, name)
	}
}

func TestAccessDeniedAndMissingBucket(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server's credentials")
	}
	wrong := s3.New(s3.Options{
		Region: ns.Target.Region, BaseEndpoint: aws.String(ns.Target.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ns.Target.AccessKey, "wrong-secret", ""),
	})
	c, err := s3lock.New(wrong, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name("denied")
	_, err = c.TryAcquire(t.Context(), name)
	var oe *s3lock.OpError
	if !errors.Is(err, s3lock.ErrAccessDenied) || !errors.As(err, &oe) {
		t.Fatalf("TryAcquire with a wrong secret = %v; want ErrAccessDenied", err)
	}
	for _, part := range []string{ns.Bucket, name + "/lock-", "s3:ListBucket", "Forbidden"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not mention %q", err, part)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.Acquire(ctx, name); !errors.Is(err, s3lock.ErrAccessDenied) || ctx.Err() != nil {
		t.Errorf("Acquire with a wrong secret = %v; want ErrAccessDenied at once, not a wait", err)
	}

	missing, err := s3lock.New(ns.Client, "no-such-bucket-"+s3test.RandomHex(4))
	if err != nil {
		t.Fatal(err)
	}
	_, err = missing.TryAcquire(t.Context(), "x")
	if !errors.Is(err, s3lock.ErrNoSuchBucket) || !strings.Contains(err.Error(), "create the bucket") {
		t.Errorf("TryAcquire in a missing bucket = %v; want ErrNoSuchBucket with a hint", err)
	}
}

// TestTransientFailures: Acquire waits through 5xx answers until its context
// ends and then reports the last cause; TryAcquire reports them as
// ErrUnavailable, distinct from ErrHeld. The SDK's own "retry quota
// exceeded" counts as transient too.
func TestTransientFailures(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1, s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 1})
	wrap := s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) })
	c := newLockClient(t, ns, "x", nil, wrap)
	name := ns.Name("flaky")

	_, err := c.TryAcquire(t.Context(), name)
	if !errors.Is(err, s3lock.ErrUnavailable) || errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("TryAcquire against a failing store = %v; want ErrUnavailable, not ErrHeld", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, name)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, s3lock.ErrUnavailable) {
		t.Fatalf("Acquire against a failing store = %v; want DeadlineExceeded and the last ErrUnavailable", err)
	}

	// A store that does not answer within the request timeout is
	// unavailable too, not a caller's cancellation.
	slow := s3test.NewFaults(2, s3test.Rule{Fault: s3test.Latency, Probability: 1, Delay: 2 * time.Second, Fixed: true})
	impatient := newLockClient(t, ns, "z", []s3lock.Option{s3lock.WithRequestTimeout(200 * time.Millisecond)}, s3test.WithoutRetries(),
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return slow.Wrap(next) }))
	_, err = impatient.TryAcquire(t.Context(), name)
	if !errors.Is(err, s3lock.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("TryAcquire against a store that does not answer = %v; want ErrUnavailable naming the timeout", err)
	}

	quota := newLockClient(t, ns, "y", nil, wrap, s3test.WithRetryQuota(5))
	// Every retry costs more than the 5 tokens there are: the SDK gives up
	// with its quota error at the first failure.
	_, err = quota.TryAcquire(t.Context(), name)
	if !errors.Is(err, s3lock.ErrUnavailable) || !strings.Contains(err.Error(), "retry quota exceeded") {
		t.Fatalf("TryAcquire with an exhausted retry quota = %v; want ErrUnavailable naming the quota", err)
	}
	f.Disable()
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := quota.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire once the store recovers: %v", err)
	}
	mustRelease(t, l)
}
