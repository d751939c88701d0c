package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// measureScale runs the scale measurements in-process, each participant
// with its own s3lock client over one recording S3 client.
func (l *lab) measureScale(ctx context.Context, res *results) error {
	rec := &recorder{}
	api, err := newS3Client(ctx, l.endpoint, rec)
	if err != nil {
		return err
	}
	if res.uncontended, err = uncontended(ctx, api, rec); err != nil {
		return err
	}
	for _, order := range []s3lock.Order{s3lock.OrderNone, s3lock.OrderFIFO} {
		for _, n := range l.cfg.waiters {
			w, err := measureWaiters(ctx, api, rec, n, l.cfg.waitersFor, l.cfg.waitersHold, order)
			if err != nil {
				return fmt.Errorf("%d waiters, order %s: %w", n, order, err)
			}
			logf("%d waiters, order %s: %d handoffs, p50 %s, p99 %s, %.0f requests/s, %.1f losing creates per handoff",
				n, order, len(w.handoffs), percentile(w.handoffs, 50).Round(time.Millisecond),
				percentile(w.handoffs, 99).Round(time.Millisecond), w.rate(), w.losersPerHandoff())
			res.waiters = append(res.waiters, w)
		}
	}
	if res.many, err = measureMany(ctx, api, rec, l.cfg.locks, l.cfg.setupWorkers); err != nil {
		return err
	}
	logf("%d locks: set up in %s, List in %s with %.0f requests", res.many.locks,
		res.many.setup.Round(time.Millisecond), res.many.list.Round(time.Millisecond), res.many.listRequests.total())
	if res.contended, err = measureContended(ctx, api, rec, l.cfg.contenders, l.cfg.contendFor); err != nil {
		return err
	}
	logf("%d contenders: %.0f acquisitions/s", l.cfg.contenders, res.contended.perSecond())
	return nil
}

// uncontendedRounds is how many times uncontended acquires and releases a
// free lock.
const uncontendedRounds = 20

// uncontended returns the requests of one acquisition and release of a
// free lock that has been held before (LIST, GET, PUT; PUT), averaged.
func uncontended(ctx context.Context, api s3lock.S3API, rec *recorder) (counts, error) {
	c, err := lockClient(api, "bench-solo")
	if err != nil {
		return counts{}, err
	}
	rec.reset()
	for range uncontendedRounds {
		l, err := c.TryAcquire(ctx, "solo")
		if err != nil {
			return counts{}, err
		}
		if err := l.Release(ctx); err != nil {
			return counts{}, err
		}
	}
	return countOf(rec.take()).per(uncontendedRounds), nil
}

// waitersResult is one run of n waiters on one lock.
type waitersResult struct {
	waiters  int
	order    s3lock.Order
	handoffs []time.Duration
	requests counts
	duration time.Duration
	// losers counts epoch creates refused (412): waiters that saw the
	// release, tried the next epoch and lost the race to another.
	losers int
}

func (w waitersResult) rate() float64 { return w.requests.total() / w.duration.Seconds() }

// perWaiter is the request rate of one waiting handle.
func (w waitersResult) perWaiter() float64 { return w.rate() / float64(w.waiters+1) }

func (w waitersResult) losersPerHandoff() float64 {
	return float64(w.losers) / float64(max(len(w.handoffs), 1))
}

// losingCreates counts the refused creates of epoch objects in evs, except
// of epoch 1: at the start, all handles race for a lock nobody holds and
// nobody waits for yet.
func losingCreates(evs []event) int {
	n := 0
	for _, e := range evs {
		if e.op == "PutObject" && e.status == http.StatusPreconditionFailed && strings.Contains(e.key, "/lock-0") &&
			!strings.HasSuffix(e.key, "/lock-0000000001.json") {
			n++
		}
	}
	return n
}

