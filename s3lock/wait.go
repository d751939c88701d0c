package s3lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Acquire takes the lock name, waiting as long as ctx allows. While the lock
// is held it watches the holder's epoch object with a conditional GET every
// poll interval, start to start, so a release is noticed within one
// interval and a GET; a poll that reads the release creates the next epoch
// at once, with the LIST an attempt starts with sent beside the create
// (PROTOCOL.md §5, "The direct create"). It also wakes when the holder's
// lease would lapse. Transient
// failures (5xx, throttling, timeouts, the SDK's retry quota) are retried
// with capped exponential backoff. Errors that waiting cannot fix (access
// denied, a missing bucket, an unreadable lease object, invalid arguments)
// are returned at once.
//
// With an order (WithOrder) it waits in the lock's line instead
// (PROTOCOL.md §13): it is served in the order the ordered waiters joined,
// polls the holder only once it is at the head, takes a free lock only when
// nobody is ahead of it, and an OrderNewest waiter returns a *SupersededError
// (ErrSuperseded) when a newer OrderNewest waiter joins.
//
// When ctx ends (or WithWait's bound passes), Acquire returns an error
// that matches ctx's error and wraps the last reason it could not acquire:
// a *HeldError (errors.Is(err, ErrHeld)) or the last transient failure.
// With WithWait, the first attempt's failures are returned at once instead;
// WithWait(0) makes Acquire a TryAcquire.
func (c *Client) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	a, err := c.acquireConfig(opts)
	if err != nil {
		return nil, err
	}
	if a.waitSet && a.wait == 0 {
		lease, err := c.tryAcquire(ctx, name, a)
		c.observeAcquire(name, lease, err, 0, true)
		return lease, err
	}
	w := newWaiter(c, name, a)
	defer w.stopWaiting()
	start := c.cfg.clock.Now()
	lease, err := w.acquire(ctx)
	w.line.leave(ctx)
	c.observeAcquire(name, lease, err, c.cfg.clock.Now().Sub(start), false)
	return lease, err
}

// acquire is Acquire's loop: attempt, and while the lock is held (or, for an
// ordered waiter, others are ahead in line), wait.
func (w *waiter) acquire(ctx context.Context) (*Lease, error) {
	c, a := w.c, w.a
	outer := ctx
	w.outer = outer
	ctx = w.boundAttempts(ctx)
	bo := newBackoff(acquireRetryBase, acquireRetryMax)
	// Retries after the lock changed under an attempt back off too: a store
	// whose listing and reads disagree for good (a name that collides with
	// an object, on some stores) must not be spun on.
	changed := newBackoff(changedRetry, acquireRetryMax)
	for {
		if ctx.Err() != nil {
			return nil, w.gaveUp(ctx)
		}
		w.looked = w.c.cfg.clock.Now()
		lease, err := w.lock.attempt(ctx, w.line.atHead())
		var held *HeldError
		var gaveUp *waitError
		switch {
		case err == nil:
			return lease, nil
		case errors.As(err, &gaveUp):
			return nil, err // the wait for shares within the attempt ended (awaitShares)
		case errors.As(err, &held), errors.Is(err, errLineBusy):
			bo.reset()
			changed.reset()
			if ctx, err = w.onHeld(outer, held, err); err != nil {
				return nil, err
			}
		case errors.Is(err, errRetry):
			w.last = err
			select { // the lock moved under the attempt: look again shortly
			case <-ctx.Done():
			case <-c.cfg.clock.After(changed.next()):
			}
		case a.waitSet && !w.sawHeld && ctx.Err() == nil:
			return nil, err // not held (yet): report it rather than wait
		case errors.Is(err, ErrUnavailable), classify(err) == failCanceled && ctx.Err() == nil:
			w.last = err
			c.cfg.logger.Warn("s3lock: acquire attempt failed; retrying", "bucket", c.bucket, "lock", w.name, "err", err)
			select {
			case <-ctx.Done():
			case <-c.cfg.clock.After(bo.next()):
			}
		case ctx.Err() != nil:
			return nil, w.gaveUp(ctx)
		default:
			return nil, err
		}
	}
}

