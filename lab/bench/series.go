package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The series: many s3lock handoffs after a release, enough for a p99 that
// is not just the slowest of a handful. Pairs of handles pass one lock back
// and forth, each pair on a lock of its own, all pairs at once; each handle
// talks to the store through its own tap, and every handoff is read off the
// wire as the hold-time runs are (analyze).

// Holds of the series: drawn between these for each handoff, long enough
// that the waiter, which starts within a poll interval of the acquisition,
// is polling when the release comes.
const (
	seriesHoldMin = 500 * time.Millisecond
	seriesHoldMax = time.Second
	// seriesWaitLimit bounds each waiting Acquire of the series: a release
	// that failed leaves the lock to lapse (a 60 s lease).
	seriesWaitLimit = 3 * s3lock.DefaultLeaseDuration
)

// seriesHandle is one handle of a pair: an s3lock client that reaches the
// store through its own tap.
type seriesHandle struct {
	tap   *tap
	locks *s3lock.Client
}

// measureSeries runs cfg.series handoffs in cfg.seriesPairs pairs.
func (l *lab) measureSeries(ctx context.Context, pr *profileResult) error {
	n, pairs := l.cfg.series, min(l.cfg.seriesPairs, l.cfg.series)
	if n == 0 {
		return nil
	}
	// Taps (and their streams of delays) and schedules in a fixed order.
	handles := make([][2]*seriesHandle, pairs)
	for i := range handles {
		for j := range handles[i] {
			h, err := l.newSeriesHandle(ctx, fmt.Sprintf("bench-series-%d-%d", i, j))
			if err != nil {
				return err
			}
			defer h.tap.close()
			handles[i][j] = h
		}
	}
	out := make([][]handoff, pairs)
	errs := make([]error, pairs)
	var wg sync.WaitGroup
	for i := range pairs {
		count := n / pairs
		if i < n%pairs {
			count++
		}
		rng := rand.New(rand.NewPCG(l.cfg.seed, l.tapSeq.Add(1)))
		name := fmt.Sprintf("%s/series/%d", l.profile.Name, i)
		wg.Go(func() { out[i], errs[i] = passBack(ctx, name, handles[i], count, rng) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("s3lock handoff series: %w", err)
	}
	for _, hs := range out {
		pr.series = append(pr.series, hs...)
	}
	l.logf("s3lock, %d handoffs (%d pairs): p50 %s, p99 %s", len(pr.series), pairs,
		percentile(gapsOf(pr.series), 50).Round(time.Millisecond), percentile(gapsOf(pr.series), 99).Round(time.Millisecond))
	return nil
}

func (l *lab) newSeriesHandle(ctx context.Context, holder string) (*seriesHandle, error) {
	t, err := l.newTap()
	if err != nil {
		return nil, err
	}
	api, err := newS3Client(ctx, t.URL, nil)
	if err == nil {
		var c *s3lock.Client
		if c, err = lockClient(api, holder); err == nil {
			return &seriesHandle{tap: t, locks: c}, nil
		}
	}
	t.close()
	return nil, err
}

// acquired is what a waiting Acquire returned.
type acquired struct {
	lease *s3lock.Lease
	err   error
}

// passBack makes the pair's handles hand the lock name to each other n
// times: the holder holds for a drawn time; the other starts a waiting
// Acquire at a drawn moment within a poll interval after the holder took
// the lock; the holder releases; the waiter acquires and holds in turn.
func passBack(ctx context.Context, name string, pair [2]*seriesHandle, n int, rng *rand.Rand) ([]handoff, error) {
	holder, waiter := pair[0], pair[1]
	lease, err := holder.locks.TryAcquire(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []handoff
	for range n {
		arrive := time.Duration(rng.Int64N(int64(pollInterval)))
		hold := seriesHoldMin + time.Duration(rng.Int64N(int64(seriesHoldMax-seriesHoldMin)))
		time.Sleep(arrive)
		waiter.tap.rec.reset() // its requests from now on are its wait's
		got := make(chan acquired, 1)
		wctx, cancel := context.WithTimeout(ctx, seriesWaitLimit)
		go func() {
			l, err := waiter.locks.Acquire(wctx, name)
			got <- acquired{l, err}
		}()
		time.Sleep(hold - arrive)
		var letGo time.Time
		releaseErr := lease.Release(ctx)
		if releaseErr != nil {
			letGo = lastPut(holder.tap.rec.take()) // measured as in s3lockHandoff: the lease lapses
		}
		next := <-got
		cancel()
		if next.err != nil {
			return out, next.err
		}
		h, err := analyze(s3lockOps, holder.tap.rec.take(), waiter.tap.rec.take(), letGo, time.Time{})
		if err != nil {
			return out, errors.Join(err, next.lease.Release(ctx))
		}
		h.system, h.hold = sysS3lock, hold
		if releaseErr != nil {
			h.releaseErr = releaseErr.Error()
		}
		out = append(out, h)
		lease, holder, waiter = next.lease, waiter, holder
	}
	return out, lease.Release(ctx)
}

// gapsOf returns the handoffs' times.
func gapsOf(hs []handoff) []time.Duration {
	var ds []time.Duration
	for _, h := range hs {
		ds = append(ds, h.gap)
	}
	return ds
}
