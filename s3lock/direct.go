package s3lock

import (
	"context"
	"errors"
)

// The direct create (PROTOCOL.md §5, "The direct create"): a waiter whose poll read
// the epoch it watched released creates the next epoch at once, and sends
// the LIST that an attempt makes first (step 2) together with the create.
// The handoff then costs the poll's GET and one round trip (the slower of
// the LIST and the create) instead of three in a row.
//
// It is step 5's argument with `start` when the LIST is sent, whichever the
// store answers first: the epoch created is trusted only if that LIST
// shows the polled epoch as the newest (answered before the create) or the
// created one (answered after it), and if the create was answered within
// attemptWindow of `start`, else listed again (stillNewest). An epoch the
// poll read released may have had successors meanwhile, and cleanup may have
// deleted the next one, whose key the create then takes again: its LIST
// shows the newer epochs (the newest is never deleted), and the epoch
// created is abandoned (TestDirectCreate_AfterAPauseNeverReusesADeletedEpoch).

// polledFree returns the epoch object that the wait that just ended read
// released (polled), if this attempt may create its successor directly: a lock's
// mutex (not a slot's), an unordered waiter or the head of the line (the
// others leave a free lock to the line: leaveToLine), and an epoch that
// may have a successor; and a waiter whose direct create has not yet lost
// to another's (contended: then others poll the same epoch, and each of them
// that creates at once pays a create and a read-back to lose; listing first,
// it sees the winner's epoch and does not try). Else nil: the attempt lists
// first.
func (m *mutex) polledFree(head bool) *observed {
	r := m.known.released
	switch {
	case r == nil || !m.polled || !m.direct || m.contended || r.body.marker() || pendingOver(r) || r.epoch >= MaxEpoch:
		return nil
	case m.a.order.ordered() && !head:
		return nil
	}
	return r
}

// listResult is what the LIST sent with a direct create found.
type listResult struct {
	l   listing
	err error
}

// attemptDirect creates the epoch after r, which a poll read released, with
// the lock's LIST sent at the same time, and makes it a lease if that LIST
// allows (directListed) and the attempt was quick enough (stillNewest).
func (m *mutex) attemptDirect(ctx context.Context, r *observed) (*Lease, error) {
	c, next := m.c, r.epoch+1
	m.known.released = nil // whatever happens, the next attempt lists first
	start := c.cfg.clock.Now()
	listed := make(chan listResult, 1)
	go func() {
		l := listing{start: start}
		var err error
		l.newest, l.found, l.page, err = c.findNewest(ctx, m.name)
		listed <- listResult{l: l, err: err}
	}()
	h, err := c.createHolding(ctx, m.name, next, m.a)
	lr := <-listed
	if err != nil {
		return nil, m.directLost(ctx, next, lr, err)
	}
	if err := m.directListed(ctx, h, r.epoch, lr); err != nil {
		return nil, err
	}
	lease, err := c.established(ctx, h, start, m.a)
	if err != nil {
		return nil, err
	}
	c.cfg.logger.Info("s3lock: acquired", "bucket", c.bucket, "key", lease.key, "epoch", next, "holder", c.cfg.holder)
	lease.startBackground()
	c.startCleanup(c.cleanupFor(m.name, next, lr.l.page))
	return lease, nil
}

// directLost is the error of a direct create of next that did not land
// (err): another waiter's create won (the mutex is contended from now on),
// or the create failed as any attempt's can. A *HeldError of next that the
// LIST sent with the create already shows needs no LIST of its own
// (createFoundEpoch's check that the listing does not hide it).
func (m *mutex) directLost(ctx context.Context, next uint64, lr listResult, err error) error {
	var held *HeldError
	switch {
	case errors.As(err, &held) && held.Epoch == next:
		m.contended = true
		if lr.err == nil && lr.l.found && lr.l.newest.epoch >= next {
			return err
		}
	case errors.Is(err, errRetry):
		m.contended = true
	}
	if herr := m.createFoundEpoch(ctx, next, err); herr != nil {
		return herr
	}
	return err
}

// directListed checks the LIST sent with the direct create of h (the epoch
// after polled): it must show polled as the lock's newest epoch (it was
// answered before the create) or h's own object (after it). Anything else —
// a newer epoch, another object at h's key, no epoch at all — means that h
// may be a deleted epoch created again: h is abandoned and the attempt
// starts over with a LIST (errRetry). A LIST that failed is made again,
// after the create, as step 5's (newerEpoch).
func (m *mutex) directListed(ctx context.Context, h holding, polled uint64, lr listResult) error {
	c, key := m.c, epochKey(h.name, h.epoch)
	n, found := lr.l.newest, lr.l.found
	var shown string
	switch {
	case lr.err != nil:
		newer, err := c.newerEpoch(ctx, h.name, h.epoch)
		if err != nil {
			c.abandon(ctx, key, h.epoch, h.p)
			return err
		}
		if newer == "" {
			return nil
		}
		shown = newer
	case found && n.epoch == polled, found && n.epoch == h.epoch && n.etag != "" && n.etag == h.etag:
		return nil
	case found:
		shown = n.key
	default:
		shown = "no epoch"
	}
	c.cfg.logger.Warn("s3lock: a direct create's listing shows that the lock moved on; abandoning the epoch created",
		"bucket", c.bucket, "key", key, "listed", shown)
	c.abandon(ctx, key, h.epoch, h.p)
	return errRetry
}
