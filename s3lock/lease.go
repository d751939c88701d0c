package s3lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// Lease is a held lock: one epoch of it. Its epoch is the fencing token.
// Unless acquired WithoutAutoRenew, it renews itself in the background until
// Release or Detach, or until it is lost; Done is closed when it ends.
//
// A Lease is safe for concurrent use.
type Lease struct {
	c *Client
	// name is the lock the lease's epochs belong to: the lock, or for a
	// slot lock (WithSlots) the slot "<lock>/lock-slots/<slot>"; lock is the
	// lock's own name, and slots its number of slots (0 for a mutex).
	name        string
	lock        string
	slot, slots int

	key   string
	epoch uint64
	// share is a shared lease's share id (WithShared; key is the share's
	// object, epoch its shared epoch); "" for an exclusive lease.
	share      string
	nonce      string
	holder     string
	acquiredAt time.Time
	validity   time.Duration
	// capAt is when the lease's trust ends for good (WithMaxHold: its
	// acquisition plus maxHold); zero without a cap.
	capAt   time.Time
	maxHold time.Duration
	// cutsWrites is set on the handle that acquired a capped lease: only
	// it shortens its renewals' validity for the cap (renewalValidity).
	cutsWrites bool
	renewInt   time.Duration
	auto       bool
	// unobserved is set for the store check's probe lease: its requests are
	// reported, its lease events (released, lost, renewed) are not, since
	// no acquisition of it was.
	unobserved bool

	writeMu sync.Mutex // serializes Renew and Release writes
	// unsettled holds this handle's writes that were given up with their
	// outcome unknown (a renewal cancelled by Release, a Renew whose ctx
	// ended): such a write may still land, and a later read-back that finds
	// it must see this handle's own write in it, not another handle's.
	// Guarded by writeMu.
	unsettled unsettled

	mu sync.Mutex
	// etag and p are the epoch object as this handle last wrote (or read) it.
	etag string
	p    payload
	// trust is the window in which the lease is trusted, from when its
	// last confirmed write was sent.
	trust    trust
	ended    error // nil while active; ErrReleased or a *LeaseLostError
	writeErr error // why the last write attempt failed; nil after a confirmed one

	done chan struct{}
	// A lease runs at most two goroutines (startBackground), as etcd's
	// session runs one keepalive: the deadline timer (watchDeadline), under
	// bgCtx, which ends the lease when its trust deadline passes, and with
	// automatic renewal the renewal (keepAlive), under renewCtx, a child of
	// bgCtx. stop (the lease ended, or was detached) ends both; stopRenew
	// only the renewal (Release has taken over), leaving the timer to end a
	// lease whose release is never confirmed. bg and renewing wait for
	// them.
	bgCtx, renewCtx context.Context
	stop, stopRenew context.CancelFunc
	bg, renewing    sync.WaitGroup
}

// holding is an epoch object a new Lease holds: the name of its lock (or
// slot) and its epoch, its body and ETag as last written or read, and the
// window in which it is trusted.
type holding struct {
	name  string
	epoch uint64
	p     payload
	etag  string
	trust trust
	// capAt is the lease's cap by this client's clock (its acquisition's
	// monotonic reading); zero to take the payload's.
	capAt time.Time
	// share is the id of a share (WithShared): then the lease is the
	// share's object, under shared epoch epoch.
	share string
}

// newLease returns an active lease of h, renewed every a.renewInterval (in
// the background with a.autoRenew); a.slot names its slot when it is a slot
// lock's (h.name is then the slot's).
func (c *Client) newLease(h holding, a acquireConfig) *Lease {
	ref := a.slot
	lock := h.name
	if ref.slot > 0 {
		lock = ref.lock
	}
	capAt, cuts := h.capAt, !h.capAt.IsZero() // the acquirer's: on this clock already
	if capAt.IsZero() {
		capAt = capOnThisClock(c.cfg.clock, h.p.MaxHoldUntil) // a resumed lease's
	}
	l := &Lease{
		c:          c,
		name:       h.name,
		lock:       lock,
		slot:       ref.slot,
		slots:      ref.slots,
		key:        h.key(),
		epoch:      h.epoch,
		share:      h.share,
		nonce:      h.p.Nonce,
		holder:     h.p.Holder,
		acquiredAt: h.p.AcquiredAt,
		validity:   h.p.validity(),
		capAt:      capAt,
		cutsWrites: cuts,
		maxHold:    h.p.maxHold(),
		renewInt:   a.renewInterval,
		auto:       a.autoRenew,
		unobserved: a.unobserved,
		etag:       h.etag,
		p:          h.p,
		trust:      h.trust,
		done:       make(chan struct{}),
	}
	l.bgCtx, l.stop = context.WithCancel(context.Background())
	l.renewCtx, l.stopRenew = context.WithCancel(l.bgCtx)
	return l
}

