package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The systems compared.
const (
	sysS3lock    = "s3lock"
	sysTerraform = "terraform"
)

// pollInterval is how often a waiting s3lock Acquire checks a held lock:
// the SDK's default, which the bench's clients keep.
const pollInterval = s3lock.DefaultPollInterval

// handoff is one measured handoff of a lock from a holder to a waiter that
// was already waiting when the holder released it or crashed.
type handoff struct {
	system string
	hold   time.Duration // how long the holder was told to hold
	held   time.Duration // how long it held, measured: its acquisition to its release (or crash)
	// gap is the handoff: the holder's release (or crash) to the waiter's
	// acquisition. Zero when the waiter never acquired.
	gap      time.Duration
	acquired bool
	// gaveUpAfter is, when the waiter never acquired, how long after the
	// release (or crash) it gave up.
	gaveUpAfter time.Duration
	waited      time.Duration // the waiter's first attempt to its acquisition (or to giving up)
	requests    int           // the waiter's requests in that time, its acquiring one excluded
	wait        counts        // the same requests by price class
	attempts    int           // how many of them were failed attempts (terraform: PUTs answered 412)
	// lockCounts are the holder's requests on the lock itself (terraform:
	// on the .tflock object), by price class.
	lockCounts counts
	// sinceWrite is, after a crash, how long before it the holder's last
	// write (a renewal, or the acquisition) was answered.
	sinceWrite time.Duration
	// releaseErr is what the holder's Release returned, if it failed: the
	// lock was then free only once the lease lapsed, and gap measures that.
	releaseErr string
	renewals   counts // requests of the holder's renewals (s3lock)
	nRenewals  int
}

// rate is the waiter's requests per second while it waited.
func (h handoff) rate() float64 { return float64(h.requests) / h.waited.Seconds() }

// lockOps says how to read a lock's life off recorded requests.
type lockOps struct {
	acquired func(event) bool // a successful acquisition (the first counts)
	released func(event) bool // a release (the last counts)
	attempt  func(event) bool // an attempt to acquire (the waiter's first opens its wait)
	failed   func(event) bool // a failed attempt, if the lock counts them (nil: it does not)
}

// s3lockOps: an acquisition is the first successful PUT (the epoch create),
// the release the holder's last one; a waiter's wait opens with its first
// request (the attempt's LIST).
var s3lockOps = lockOps{
	acquired: func(e event) bool { return e.op == "PutObject" && e.ok() },
	released: func(e event) bool { return e.op == "PutObject" && e.ok() },
	attempt:  func(event) bool { return true },
}

// analyze measures the handoff from the holder's and the waiter's requests.
// letGo is when the holder let go without a release (it was killed, or its
// release failed); zero if it released. The waiter gave up at gaveUp if it
// never acquired.
func analyze(ops lockOps, holder, waiter []event, letGo, gaveUp time.Time) (handoff, error) {
	var h handoff
	acq := filter(holder, ops.acquired)
	rel := filter(holder, ops.released)
	attempts := filter(waiter, ops.attempt)
	if len(acq) == 0 || len(attempts) == 0 || (letGo.IsZero() && len(rel) == 0) {
		return h, errors.New("the recorded requests show no acquisition, release or waiting attempt")
	}
	end := letGo
	if end.IsZero() {
		end = rel[len(rel)-1].done
	} else if len(rel) > 0 {
		h.sinceWrite = letGo.Sub(rel[len(rel)-1].done)
	}
	h.held = end.Sub(acq[0].done)
	first := attempts[0]
	if !first.sent.Before(end) {
		return h, errors.New("the waiter made its first attempt only after the holder had let go")
	}
	until := gaveUp
	if won := filter(waiter, ops.acquired); len(won) > 0 {
		h.acquired = true
		h.gap = won[0].done.Sub(end)
		h.waited = won[0].done.Sub(first.sent)
		until = won[0].sent
	} else {
		h.waited, h.gaveUpAfter = gaveUp.Sub(first.sent), gaveUp.Sub(end)
	}
	waiting := sentBetween(waiter, first.sent, until)
	h.requests, h.wait = len(waiting), countOf(waiting)
	if ops.failed != nil {
		h.attempts = len(filter(waiting, ops.failed))
	}
	return h, nil
}