// measureWaiters runs n+1 handles on one lock for d: each acquires (waiting
// with Acquire), holds for hold, releases, and joins the waiters again once
// someone else holds the lock, so n are always waiting. A handoff is timed
// from the moment the holder sends its release to the moment the next
// holder's Acquire returns.
func measureWaiters(ctx context.Context, api s3lock.S3API, rec *recorder, n int, d, hold time.Duration, order s3lock.Order) (waitersResult, error) {
	name := fmt.Sprintf("waiters-%s/%d", order, n)
	b := &baton{next: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	rec.reset()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for i := range n + 1 {
		c, err := lockClient(api, fmt.Sprintf("bench-waiter-%d", i))
		if err != nil {
			return waitersResult{}, err
		}
		wg.Go(func() { errs <- participate(ctx, c, name, hold, b, order) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return waitersResult{}, err
		}
	}
	// Counted from the first acquisition: before it, all n+1 handles race
	// for a lock nobody holds and nobody waits for, in any order.
	from, end := b.firstAcquired(), start.Add(d)
	if from.IsZero() || !from.Before(end) {
		return waitersResult{}, errors.New("no handle acquired the lock")
	}
	evs := sentBetween(rec.take(), from, end)
	return waitersResult{waiters: n, order: order, handoffs: b.handoffs, requests: countOf(evs), duration: end.Sub(from),
		losers: losingCreates(evs)}, nil
}

// participate is one handle of measureWaiters, until ctx ends.
func participate(ctx context.Context, c *s3lock.Client, name string, hold time.Duration, b *baton, order s3lock.Order) error {
	for {
		l, err := c.Acquire(ctx, name, s3lock.WithOrder(order))
		if ctx.Err() != nil {
			if err == nil {
				return l.Release(context.WithoutCancel(ctx))
			}
			return nil
		}
		if err != nil {
			return err
		}
		b.acquired()
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		next := b.releasing()
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		}
	}
}

// baton times handoffs between the participants of measureWaiters.
type baton struct {
	mu       sync.Mutex
	released time.Time     // when the holder sent its release; zero once taken
	first    time.Time     // the first acquisition
	next     chan struct{} // closed at the next acquisition
	handoffs []time.Duration
}

// releasing notes that the holder is sending its release, and returns a
// channel that closes when someone has acquired the lock after it.
func (b *baton) releasing() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = time.Now()
	return b.next
}

func (b *baton) firstAcquired() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first
}

func (b *baton) acquired() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first.IsZero() {
		b.first = now
	}
	if !b.released.IsZero() {
		b.handoffs = append(b.handoffs, now.Sub(b.released))
		b.released = time.Time{}
	}
	close(b.next)
	b.next = make(chan struct{})
}

// manyResult is the List measurement.
type manyResult struct {
	locks         int
	setup         time.Duration
	setupRequests counts
	workers       int
	list          time.Duration
	listRequests  counts
}

// manyPrefix is where measureMany creates its locks, manyGroups groups of
// them (many/07/lock-00107): versitygw's posix backend keeps a prefix as a
// directory, and with 10,000 siblings in one the setup's LISTs ran at half
// the rate, which measures the store, not s3lock.
const (
	manyPrefix = "many/"
	manyGroups = 100
)

// manyName is the name of the i-th lock of measureMany.
func manyName(i int) string { return fmt.Sprintf("%s%02d/lock-%05d", manyPrefix, i%manyGroups, i) }

// measureMany creates n held locks under one prefix, with workers
// concurrent TryAcquires (each lease detached, so nothing renews them), then
// times one List of the prefix.
func measureMany(ctx context.Context, api s3lock.S3API, rec *recorder, n, workers int) (manyResult, error) {
	c, err := lockClient(api, "bench-many")
	if err != nil {
		return manyResult{}, err
	}
	m := manyResult{locks: n, workers: workers}
	rec.reset()
	start := time.Now()
	if err := forEach(ctx, n, workers, func(i int) error {
		l, err := c.TryAcquire(ctx, manyName(i), s3lock.WithoutAutoRenew())
		if err == nil {
			l.Detach()
		}
		return err
	}); err != nil {
		return m, err
	}
	m.setup, m.setupRequests = time.Since(start), countOf(rec.take())
	rec.reset()
	start = time.Now()
	states, err := c.List(ctx, manyPrefix)
	m.list, m.listRequests = time.Since(start), countOf(rec.take())
	if err == nil && len(states) != n {
		err = fmt.Errorf("listing %s found %d locks, not %d", manyPrefix, len(states), n)
	}
	return m, err
}

// forEach calls fn(0) to fn(n-1), workers at a time, and returns the first
// error.
func forEach(ctx context.Context, n, workers int, fn func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// contendedResult is the acquisitions-per-second measurement.
type contendedResult struct {
	contenders   int
	duration     time.Duration
	acquisitions []int // per contender
	requests     counts
}

func (c contendedResult) total() int {
	n := 0
	for _, a := range c.acquisitions {
		n += a
	}
	return n
}

func (c contendedResult) perSecond() float64 { return float64(c.total()) / c.duration.Seconds() }

// measureContended runs n handles on one lock for d, each acquiring (with a
// waiting Acquire) and releasing at once, in a loop.
func measureContended(ctx context.Context, api s3lock.S3API, rec *recorder, n int, d time.Duration) (contendedResult, error) {
	res := contendedResult{contenders: n, duration: d, acquisitions: make([]int, n)}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	rec.reset()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		c, err := lockClient(api, fmt.Sprintf("bench-contender-%d", i))
		if err != nil {
			return res, err
		}
		wg.Go(func() {
			for {
				l, err := c.Acquire(ctx, "contended")
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				if time.Since(start) < d {
					res.acquisitions[i]++
				}
				if err := l.Release(context.WithoutCancel(ctx)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	res.requests = countOf(sentBetween(rec.take(), start, start.Add(d)))
	return res, errors.Join(errs...)
}