// State is the lease as this handle knows it: its lock (Name; for a slot
// lock, Slot and Slots say which slot), epoch object, holder, metadata (a
// copy: WithMetadata, or for a resumed lease what its acquirer set),
// AcquiredAt (the acquirer's clock), LeaseDuration (how long it stays valid
// after each renewal), HeldUntilAtMost (WithMaxHold's cap, by the client's
// clock) and Renewals. ExpiresAt and TrustedUntil are both when
// this handle stops trusting the lease unless it is renewed, by the client's
// clock: earlier, by a safety margin, than the moment anyone else could judge
// it lapsed. Held is true until the lease ends (Err says why); Released once
// it was released through this handle.
func (l *Lease) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	metadata := make(map[string]string, len(l.p.Metadata))
	for k, v := range l.p.Metadata {
		metadata[k] = v
	}
	return State{
		Name: l.lock, Key: l.key, Epoch: l.epoch, Slot: l.slot, Slots: l.slots,
		Held: l.ended == nil, Released: errors.Is(l.ended, ErrReleased),
		Holder: l.holder, AcquiredAt: l.acquiredAt, Metadata: metadata,
		ExpiresAt: l.trust.until, TrustedUntil: l.trust.until,
		LeaseDuration: l.validity, Renewals: l.p.Renewals, HeldUntilAtMost: l.capAt.Round(0),
	}
}

// trustedUntil is when this handle stops trusting the lease unless it is
// renewed (State's ExpiresAt, without copying the rest).
func (l *Lease) trustedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trust.until
}

// Done returns a channel that is closed when the lease ends: released, or
// lost. Err says which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is active, ErrReleased after Release, and
// a *LeaseLostError (matching ErrLeaseLost) if it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// Token names the lease: its bucket, lock, epoch, for a slot lock (WithSlots)
// its slot and the lock's number of slots, and the Nonce another process
// needs to take it over with Resume. Token().Key() is its epoch object's
// key.
func (l *Lease) Token() Token {
	return Token{Bucket: l.c.bucket, Name: l.lock, Slot: l.slot, Slots: l.slots, Epoch: l.epoch, Share: l.share, Nonce: l.nonce}
}

// end records why the lease ended and closes Done, once. It returns the
// reason the lease ended with, which is err unless it had ended already.
func (l *Lease) end(err error) error {
	l.mu.Lock()
	ended, first := l.endLocked(err)
	l.mu.Unlock()
	if first {
		l.logEnd(ended)
	}
	return ended
}

// endLocked is end for a caller that holds l.mu; first reports whether this
// call ended the lease (the caller logs it, with l.mu released, by logEnd).
func (l *Lease) endLocked(err error) (ended error, first bool) {
	if l.ended != nil {
		return l.ended, false
	}
	l.ended = err
	close(l.done)
	l.stop()
	return err, true
}

// logEnd logs and reports how the lease ended, once: called by whoever
// ended it, with l.mu released.
func (l *Lease) logEnd(err error) {
	e := l.event("")
	switch {
	case errors.Is(err, ErrLeaseLost):
		l.c.cfg.logger.Warn("s3lock: lease lost", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch, "err", err)
		e.Kind, e.Err = observe.Lost, err
		var lost *LeaseLostError
		if errors.As(err, &lost) {
			e.Reason = string(lost.Reason)
		}
	case errors.Is(err, ErrReleased):
		e.Kind = observe.Released
	default:
		return
	}
	l.report(e)
}

// report hands e to the client's observer, unless the lease is unobserved.
func (l *Lease) report(e observe.Event) {
	if !l.unobserved {
		l.c.observe(e)
	}
}

// event is an observer event of kind about this lease.
func (l *Lease) event(kind observe.Kind) observe.Event {
	return observe.Event{Kind: kind, Lock: l.lock, Key: l.key, Epoch: l.epoch, Slot: l.slot}
}

// lost ends the lease as lost for reason; detail says what was found.
func (l *Lease) lost(reason LossReason, detail string, cause error) error {
	return l.end(l.lostError(reason, detail, cause))
}

func (l *Lease) lostError(reason LossReason, detail string, cause error) *LeaseLostError {
	return &LeaseLostError{Bucket: l.c.bucket, Name: l.lock, Key: l.key, Epoch: l.epoch, Reason: reason, Detail: detail, Err: cause}
}

