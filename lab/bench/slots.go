package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// slotsResult is the slot acquisition measurement: TryAcquires on a lock of
// n slots (s3lock.Slots), timed and counted at one tap.
type slotsResult struct {
	n      int
	rounds int
	free   []slotTry // TryAcquires that took a slot
	full   []slotTry // TryAcquires on a lock whose every slot was held
}

// slotTry is one TryAcquire of a slot lock.
type slotTry struct {
	took     time.Duration // the call, as its caller waited for it
	requests int           // its requests (the background history cleanup's DeleteObjects excluded)
	held     int           // slots held when it was called
}

// measureSlots fills a lock of cfg.slots slots one TryAcquire at a time,
// then calls TryAcquire as many times on the full lock, and releases every
// slot; cfg.slotRounds times. Each holder has its own s3lock client; all
// reach the store through one tap and run one after another. A first
// acquisition and release, not counted, makes the lock a slot lock (it
// writes the marker).
func (l *lab) measureSlots(ctx context.Context, pr *profileResult) error {
	n := l.cfg.slots
	pr.slots = slotsResult{n: n, rounds: l.cfg.slotRounds}
	if l.cfg.slotRounds == 0 {
		return nil
	}
	t, err := l.newTap()
	if err != nil {
		return err
	}
	defer t.close()
	api, err := newS3Client(ctx, t.URL, nil)
	if err != nil {
		return err
	}
	clients := make([]*s3lock.Client, n+1) // n holders, and one that finds the lock full
	for i := range clients {
		if clients[i], err = lockClient(api, fmt.Sprintf("bench-slot-%d", i)); err != nil {
			return err
		}
	}
	name := l.profile.Name + "/slots"
	if _, lease, err := trySlot(ctx, t, clients[0], name, n, 0); err != nil {
		return fmt.Errorf("making %s a lock of %d slots: %w", name, n, err)
	} else if err := lease.Release(ctx); err != nil {
		return err
	}
	for range l.cfg.slotRounds {
		if err := slotRound(ctx, t, clients, name, &pr.slots); err != nil {
			return err
		}
	}
	s := pr.slots
	l.logf("slots(%d): TryAcquire of a free slot p50 %s (%.1f requests), of a full lock p50 %s (%.1f requests)", n,
		percentile(tookOf(s.free), 50).Round(time.Millisecond), meanRequests(s.free),
		percentile(tookOf(s.full), 50).Round(time.Millisecond), meanRequests(s.full))
	return nil
}

// slotRound is one round of measureSlots.
func slotRound(ctx context.Context, t *tap, clients []*s3lock.Client, name string, res *slotsResult) error {
	n := len(clients) - 1
	var leases []*s3lock.Lease
	defer func() {
		for _, l := range leases {
			_ = l.Release(ctx)
		}
	}()
	for i := range n {
		try, lease, err := trySlot(ctx, t, clients[i], name, n, i)
		if err != nil {
			return fmt.Errorf("TryAcquire with %d of %d slots held: %w", i, n, err)
		}
		leases = append(leases, lease)
		res.free = append(res.free, try)
	}
	for range n {
		try, lease, err := trySlot(ctx, t, clients[n], name, n, n)
		switch {
		case lease != nil:
			leases = append(leases, lease)
			return fmt.Errorf("TryAcquire took a slot with all %d slots held", n)
		case !errors.Is(err, s3lock.ErrHeld):
			return fmt.Errorf("TryAcquire with all %d slots held, not ErrHeld: %w", n, err)
		}
		res.full = append(res.full, try)
	}
	for len(leases) > 0 {
		if err := leases[0].Release(ctx); err != nil {
			return err
		}
		leases = leases[1:]
	}
	return nil
}

// trySlot times one TryAcquire of a slot lock of n slots, held of which
// are held, and counts its requests at t.
func trySlot(ctx context.Context, t *tap, c *s3lock.Client, name string, n, held int) (slotTry, *s3lock.Lease, error) {
	t.rec.reset()
	start := time.Now()
	lease, err := c.TryAcquire(ctx, name, s3lock.WithSlots(n), s3lock.WithoutAutoRenew())
	try := slotTry{took: time.Since(start), held: held}
	try.requests = len(filter(t.rec.take(), func(e event) bool { return e.op != "DeleteObjects" }))
	return try, lease, err
}

func tookOf(ts []slotTry) []time.Duration {
	var ds []time.Duration
	for _, t := range ts {
		ds = append(ds, t.took)
	}
	return ds
}

// meanRequests is the mean of the tries' requests.
func meanRequests(ts []slotTry) float64 {
	total := 0
	for _, t := range ts {
		total += t.requests
	}
	return float64(total) / float64(max(len(ts), 1))
}
