package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/skewclock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

const (
	// retryBackoffMax caps the S3 SDK's backoff between retries: the store
	// is on loopback, so a short backoff rides out a restart in a few tries.
	retryBackoffMax = 100 * time.Millisecond
	// acquireRetry is how long the worker waits after an Acquire that
	// failed for another reason than its context (a store refusing access,
	// say), so a broken setup does not spin.
	acquireRetry = 200 * time.Millisecond
	// releaseTimeout bounds the release at the end of a lease, on a
	// context of its own so that SIGTERM does not skip it. Release gives
	// up at the lease's trust deadline anyway.
	releaseTimeout = 10 * time.Second
)

// worker is one process's state.
type worker struct {
	cfg config
	api *s3.Client
	rec *record.Writer
	rng *rand.Rand
	log *slog.Logger
	cs  int // critical sections begun so far
}

// newS3 builds the S3 client: static credentials from the environment,
// path-style requests to the endpoint, no retry quota (a store restart would
// otherwise drain it and fail requests after it is back).
func newS3(c config) *s3.Client {
	return s3.New(s3.Options{
		Region:       c.region,
		BaseEndpoint: aws.String(c.endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
		HTTPClient:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxBackoff = retryBackoffMax
			o.RateLimiter = ratelimit.None
		}),
	})
}

// loop acquires the lock, works under the lease and releases it, until ctx
// ends.
func (w *worker) loop(ctx context.Context, clk *skewclock.Clock) error {
	lock, err := s3lock.New(w.api, w.cfg.bucket,
		s3lock.WithHolder(w.cfg.name),
		s3lock.WithClock(clk),
		s3lock.WithLeaseDuration(w.cfg.lease),
		s3lock.WithRequestTimeout(w.cfg.requestTimeout),
		s3lock.WithPollInterval(w.cfg.poll),
		s3lock.WithLogger(w.log),
	)
	if err != nil {
		return err
	}
	var opts []s3lock.Option
	if w.cfg.broken {
		opts = append(opts, s3lock.WithoutAutoRenew()) // so that the lease surely runs out under it
	}
	for ctx.Err() == nil {
		o := opts
		if w.rng.Float64() < w.cfg.shared {
			o = append(o[:len(o):len(o)], s3lock.WithShared())
		}
		lease, err := lock.Acquire(ctx, w.cfg.lock, o...)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("acquire failed", "err", err)
				sleep(ctx, acquireRetry)
			}
			continue
		}
		if err := w.hold(ctx, lease, clk); err != nil {
			return err
		}
		sleep(ctx, w.random(w.cfg.idle))
	}
	return nil
}

// hold does the critical sections of one lease and releases it.
func (w *worker) hold(ctx context.Context, lease *s3lock.Lease, clk *skewclock.Clock) error {
	trust := leaseTrust(lease, clk)
	if w.cfg.broken {
		trust = func() (int64, bool) { return record.Forever, true }
	}
	until, _ := trust()
	shared := lease.Token().Share != ""
	if err := w.rec.Write(record.Record{Kind: record.Acquired, Epoch: lease.Token().Epoch, Shared: shared, Until: until}); err != nil {
		return err
	}
	n := 1 + w.rng.IntN(w.cfg.sections)
	for range n {
		ok, err := w.section(ctx, lease.Token().Epoch, shared, trust)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	detail := "released"
	if err := lease.Release(rctx); err != nil {
		detail = err.Error()
	}
	return w.rec.Write(record.Record{Kind: record.Ended, Epoch: lease.Token().Epoch, Shared: shared, Detail: detail})
}

// leaseTrust returns the trust check of an SDK lease: until when
// (CLOCK_MONOTONIC) the lease is trusted, and whether it is now. The
// deadline is the lease's ExpiresAt, measured from now on the lock client's
// clock (a monotonic difference, so the clock's skew and jumps do not enter)
// and laid onto CLOCK_MONOTONIC from a reading taken just before: never
// later than the true deadline.
func leaseTrust(lease *s3lock.Lease, clk s3lock.Clock) func() (int64, bool) {
	return func() (int64, bool) {
		m := record.Now()
		left := lease.State().ExpiresAt.Sub(clk.Now())
		if lease.Err() != nil || left <= 0 {
			return 0, false
		}
		return m + int64(left), true
	}
}

// random returns a duration in [0, limit].
func (w *worker) random(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return time.Duration(w.rng.Int64N(int64(limit) + 1))
}
