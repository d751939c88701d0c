package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestAccessDeniedAndMissingBucket: a wrong secret key gives ErrAccessDenied at once, saying the secret key is wrong (not naming a permission, which is not the problem); a missing bucket gives ErrNoSuchBucket with a hint.
func TestAccessDeniedAndMissingBucket(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	if ns.Target.AccessKey == "" {
		t.Skip("needs static credentials (S3LOCK_TEST_ACCESS_KEY) to send a wrong secret with")
	}
	var endpoint *string
	if ns.Target.Endpoint != "" {
		endpoint = aws.String(ns.Target.Endpoint)
	}
	wrong := s3.New(s3.Options{
		Region: ns.Target.Region, BaseEndpoint: endpoint, UsePathStyle: ns.Target.PathStyle,
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
	for _, part := range []string{ns.Bucket, name + "/", "secret key", "Forbidden"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not mention %q", err, part)
		}
	}
	if strings.Contains(err.Error(), "s3:ListBucket") {
		t.Errorf("error %q blames a permission for a wrong secret key", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.Acquire(ctx, name); !errors.Is(err, s3lock.ErrAccessDenied) || ctx.Err() != nil {
		t.Errorf("Acquire with a wrong secret = %v; want ErrAccessDenied at once, not a wait", err)
	}

	absent := "no-such-bucket-" + s3test.RandomHex(4)
	if ns.Target.Directory {
		absent += s3test.DirectoryBucketSuffix
	}
	missing, err := s3lock.New(ns.Client, absent)
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

// TestMissingCredentials_AreNotAnOutage: a client without usable
// credentials gets ErrAccessDenied at once, not ErrUnavailable and a wait.
func TestMissingCredentials_AreNotAnOutage(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	noCreds := s3.New(s3.Options{
		Region: ns.Target.Region, BaseEndpoint: aws.String(ns.Target.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials in the environment")
		}),
	})
	c, err := s3lock.New(noCreds, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.Acquire(ctx, ns.Name("x"))
	if !errors.Is(err, s3lock.ErrAccessDenied) || errors.Is(err, s3lock.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Acquire without credentials = %v; want ErrAccessDenied at once", err)
	}
	if !strings.Contains(err.Error(), "no usable credentials") {
		t.Errorf("error %q does not say what to do", err)
	}
}

// TestUnknownAccessKey_IsACredentialsProblem: an access key the store does
// not know is reported as a credentials problem with that hint, whatever
// status and code the store answers it with (versitygw: 404
// XAdminUserNotFound; AWS: 403 InvalidAccessKeyId), never as a missing
// bucket or a store that is not S3.
func TestUnknownAccessKey_IsACredentialsProblem(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	if ns.Target.AccessKey == "" {
		t.Skip("needs static credentials (S3LOCK_TEST_ACCESS_KEY) to know what an unknown key is")
	}
	var endpoint *string
	if ns.Target.Endpoint != "" {
		endpoint = aws.String(ns.Target.Endpoint)
	}
	unknown := s3.New(s3.Options{
		Region: ns.Target.Region, BaseEndpoint: endpoint, UsePathStyle: ns.Target.PathStyle,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAUNKNOWN"+s3test.RandomHex(4), "secret", ""),
	})
	c, err := s3lock.New(unknown, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TryAcquire(t.Context(), ns.Name("unknown-key"))
	if !errors.Is(err, s3lock.ErrAccessDenied) || errors.Is(err, s3lock.ErrNoSuchBucket) {
		t.Fatalf("TryAcquire with an unknown access key = %v; want ErrAccessDenied (a credentials problem)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "access key") || strings.Contains(msg, "not an S3 endpoint") {
		t.Errorf("the error %q should say the access key is unknown to the store, not blame the endpoint", msg)
	}
}