// measureS3lockHandoffs measures s3lock's handoff after a release at every
// hold time, and after a crash.
func (l *lab) measureS3lockHandoffs(ctx context.Context, pr *profileResult) error {
	for rep := 1; rep <= pr.reps; rep++ {
		for _, hold := range l.cfg.holds {
			name := fmt.Sprintf("%s/handoff/release-%s-%d", l.profile.Name, hold, rep)
			h, err := l.s3lockHandoff(ctx, name, hold, s3lock.DefaultLeaseDuration, false)
			if err != nil {
				return fmt.Errorf("s3lock handoff after a %s hold: %w", hold, err)
			}
			l.logf("s3lock, %s hold: handoff %s, waiter %.1f requests/s", hold, h.gap.Round(time.Millisecond), h.rate())
			pr.release = append(pr.release, h)
		}
	}
	h, err := l.s3lockHandoff(ctx, l.profile.Name+"/handoff/crash", l.cfg.crashHold, l.cfg.crashLease, true)
	if err != nil {
		return fmt.Errorf("s3lock handoff after a crash: %w", err)
	}
	l.logf("s3lock, crash after %s (%s after its last write): next holder after %s", l.cfg.crashHold,
		h.sinceWrite.Round(time.Millisecond), h.gap.Round(time.Millisecond))
	pr.crash = append(pr.crash, h)
	pr.renewal = h.renewals.per(float64(h.nRenewals))
	return nil
}

// s3lockHandoff runs one handoff: a `bench holder` process takes the lock
// with the given lease; a waiting Acquire of this process starts; after hold
// the holder releases the lock (or is SIGKILLed, if crash).
func (l *lab) s3lockHandoff(ctx context.Context, name string, hold, lease time.Duration, crash bool) (handoff, error) {
	htap, err := l.newTap()
	if err != nil {
		return handoff{}, err
	}
	defer htap.close()
	wtap, err := l.newTap()
	if err != nil {
		return handoff{}, err
	}
	defer wtap.close()
	holder, err := l.startHolder(ctx, htap.URL, name, lease)
	if err != nil {
		return handoff{}, err
	}
	arrive := waiterArrival()
	time.Sleep(arrive)
	waiter, err := l.startWaiter(ctx, wtap.URL, name, 3*(hold+lease))
	if err != nil {
		holder.crash()
		return handoff{}, err
	}
	time.Sleep(hold - arrive)
	var letGo time.Time
	var releaseErr error
	if crash {
		letGo = holder.crash()
	} else if releaseErr = holder.release(); releaseErr != nil {
		// Measured, not hidden: the waiter gets the lock when the lease
		// lapses, counted from the holder's failed release.
		l.logf("s3lock, %s hold: the holder's release failed; waiting for the lease to lapse: %v", hold, releaseErr)
		letGo = lastPut(htap.rec.take())
	}
	if err := waiter.wait(); err != nil {
		return handoff{}, err
	}
	h, err := analyze(s3lockOps, htap.rec.take(), wtap.rec.take(), letGo, time.Time{})
	h.system, h.hold = sysS3lock, hold
	if releaseErr != nil {
		h.releaseErr, h.sinceWrite = releaseErr.Error(), 0
	}
	if crash {
		h.renewals, h.nRenewals = renewalCounts(htap.rec.take())
	}
	return h, err
}

// lastPut returns when the holder's last PUT was answered, whatever its
// status.
func lastPut(holder []event) time.Time {
	puts := filter(holder, func(e event) bool { return e.op == "PutObject" })
	if len(puts) == 0 {
		return time.Time{}
	}
	return puts[len(puts)-1].done
}

// waiterArrival returns how long after the holder took the lock its waiter
// starts: a random moment within one s3lock poll interval. A waiter that
// started polling the instant the lock was taken would, after a hold of a
// whole number of poll intervals (2 s is ten), poll just after the release
// and show a handoff shorter than a typical one. Both systems' waiters
// arrive this way.
func waiterArrival() time.Duration { return rand.N(pollInterval) }

// renewalCounts returns the requests a holder made after its acquisition
// (all renewals: it never released) and how many renewals succeeded.
func renewalCounts(holder []event) (counts, int) {
	for i, e := range holder {
		if s3lockOps.acquired(e) {
			after := holder[i+1:]
			return countOf(after), len(filter(after, s3lockOps.acquired))
		}
	}
	return counts{}, 0
}

// waiterProc is a waiting Acquire in this process.
type waiterProc struct {
	done chan error
}

// startWaiter starts a waiting Acquire of name through endpoint, bounded by
// limit; the lease it gets is released at once (after the measured
// acquisition).
func (l *lab) startWaiter(ctx context.Context, endpoint, name string, limit time.Duration) (*waiterProc, error) {
	api, err := newS3Client(ctx, endpoint, nil)
	if err != nil {
		return nil, err
	}
	locks, err := lockClient(api, "bench-waiter")
	if err != nil {
		return nil, err
	}
	w := &waiterProc{done: make(chan error, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		lease, err := locks.Acquire(ctx, name)
		if err == nil {
			err = lease.Release(ctx)
		}
		w.done <- err
	}()
	return w, nil
}

func (w *waiterProc) wait() error { return <-w.done }
