package s3lock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// BenchmarkAcquireRelease reports the S3 requests one acquisition and one
// release of a free lock cost, counted at the transport, for a lock with one
// prior epoch and one with 5,000. Run with `make bench`.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, prior := range []int{1, 5000} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			s3lock.SetTimingForTest(b, 500*time.Millisecond)
			ns := s3test.New(b)
			counter, withCounter := counting()
			c := newLockClient(b, ns, "bench", nil, withCounter)
			name := ns.Name("bench")
			prepareHistory(b, ns, c, name, prior)
			var acquire, release int
			b.ResetTimer()
			for range b.N {
				counter.Reset()
				l, err := c.TryAcquire(b.Context(), name)
				if err != nil {
					b.Fatal(err)
				}
				acquire += counter.Total()
				counter.Reset()
				if err := l.Release(b.Context()); err != nil {
					b.Fatal(err)
				}
				release += counter.Total()
			}
			b.ReportMetric(float64(acquire)/float64(b.N), "acquire-requests/op")
			b.ReportMetric(float64(release)/float64(b.N), "release-requests/op")
			b.ReportMetric(float64(acquire+release)/float64(b.N), "requests/op")
		})
	}
}

// BenchmarkHandoff measures how long a waiting Acquire takes to hold the lock
// after the holder releases it, and how many requests per second the waiter
// spends meanwhile, for several hold times. One op is one hold and handoff.
// Target on loopback: a median under 250ms whatever the hold time, at no more
// than ~10 requests/s per waiter.
func BenchmarkHandoff(b *testing.B) {
	for _, hold := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 6 * time.Second} {
		b.Run("hold="+hold.String(), func(b *testing.B) {
			ns := s3test.New(b)
			name := ns.Name("handoff")
			holder := newLockClient(b, ns, "holder", nil)
			counter, withCounter := counting()
			waiter := newLockClient(b, ns, "waiter", nil, withCounter)
			var handoffs []time.Duration
			var requests int
			var waited time.Duration
			b.ResetTimer()
			for range b.N {
				l, err := holder.TryAcquire(b.Context(), name)
				if err != nil {
					b.Fatal(err)
				}
				type result struct {
					l   *s3lock.Lease
					err error
					at  time.Time
				}
				got := make(chan result, 1)
				counter.Reset()
				start := time.Now()
				go func() {
					wl, err := waiter.Acquire(context.Background(), name)
					got <- result{wl, err, time.Now()}
				}()
				time.Sleep(hold)
				released := time.Now()
				if err := l.Release(b.Context()); err != nil {
					b.Fatal(err)
				}
				r := <-got
				if r.err != nil {
					b.Fatal(r.err)
				}
				handoffs = append(handoffs, r.at.Sub(released))
				requests += counter.Total()
				waited += r.at.Sub(start)
				if err := r.l.Release(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(handoffs)
			b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds())/1000, "handoff-median-ms")
			b.ReportMetric(float64(handoffs[len(handoffs)*9/10].Microseconds())/1000, "handoff-p90-ms")
			b.ReportMetric(float64(requests)/waited.Seconds(), "waiter-requests/s")
		})
	}
}

// BenchmarkWatch reports what following a lock costs: a watcher at the
// default poll interval while the lock changes hands, one op being one hold
// of half a second and its release. It reports the watcher's requests per
// second and how many of the lock's changes (acquired, released) it saw.
func BenchmarkWatch(b *testing.B) {
	ns := s3test.New(b)
	name := ns.Name("watched")
	counter, withCounter := counting()
	watcher := newLockClient(b, ns, "watcher", nil, withCounter)
	holder := newLockClient(b, ns, "holder", nil)
	ctx, stop := context.WithCancel(b.Context())
	seen := make(chan struct{}, 1<<16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, err := range watcher.Watch(ctx, name) {
			if err != nil {
				return
			}
			seen <- struct{}{}
		}
	}()
	<-seen // the first state
	counter.Reset()
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		l, err := holder.TryAcquire(b.Context(), name)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := l.Release(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the last release, seen
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	<-done
	b.ReportMetric(float64(counter.Total())/elapsed.Seconds(), "watcher-requests/s")
	b.ReportMetric(float64(len(seen))/float64(2*b.N), "changes-seen/change")
}
