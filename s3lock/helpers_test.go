package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// newLockClient returns an s3lock client on ns with a fresh S3 client built
// from copts.
func newLockClient(tb testing.TB, ns *s3test.Namespace, holder string, opts []s3lock.Option, copts ...s3test.Option) *s3lock.Client {
	tb.Helper()
	api := ns.Client
	if len(copts) > 0 {
		api = ns.NewClient(tb, copts...)
	}
	opts = append([]s3lock.Option{s3lock.WithHolder(holder)}, opts...)
	c, err := s3lock.New(api, ns.Bucket, opts...)
	if err != nil {
		tb.Fatalf("s3lock.New: %v", err)
	}
	// A test (or benchmark) is over when the client's background history
	// cleanups are: the leak check in TestMain must not find one still
	// deleting on a slow store.
	tb.Cleanup(c.WaitCleanup)
	return c
}

// wantLost checks that err says the lease is over for reason: it matches
// ErrLeaseLost and its *LeaseLostError says why.
func wantLost(t *testing.T, what string, err error, reason s3lock.LossReason) {
	t.Helper()
	var lost *s3lock.LeaseLostError
	if !errors.Is(err, s3lock.ErrLeaseLost) || !errors.As(err, &lost) || lost.Reason != reason {
		t.Errorf("%s = %v; want a lost lease (ErrLeaseLost) with reason %s", what, err, reason)
	}
}

// counting returns a request counter and the client option that installs it.
func counting() (*s3test.Counter, s3test.Option) { return s3test.Counting() }

// mustRelease releases a lease at the end of the test if it is still held.
func mustRelease(t *testing.T, l *s3lock.Lease) {
	t.Helper()
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.Release(ctx); err != nil && l.Err() == nil {
			t.Errorf("releasing %s: %v", l.Token().Key(), err)
		}
	})
}

// waitLimit bounds the waits of testkit.Eventually in this package: a
// safeguard against hangs, not an assertion on speed.
const waitLimit = 10 * time.Second

// cleanupWait is how long to wait for epochs written now to become old enough
// (by the store's clock) to be deleted: the cleanup age, plus up to a second
// lost to Last-Modified's resolution and up to a second by which versitygw's
// Date header lags (its HTTP server refreshes it once a second).
func cleanupWait() time.Duration { return s3lock.CleanupAge() + 2500*time.Millisecond }

func putRaw(t *testing.T, ns *s3test.Namespace, key string, body []byte) {
	t.Helper()
	_, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// observerFunc is an observe.Observer that is a function.
type observerFunc func(observe.Event)

func (f observerFunc) Observe(e observe.Event) { f(e) }