// confirm records a write sent at sent that the store confirmed, so the
// lease is trusted again until sent + duration - margin (at most until its
// cap, capTrust), unless the lease
// ended meanwhile (its trust deadline passed while the write was in flight:
// a late answer cannot revive it) or can no longer be trusted now. It returns
// why the lease ended in those cases.
func (l *Lease) confirm(sent time.Time, etag string, next payload) error {
	l.mu.Lock()
	if l.ended != nil {
		defer l.mu.Unlock()
		return l.ended
	}
	if reason, why := l.untrustedLocked(l.c.cfg.clock.Now()); reason != "" {
		err, _ := l.endLocked(l.expiredError(reason, why, " before the renewal was confirmed", nil))
		l.mu.Unlock()
		l.logEnd(err)
		return err
	}
	l.etag, l.p, l.writeErr = etag, next, nil
	l.trust = capTrust(trustFor(sent, next.validity()), l.capAt, &next)
	l.mu.Unlock()
	return nil
}

// cause returns what made a write fail: err, unless err is only the lease's
// own deadline cutting the request short, in which case the store's last
// answer (recorded by failed) says more.
func (l *Lease) cause(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writeErr != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return errors.Join(l.writeErr, err)
	}
	return err
}

// failed records why the last write attempt failed, for the error of a lease
// whose deadline passes before a write is confirmed.
func (l *Lease) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeErr = err
}

// Renew extends the lease by its duration, counted from just before the
// renewal was sent; near its cap (WithMaxHold), only up to the cap, and once
// the cap is reached it fails with a *LeaseLostError of Reason LostMaxHold.
// It fails with a *LeaseLostError if the lease can no
// longer be trusted (it lapsed, or its epoch object was changed by someone
// else), and with other errors (which leave the lease active until it
// expires) when the store could not be reached. Renew gives up when the
// lease would stop being trusted, or when ctx ends (returning ctx's error);
// a renewal that may have reached the store is checked by reading the
// object back.
func (l *Lease) Renew(ctx context.Context) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	clk := l.c.cfg.clock
	now := clk.Now()
	next, etag, until, err := l.nextWrite(now, "before it could be renewed")
	if err != nil {
		return err
	}
	validity := l.renewalValidity(now)
	if validity < time.Millisecond {
		return l.lost(LostMaxHold, maxHoldText(l.maxHold, l.acquiredAt), nil)
	}
	next.ValidityMs, next.RenewedAt = validity.Milliseconds(), now.UTC()
	// A renewal only counts if it is confirmed while the lease is still
	// trusted: after that, someone may already hold the next epoch.
	wctx, cancel := context.WithTimeout(ctx, until.Sub(now))
	defer cancel()
	newEtag, sent, err := l.write(wctx, etag, until, &next)
	if err != nil {
		if ended := l.Err(); ended != nil && !errors.Is(err, ErrLeaseLost) {
			return ended // the trust deadline passed while the renewal was failing
		}
		if reason, why := l.untrusted(clk.Now()); reason != "" && !errors.Is(err, ErrLeaseLost) {
			return l.end(l.expiredError(reason, why, " while the renewal was failing", l.cause(err)))
		}
		return err
	}
	if err := l.confirm(sent, newEtag, next); err != nil {
		return err
	}
	l.report(l.event(observe.Renewed))
	l.c.cfg.logger.Debug("s3lock: renewed", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch, "renewals", next.Renewals)
	return nil
}

