package s3lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds a lease's cap on its tenure (WithMaxHold, PROTOCOL.md §6,
// "A cap on tenure"): the cap is written into the lease when it is
// acquired, renewals near it write a validity that ends at it, and the
// window a confirmed write gives is cut at it. The cap only ever shortens
// what a write claims, so it changes nothing that keeps two holders apart.

// capOnThisClock returns the cap written in a lease (wall, a time read
// from the payload: it carries no monotonic reading) as a time on this
// client's clock, read once now: trust windows are judged on the monotonic
// clock, and a window cut at a wall-only time would be judged on the wall
// clock, which a clock step moves (PROTOCOL.md A5). Zero stays zero.
func capOnThisClock(clk Clock, wall time.Time) time.Time {
	if wall.IsZero() {
		return wall
	}
	now := clk.Now()
	return now.Add(wall.Sub(now))
}

// capTrust returns t, the window a confirmed write of body p gives, cut at
// the cap (zero: none): a window that reaches the cap, or whose write's
// validity was cut for it (p.cutForCap), ends at the cap at the latest and
// is marked capped, so that its end is reported as the cap's (LostMaxHold)
// rather than as a lapse.
func capTrust(t trust, capAt time.Time, p *payload) trust {
	if capAt.IsZero() || (t.until.Before(capAt) && !p.cutForCap()) {
		return t
	}
	t.capped = true
	if capAt.Before(t.until) {
		t.until = capAt
	}
	return t
}

// renewalValidity is the validity a renewal written at now carries: the
// lease's, or near the cap the longest whose trust ends by it
// (validityBefore); under a millisecond when the cap leaves no renewal.
//
// Only the handle that acquired the lease shortens its writes: a resumed
// handle (Resume) writes the whole lease, its trust still cut at the cap.
// Another handle of the lease may still trust the window of the last write
// it made; a write that made the object lapse sooner than that window ends
// (the resumer's view of the cap is the acquirer's wall clock read on
// another machine) could let a third client in while it does. A whole
// validity written at or after that write lapses later than any window it
// gave, as every write did before there were caps.
func (l *Lease) renewalValidity(now time.Time) time.Duration {
	if l.capAt.IsZero() || !l.cutsWrites {
		return l.validity
	}
	return validityBefore(l.capAt.Sub(now), l.validity)
}

// untrustedLocked returns why the lease may not be trusted at now, and the
// reason it is lost for: LostMaxHold when the window the cap cut has ended,
// else LostLapsed (trust.untrusted); "" while it may be trusted. The caller
// holds l.mu.
func (l *Lease) untrustedLocked(now time.Time) (LossReason, string) {
	why := l.trust.untrusted(now)
	switch {
	case why == "":
		return "", ""
	case l.trust.capped && l.trust.over(now):
		return LostMaxHold, maxHoldText(l.maxHold, l.acquiredAt)
	}
	return LostLapsed, why
}

// untrusted is untrustedLocked for a caller that does not hold l.mu.
func (l *Lease) untrusted(now time.Time) (LossReason, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.untrustedLocked(now)
}

// expiredError is the error of a lease that may not be trusted, for reason
// and why (untrustedLocked): a lapse's why is followed by what says when
// it was found, and carries cause; the cap's is what it is.
func (l *Lease) expiredError(reason LossReason, why, when string, cause error) *LeaseLostError {
	if reason == LostMaxHold {
		return l.lostError(LostMaxHold, why, nil)
	}
	return l.lostError(LostLapsed, why+when, cause)
}

// maxHoldText says that a lease acquired at acquiredAt reached its cap d.
func maxHoldText(d time.Duration, acquiredAt time.Time) string {
	return fmt.Sprintf("it reached its maximum hold of %s (acquired at %s), past which it is not renewed",
		d, acquiredAt.UTC().Format(time.RFC3339))
}

// endedAtCap reports whether err is the end of a lease at its cap.
func endedAtCap(err error) bool {
	var lost *LeaseLostError
	return errors.As(err, &lost) && lost.Reason == LostMaxHold
}

// releaseAtCap is Release of a lease that ended at its cap (lost; the
// caller holds writeMu): its epoch object is still this handle's until
// others judge it lapsed, its last write's validity plus serverSlack after
// that write, so releasing it now frees the lock for the next holder
// instead of at its lapse. It writes nothing after that, nor after a
// release already done, and returns lost, joined with why the release
// failed if it did. (A late release would be harmless: it is a conditional
// write on this lease's own epoch object, which a newer epoch outranks.)
func (l *Lease) releaseAtCap(ctx context.Context, lost error) error {
	l.mu.Lock()
	next, etag, until := l.p, l.etag, l.trust.from.Add(l.p.validity()+serverSlack)
	l.mu.Unlock()
	now := l.c.cfg.clock.Now()
	if next.Released || !now.Before(until) {
		return lost
	}
	next.Renewals++
	next.Released, next.ReleasedAt = true, now.UTC()
	wctx, cancel := context.WithTimeout(ctx, until.Sub(now))
	defer cancel()
	newEtag, _, err := l.write(wctx, etag, until, &next)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return lost // the write found the lease ended: it is over either way
		}
		return errors.Join(lost, fmt.Errorf("s3lock: releasing it after its maximum hold: %w; it lapses on its own", err))
	}
	l.mu.Lock()
	l.p, l.etag = next, newEtag
	l.mu.Unlock()
	l.c.cfg.logger.Info("s3lock: released at its maximum hold", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch)
	return lost
}