// onHeld is acquire's answer to an attempt that found the lock held (held;
// err its error) or, for an ordered waiter, free while others wait in line
// (held nil): it waits for its turn in line, or for the holder, until the
// next attempt. It returns the context the following attempts run under
// (the waiting's, from the first time the lock is found held: outer bounds
// it).
func (w *waiter) onHeld(outer context.Context, held *HeldError, err error) (context.Context, error) {
	ctx := w.waiting(outer)
	if held != nil {
		w.last, w.held = err, held
	}
	if w.line != nil {
		waited, terr := w.line.takeTurn(ctx, w)
		if terr != nil {
			return ctx, terr
		}
		w.line.head = true // its attempts now take a free lock
		if waited || held == nil {
			w.lock.forget()
			return ctx, nil // the lock may have changed meanwhile: look again
		}
	}
	werr := w.lock.wait(ctx, w, held)
	if werr == nil {
		// About to attempt: an OrderNewest head looks whether a newer
		// OrderNewest waiter joined since its last look.
		werr = w.line.headDuty(ctx, w, true)
	}
	if errors.Is(werr, errNotHead) {
		w.line.head = false
		return ctx, nil
	}
	return ctx, werr
}

// lockMode is one kind of lock as an acquisition sees it, chosen once
// (newLockMode): a mutex (acquire.go, and its wait below) or a slot lock
// (slotLock, slots.go). Each owns its attempt, its wait for what it found
// held and what it knows meanwhile, as etcd's client/v3/concurrency/mutex.go
// is a tryAcquire and a wait (waitDeletes) over the mutex's own state; the
// waiter's loop and the line's waiting (lineWait, line_wait.go) are the same
// for both.
type lockMode interface {
	// attempt makes one acquisition attempt; head says that it is made by
	// the head of the lock's line.
	attempt(ctx context.Context, head bool) (*Lease, error)
	// wait waits, for w, until what the last attempt found held (held)
	// may be free: nil to attempt again, or an error to give up with.
	wait(ctx context.Context, w *waiter, held *HeldError) error
	// forget drops what it knows of the holders: it waited in line
	// meanwhile, so that is old.
	forget()
}

// newLockMode returns the acquisition of the lock name: a slot lock's with
// WithSlots(n), n > 1, else a mutex's.
func newLockMode(c *Client, name string, a acquireConfig) lockMode {
	switch {
	case a.slots > 1:
		return newSlotLock(c, name, a)
	case a.shared:
		return &sharedLock{lock: mutex{c: c, name: name, a: a}}
	}
	return &mutex{c: c, name: name, a: a, direct: true}
}

// newWaiter returns the state of an acquisition of name.
func newWaiter(c *Client, name string, a acquireConfig) *waiter {
	w := &waiter{c: c, name: name, a: a, lock: newLockMode(c, name, a)}
	if m, ok := w.lock.(*mutex); ok {
		m.waiter = w // an exclusive acquisition may wait for shares within an attempt
	}
	if a.order.ordered() {
		w.line = &lineWait{}
	}
	return w
}

// boundAttempts returns ctx bounded, with WithWait, for the attempts made
// before the lock is first found held: by the wait, but never by less than
// minAttemptWait (so a wait shorter than a slow store's round trips does not
// turn a free lock into a timeout); ctx itself without WithWait. A store
// that answers too slowly, or whose answers keep an attempt going, cannot
// hold Acquire past it.
func (w *waiter) boundAttempts(ctx context.Context) context.Context {
	if w.a.wait <= 0 {
		return ctx
	}
	w.attemptsBound = max(w.a.wait, minAttemptWait)
	ctx, w.cancelAttempts = context.WithTimeoutCause(ctx, w.attemptsBound, errAttemptsTimedOut)
	return ctx
}

// errAttemptsTimedOut is the cause of the end of boundAttempts's context.
var errAttemptsTimedOut = errors.New("s3lock: no attempt finished within the wait")

// startWaiting returns ctx bounded by WithWait, counted from now
// (when the lock was first found held); ctx itself without one.
func (w *waiter) startWaiting(ctx context.Context) context.Context {
	if w.a.wait <= 0 {
		return ctx
	}
	ctx, w.cancelWait = context.WithTimeoutCause(ctx, w.a.wait, errWaitRanOut)
	return ctx
}