// Release ends the lease and frees the lock for the next acquirer with one
// conditional write on the lease's own epoch object. Releasing twice is not
// an error. If the lease was already lost, Release writes nothing and returns
// the *LeaseLostError, so the caller learns that its work may not have been
// exclusive; if the lease stops being trusted before the release is
// confirmed, Release returns a *LeaseLostError too (the lease lapses anyway).
// If ctx ends first, Release returns ctx's error and the lease lapses. A
// lease that reached its cap (WithMaxHold, LostMaxHold) is still this
// handle's in the store until it lapses: Release then releases it, so that
// the next holder need not wait, and returns the *LeaseLostError all the
// same (joined with why the release failed, if it did).
func (l *Lease) Release(ctx context.Context) error {
	l.stopRenewal()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Err(); err != nil {
		switch {
		case errors.Is(err, ErrReleased):
			return nil
		case endedAtCap(err):
			return l.releaseAtCap(ctx, err)
		}
		return err
	}
	now := l.c.cfg.clock.Now()
	next, etag, until, err := l.nextWrite(now, "before it was released")
	if endedAtCap(err) {
		return l.releaseAtCap(ctx, err) // the cap passed before its timer ended the lease
	}
	if err != nil {
		return err
	}
	next.Released = true
	next.ReleasedAt = now.UTC()
	wctx, cancel := context.WithTimeout(ctx, until.Sub(now))
	defer cancel()
	if _, _, err := l.write(wctx, etag, until, &next); err != nil {
		switch {
		case errors.Is(err, ErrLeaseLost):
			return err
		}
		if reason, why := l.untrusted(l.c.cfg.clock.Now()); reason != "" && ctx.Err() == nil {
			return l.end(l.expiredError(reason, why, " before the release was confirmed; it lapses on its own", l.cause(err)))
		}
		return err
	}
	// The release landed, so the lock is free whatever the handle says;
	// but if the trust deadline passed while it was in flight, the lease
	// had already ended as lost and the caller must hear it.
	l.mu.Lock()
	l.p = next
	err, first := l.endLocked(ErrReleased)
	l.mu.Unlock()
	l.bg.Wait() // the deadline timer, now stopped
	if first {
		l.logEnd(err)
	}
	if !errors.Is(err, ErrReleased) {
		return err
	}
	l.c.cfg.logger.Info("s3lock: released", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch)
	if l.share != "" {
		// Released shares are deleted, so that a shared epoch that stays
		// open for long lists only its live shares (§17).
		l.c.withdrawShare(ctx, l.key)
	}
	return nil
}

// nextWrite begins a renewal or the release (the caller holds writeMu): it
// returns the body as last written with renewals + 1, its ETag and the
// trust deadline; or, if the lease may not be trusted at now, ends it as
// lost (before says what was about to be done) and returns why.
func (l *Lease) nextWrite(now time.Time, before string) (next payload, etag string, until time.Time, err error) {
	if reason, why := l.untrusted(now); reason != "" {
		return payload{}, "", time.Time{}, l.end(l.expiredError(reason, why, " "+before, nil))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	next, etag, until = l.p, l.etag, l.trust.until
	next.Renewals++
	return next, etag, until, nil
}

// Detach stops the background renewal without releasing: the lease stays
// held in the store until it expires or someone resumes it with its Token
// and releases it. Use it to hand a lease to another process; do not use
// this handle afterwards.
func (l *Lease) Detach() Token {
	l.stopBackground()
	return l.Token()
}

// write replaces the lease's epoch object (compare-and-swap on etag) with
// next, which it stamps with a fresh write id, through settle: our write id
// read back means it landed; the ETag we hold means it did not (retry); an
// earlier write of this handle, given up unsettled, means the object is
// still ours; anything else means someone else wrote the object and the
// lease is lost. It returns the new ETag and the time the first attempt was
// sent.
//
// A read-back runs even when ctx has ended (the caller's cancellation must
// not leave the outcome unknown), but never past until, the lease's trust
// deadline: after it, the outcome no longer decides anything (the lease is
// over either way), and waiting for it would hold up Release and the
// background renewal of a lease whose deadline has passed.
func (l *Lease) write(ctx context.Context, etag string, until time.Time, next *payload) (string, time.Time, error) {
	next.Write = randomHex(8)
	body, err := next.encode()
	if err != nil {
		return "", time.Time{}, err
	}
	sent := l.c.cfg.clock.Now()
	// Retry often enough to get through before the lease stops being
	// trusted once the store answers again.
	bo := newBackoff(writeRetryBase, max(writeRetryMin, min(writeRetryMax, l.renewInt/writeRetryDivisor)))
	for {
		// earlier is a copy of l.unsettled: add runs only as write
		// returns, never while a settle may read it.
		w := condWrite{key: l.key, etag: etag, body: body, nonce: l.nonce, write: next.Write, earlier: l.unsettled, until: until,
			answered: l.failed} // the store's answer, kept before a read-back that may outlive ctx
		s := settle(ctx, l.c, w, l.c.epochReader(l.epoch))
		switch s.verdict {
		case landed:
			return s.etag, sent, nil
		case refused:
			l.renewFailed(ctx, next, s.err)
			return "", sent, s.err
		case absent:
			if l.share != "" && next.Released {
				// A share is deleted only once it ended (a force-release
				// marks it, as it does an epoch): our release landed, its
				// answer was lost, and an exclusive acquirer deleted it.
				return "", sent, nil
			}
			return "", sent, l.lost(LostDeleted, "its epoch object was deleted", s.err)
		case landedEarlier:
			if !s.found.body.Released {
				// The object is still ours. Write again on its ETag, at
				// once (it extends nothing by itself: trust moves only
				// with this write's confirmation).
				etag = s.etag
				continue
			}
			if next.Released {
				return s.etag, sent, nil // an earlier release of this handle landed: released
			}
			return "", sent, l.lost(LostReleased, "an earlier release through this handle, given up unconfirmed, landed since", s.err)
		case other:
			return "", sent, l.overwritten(s.found.body, s.err)
		}
		// unchanged (our write did not land: retry), or unknown.
		l.renewFailed(ctx, next, s.err)
		select {
		case <-ctx.Done():
			l.unsettled.add(next.Write, sent) // it may still land
			return "", sent, errors.Join(ctx.Err(), s.err)
		case <-l.c.cfg.clock.After(bo.next()):
		}
	}
}

// overwritten ends the lease as lost: a read-back found its epoch object
// written by someone else (b), the write's error being err.
func (l *Lease) overwritten(b *payload, err error) error {
	switch {
	case b.Nonce != l.nonce:
		return l.lost(LostReplaced, "its epoch object now belongs to "+b.Holder, err)
	case b.Released && b.ReleasedBy != "":
		return l.lost(LostForceReleased, "it was force-released by "+b.ReleasedBy, err)
	case b.Released:
		// Another handle took the lease over while this one still used
		// it, and released it: not a release already done.
		return l.lost(LostTakenOver, "another handle of it (a Resume) released it", err)
	}
	return l.lost(LostTakenOver, "its epoch object was written by another handle (a Resume of it)", err)
}

// renewFailed reports a renewal attempt that failed and will be retried (or
// was refused): not a release's, and not one the caller cancelled (Release
// stopping the background renewal).
func (l *Lease) renewFailed(ctx context.Context, next *payload, err error) {
	if next.Released || ctx.Err() != nil {
		return
	}
	e := l.event(observe.RenewFailed)
	e.Err = err
	l.report(e)
}

// startBackground starts the lease's background work: a deadline timer that
// ends the lease as lost the moment its trust deadline passes without a
// confirmed renewal (whatever requests are in flight), and, with automatic
// renewal, the goroutine that renews it.
func (l *Lease) startBackground() {
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		l.watchDeadline(l.bgCtx)
	}()
	if l.auto {
		l.renewing.Add(1)
		go func() {
			defer l.renewing.Done()
			l.keepAlive(l.renewCtx)
		}()
	}
}

