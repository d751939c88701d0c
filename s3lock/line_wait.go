package s3lock

import (
	"context"
	"errors"
	"time"
)

// The waiting side of the line (PROTOCOL.md §13): how an ordered Acquire
// joins, keeps its place, waits for its turn and leaves.

// lineWait is an ordered Acquire's waiting in the lock's line, the same for
// a mutex and a slot lock: its place (nil until it first takes its turn),
// its duties there while it watches the holder, and whether its attempts
// are the head's. It waits as etcd's client/v3/concurrency/mutex.go waits
// for the keys before its own, with tickets for keys. A nil *lineWait is a
// waiter without an order: never at the head, with no duties.
type lineWait struct {
	place *place
	// nextLineCheck is when an OrderNewest head lists the line next.
	nextLineCheck time.Time
	// head is set while the waiter is at the head of the line: its attempts
	// take a free lock although its own ticket is in the line.
	head bool
}

// atHead reports whether the waiter's attempts are the line's head's.
func (l *lineWait) atHead() bool { return l != nil && l.head }

// takeTurn waits until this waiter is at the head of the line, joining it
// first if it has not. waited is false when it was at the head at once (the
// holder the last attempt found is still the one to watch). An OrderNewest
// waiter that a newer one displaced returns a *SupersededError.
func (l *lineWait) takeTurn(ctx context.Context, w *waiter) (waited bool, err error) {
	if l.place == nil {
		l.place = &place{c: w.c, name: w.name, order: w.a.order, metadata: w.a.metadata, shared: w.a.shared, seen: sightings{}}
	}
	clk := w.c.cfg.clock
	bo := newBackoff(acquireRetryBase, acquireRetryMax)
	for {
		st, err := l.turn(ctx, w)
		var pause time.Duration
		switch {
		case err == nil && st.newer != nil && l.place.order == OrderNewest:
			return false, l.place.superseded(ctx, st.newer)
		case err == nil && st.ahead == 0:
			return waited, nil
		case err == nil:
			bo.reset()
			w.inLine(st.ahead)
			pause = jitter(linePollInterval)
			if st.ahead == 1 { // next after the head: be quick to take its place
				pause = jitter(w.c.cfg.pollInterval)
			}
		case errors.Is(err, ErrUnavailable), classify(err) == failCanceled && ctx.Err() == nil:
			w.last = err
			pause = bo.next()
		case ctx.Err() != nil:
			return false, w.gaveUp(ctx)
		default:
			return false, err
		}
		waited = true
		select {
		case <-ctx.Done():
			return false, w.gaveUp(ctx)
		case <-clk.After(min(pause, l.untilDuty(clk))):
		}
	}
}

// turn brings the waiter's place up to date and says where it stands: it
// joins the line if it has no ticket, sends a heartbeat when one is due,
// and joins again at the back when it lost its place.
func (l *lineWait) turn(ctx context.Context, w *waiter) (standing, error) {
	p := l.place
	for range 2 {
		var err error
		if p.ref.key == "" {
			err = p.join(ctx)
		} else if err = p.beat(ctx); errors.Is(err, errLostPlace) {
			err = l.rejoin(ctx, w)
		}
		if err != nil {
			return standing{}, err
		}
		st, err := p.stand(ctx)
		if err != nil || st.present || st.newer != nil && l.place.order == OrderNewest {
			return st, err // (an OrderNewest waiter gives way to a newer one, in line or not)
		}
		w.c.cfg.logger.Warn("s3lock: this waiter's ticket is gone (it lapsed, or was deleted); joining the line again",
			"bucket", w.c.bucket, "lock", w.name, "ticket", p.ref.key)
		p.forget(ctx, p.ref.key) // if a listing missed it, it must not stay in line
		p.ref = ticketRef{}
	}
	return standing{}, &opError{Op: "Acquire", Bucket: w.c.bucket, Key: linePrefix(w.name), Kind: ErrUnavailable,
		Err: errors.New("the waiter's ticket vanished from the line right after it joined; the store's listing may " +
			"not show its own writes at once: check it with `s3lock verify`")}
}