// waiting returns the context the waiter's waits and attempts run under
// once it found the lock held: bounded by WithWait from the first time
// (startWaiting), outer itself without it.
func (w *waiter) waiting(outer context.Context) context.Context {
	if !w.sawHeld {
		w.waitCtx = w.startWaiting(outer)
		w.sawHeld = true
	}
	return w.waitCtx
}

// sharesFound is an exclusive acquisition's wait for the shared holders
// below its pending epoch (awaitShares, PROTOCOL.md §17): the lock is held,
// as by a holder, so WithWait counts from now if it did not already, and the
// wait observer hears who holds it. It returns the context the wait runs
// under.
func (w *waiter) sharesFound(held *HeldError) context.Context {
	ctx := w.waiting(w.outer)
	w.last, w.held = held, held
	w.notify(held, time.Time{})
	return ctx
}

// lineDuty is the line's duty of a waiter whose attempt waits for shared
// holders (awaitShares): its ticket's heartbeat, so that its place stays
// while its pending epoch keeps new readers out.
func (w *waiter) lineDuty(ctx context.Context) error {
	err := w.line.headDuty(ctx, w, false)
	if errors.Is(err, errNotHead) {
		w.line.head = false
		return errRetry
	}
	return err
}

// errWaitRanOut is the cause of the end of startWaiting's context.
var errWaitRanOut = errors.New("s3lock: the wait ran out")

// waitEnded says, for people, what ended a wait whose context ctx is done:
// the wait (WithWait, d) ran out, the caller's deadline passed, or the
// caller cancelled it (with the cause it gave, such as a signal) — never
// Go's "context deadline exceeded".
func waitEnded(ctx context.Context, d time.Duration) string {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errWaitRanOut):
		return fmt.Sprintf("the wait (%s) ran out", d)
	case errors.Is(cause, context.DeadlineExceeded):
		return "the time the caller allowed ran out"
	case cause != nil && !errors.Is(cause, context.Canceled):
		return "the caller stopped waiting: " + strings.TrimPrefix(cause.Error(), "s3lock: ")
	}
	return "the caller stopped waiting (cancelled)"
}

// stopWaiting releases what boundAttempts and startWaiting set up.
func (w *waiter) stopWaiting() {
	if w.cancelAttempts != nil {
		w.cancelAttempts()
	}
	if w.cancelWait != nil {
		w.cancelWait()
	}
}

// waiter is the state of one waiting Acquire: the loop (acquire, onHeld),
// its bounds, and what it reports; what it waits for is its lock's
// (lockMode), and where it stands in line its line's (lineWait).
type waiter struct {
	c    *Client
	name string
	a    acquireConfig
	lock lockMode
	line *lineWait // nil without an order
	last error     // why the last attempt did not acquire
	// sawHeld is set once an attempt found the lock held (WithWait stops
	// failing fast).
	sawHeld    bool
	cancelWait context.CancelFunc // of the WithWait bound, once set
	// outer is Acquire's context; waitCtx the waiting's (waiting), once
	// the lock was found held.
	outer, waitCtx context.Context
	// attemptsBound bounds the attempts before the lock is first found
	// held (WithWait), and cancelAttempts ends it; see boundAttempts.
	attemptsBound  time.Duration
	cancelAttempts context.CancelFunc

	held   *HeldError // the holder the last attempt found, if any
	notice notice     // what notify last reported
	// looked is when the last look at the lock (an attempt, a poll) began:
	// polls start one poll interval apart at most, start to start, however
	// long each look took (poll).
	looked time.Time
}

// notice is what the wait observer was last told, and when.
type notice struct {
	at     time.Time
	holder string
	epoch  uint64
	ahead  int
}

func (w *waiter) gaveUp(ctx context.Context) error {
	last := w.last
	if errors.Is(last, errRetry) {
		last = nil
	}
	e := &waitError{Bucket: w.c.bucket, Name: w.name, Err: ctx.Err(), Why: waitEnded(ctx, w.a.wait), Last: last}
	if !w.sawHeld && errors.Is(context.Cause(ctx), errAttemptsTimedOut) {
		e.Attempting = w.attemptsBound
	}
	return e
}