// stopBackground ends all background work and waits for it.
func (l *Lease) stopBackground() {
	l.stop()
	l.stopRenewal()
	l.bg.Wait()
}

// stopRenewal ends the background renewal and waits for it; the deadline
// timer goes on.
func (l *Lease) stopRenewal() {
	l.stopRenew()
	l.renewing.Wait()
}

// watchDeadline ends the lease as lost when its trust deadline passes. It is
// a timer, not the end of a request: a renewal stuck on a store that does
// not answer cannot keep the lease trusted past its deadline, and one that
// is confirmed later cannot revive it (confirm refuses).
func (l *Lease) watchDeadline(ctx context.Context) {
	clk := l.c.cfg.clock
	for {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(max(0, min(deadlineRecheck, l.trustedUntil().Sub(clk.Now())))):
		}
		l.mu.Lock()
		reason, why := l.untrustedLocked(clk.Now())
		var lost error
		if reason != "" && l.ended == nil {
			when := " before a renewal was confirmed"
			switch {
			case !l.auto:
				when = " without being renewed"
			case l.writeErr != nil:
				when = " while renewals were failing"
			}
			lost, _ = l.endLocked(l.expiredError(reason, why, when, l.writeErr))
		}
		ended := l.ended != nil
		l.mu.Unlock()
		if lost != nil {
			l.logEnd(lost)
		}
		if ended {
			return
		}
	}
}

// keepAlive renews the lease every renewal interval, and sooner, with
// backoff, after a renewal fails. The deadline itself is watchDeadline's.
func (l *Lease) keepAlive(ctx context.Context) {
	clk := l.c.cfg.clock
	bo := newBackoff(renewRetryBase, max(l.renewInt/renewRetryDivisor, renewRetryMin))
	wait := l.renewInt
	for {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(max(0, min(wait, l.trustedUntil().Sub(clk.Now())))):
		}
		err := l.Renew(ctx)
		switch {
		case err == nil:
			bo.reset()
			wait = l.renewInt
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrReleased):
			return
		default:
			if ctx.Err() != nil {
				return
			}
			l.c.cfg.logger.Warn("s3lock: renewal failed; retrying", "bucket", l.c.bucket, "key", l.key,
				"epoch", l.epoch, "left", l.trustedUntil().Sub(clk.Now()), "err", err)
			wait = bo.next()
		}
	}
}