// rejoin gives up a place that is no longer trusted and joins at the back.
// An OrderNewest waiter first looks whether a newer OrderNewest waiter joined
// after its old ticket: then it gives way (a *SupersededError) rather than
// come back behind it as the newest.
func (l *lineWait) rejoin(ctx context.Context, w *waiter) error {
	p := l.place
	w.c.cfg.logger.Warn("s3lock: lost its place in the line (its heartbeat was not confirmed in time); joining again at the back",
		"bucket", w.c.bucket, "lock", w.name, "ticket", p.ref.key)
	if p.order == OrderNewest {
		st, err := p.stand(ctx)
		switch {
		case err != nil:
			return err
		case st.newer != nil:
			return p.superseded(ctx, st.newer)
		}
	}
	p.forget(ctx, p.ref.key)
	p.ref = ticketRef{}
	return p.join(ctx)
}

// headDuty is what the head of the line does while it watches the holder:
// heartbeats, and for an OrderNewest head a look at the line once every
// linePollInterval, and (force) right before it attempts the lock. It returns errNotHead when the waiter must wait for its
// turn again (it lost its place and joined again), and a *SupersededError
// when a newer OrderNewest waiter joined.
func (l *lineWait) headDuty(ctx context.Context, w *waiter, force bool) error {
	if l == nil || l.place == nil {
		return nil
	}
	p := l.place
	if err := p.beat(ctx); errors.Is(err, errLostPlace) {
		err := l.rejoin(ctx, w)
		if errors.Is(err, ErrSuperseded) {
			return err
		}
		if err != nil {
			w.last = err // takeTurn joins again
		}
		return errNotHead
	}
	now := w.c.cfg.clock.Now()
	if p.order != OrderNewest || now.Before(l.nextLineCheck) && !force {
		return nil
	}
	l.nextLineCheck = now.Add(jitter(linePollInterval))
	// A failed look changes nothing: the next one (or the holder's
	// release) tells more; the holder is still the one to watch.
	if st, err := p.stand(ctx); err == nil {
		switch {
		case st.newer != nil:
			return p.superseded(ctx, st.newer)
		case !st.present, st.ahead > 0:
			return errNotHead
		}
	}
	return nil
}

// untilDuty is how long a waiter in line may sleep before its next
// heartbeat or (for an OrderNewest head) line check is due, by clk; a long
// time if it is not in line.
func (l *lineWait) untilDuty(clk Clock) time.Duration {
	if l == nil || l.place == nil || l.place.ref.key == "" {
		return maxPollInterval
	}
	p := l.place
	next := p.nextBeat
	if p.order == OrderNewest && !l.nextLineCheck.IsZero() && l.nextLineCheck.Before(next) {
		next = l.nextLineCheck
	}
	return max(0, next.Sub(clk.Now()))
}

// inLine reports the waiter's position to the wait observer, and keeps it as
// the reason it has not acquired yet.
func (w *waiter) inLine(ahead int) {
	h := &HeldError{Bucket: w.c.bucket, Name: w.name, Key: linePrefix(w.name)}
	if w.held != nil {
		h = w.held
	}
	cp := *h
	cp.Ahead, cp.ExpiresIn = ahead, 0 // it watches the line, not the holder
	cp.Queued = cp.Epoch == 0 && ahead > 0
	w.last = &cp
	w.notify(&cp, time.Time{})
}

// leave deletes the waiter's ticket, before Acquire returns (one
// request, with a context that outlives the caller's): a process that exits
// right after acquiring, such as `s3lock acquire`, must not leave a ticket
// that holds up the line until it lapses. A ticket that cannot be deleted
// lapses.
func (l *lineWait) leave(ctx context.Context) {
	if l == nil || l.place == nil || l.place.ref.key == "" {
		return
	}
	p := l.place
	key := p.ref.key
	p.ref = ticketRef{}
	p.forget(ctx, key)
}