// poll waits for the next look at a held lock: one poll interval (less up
// to 10%) after the last look began, start to start, so that a release is
// seen within one interval and a round trip (unless a look itself takes
// longer than an interval); no later than deadline (when the holder's time
// may run out). The line's duties (an ordered waiter's heartbeat, its look
// at the line) fall due in between: poll does them (headDuty) and waits on,
// so that they add no look at the holder. It returns the waiter's error
// when ctx ends.
func (w *waiter) poll(ctx context.Context, deadline time.Time) error {
	clk := w.c.cfg.clock
	next := w.looked.Add(earlier(w.c.cfg.pollInterval))
	for {
		now := clk.Now()
		wait := min(max(0, next.Sub(now)), max(0, deadline.Sub(now)), w.line.untilDuty(clk))
		select {
		case <-ctx.Done():
			return w.gaveUp(ctx)
		case <-clk.After(wait):
		}
		if err := w.line.headDuty(ctx, w, false); err != nil {
			return err
		}
		now = clk.Now()
		if now.Before(next) && now.Before(deadline) && w.line.untilDuty(clk) > 0 {
			continue // woken for the line's duty alone, which is done
		}
		w.looked = now
		return nil
	}
}

// wait waits until the lease described by held may have ended: its object
// changed to released, vanished, or its time ran out. It returns nil to make
// the caller attempt again, or an error to give up with.
func (m *mutex) wait(ctx context.Context, w *waiter, held *HeldError) error {
	clk := m.c.cfg.clock
	obs := held.obs
	deadline := m.deadline(obs)
	w.notify(held, deadline)
	for {
		if err := w.poll(ctx, deadline); err != nil {
			return err
		}
		if !clk.Now().Before(deadline) {
			m.timeUp(obs)
			return nil // its time is up: the attempt judges by the store's clock
		}
		o, err := m.c.getEpoch(ctx, obs.key, obs.epoch, obs.etag)
		switch f := classify(err); {
		case err == nil && o.body.Released:
			m.known.released, m.polled = o, true
			return nil // released
		case err == nil:
			obs = o // renewed
			deadline = m.deadline(obs)
			w.notify(m.c.heldError(m.name, obs), deadline)
		case f == failNotModified:
			w.notify(held, deadline)
		case f == failNotFound:
			return nil
		case errors.Is(err, ErrUnavailable), f == failCanceled && ctx.Err() == nil:
			w.last = err
		case ctx.Err() != nil:
			return w.gaveUp(ctx)
		default:
			return err
		}
	}
}

// timeUp is the end of a watch of the lease read in obs whose deadline
// passed: on a store that does not say what time it is, the lease has
// lapsed (known.lapsed); else the attempt judges by the store's clock.
func (m *mutex) timeUp(obs *observed) {
	if _, ok := remaining(obs); !ok {
		m.known.lapsed = obs
	}
}

// deadline is when, by this client's clock, the lease read in obs may have
// lapsed if it is not renewed: from the store's clock when the store says
// what time it is (the attempt then re-checks by that clock), else once this
// client has seen the same ETag for the lease's whole validity plus slack,
// counted from when it first received it (the holder's last write was sent
// before that, so the holder stopped trusting the lease earlier).
func (m *mutex) deadline(obs *observed) time.Time {
	if left, ok := remaining(obs); ok {
		return obs.sent.Add(left)
	}
	if obs.etag != m.seenEtag {
		m.seenEtag, m.seenAt = obs.etag, obs.received
	}
	return m.seenAt.Add(obs.body.validity() + serverSlack)
}

// notify calls the wait observer when the holder (or, in line, the number of
// waiters ahead) changes, and at most once a second otherwise.
func (w *waiter) notify(held *HeldError, deadline time.Time) {
	now := w.c.cfg.clock.Now()
	h := *held
	if !deadline.IsZero() {
		h.ExpiresIn = max(0, deadline.Sub(now))
	}
	last := w.notice
	changed := h.Holder != last.holder || h.Epoch != last.epoch || h.Ahead != last.ahead
	if !changed && now.Sub(last.at) < waitNotifyEvery {
		return
	}
	w.notice = notice{at: now, holder: h.Holder, epoch: h.Epoch, ahead: h.Ahead}
	if changed && h.Holder != "" {
		w.c.cfg.logger.Info("s3lock: waiting for lock", "bucket", w.c.bucket, "lock", w.name,
			"holder", h.Holder, "epoch", h.Epoch, "expires_in", h.ExpiresIn.Round(time.Millisecond))
	}
	if w.a.onWait != nil {
		w.a.onWait(&h)
	}
}
