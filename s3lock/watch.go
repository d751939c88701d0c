package s3lock

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"
)

// Watch follows the lock name and yields its State each time it changes:
// first the state it finds, then one State per new epoch, change of holder,
// release or lapse (renewals are not changes). It is how followers learn who
// leads: a leader runs its work under Do, the others Watch.
//
// Watching costs what waiting does: while the lock is held, a conditional GET
// of the holder's epoch object every poll interval (WithPollInterval,
// jittered); while it is free, a GET of the key the next epoch will have
// (alternating, while the newest lease has lapsed, with a conditional GET of
// it, which an operator may still release); a LIST at the start, after a
// failure once the lock is free, and every watchResync while it is free. So it sees every epoch as long as each lasts longer than a
// poll interval or two, and a lapse within a poll interval of its lapsing by
// the store's clock.
//
// A shared lock (WithShared) is followed by a GET of the next epoch's key
// and a LIST of its shares every poll interval, and a GET of each share when
// one joins, leaves or lapses: its States have Shared set and Holders
// listing the shared holders, and a pending writer's have Pending set.
//
// On a store that sends no Date header it cannot judge a lapse, and reports
// none. Transient failures (ErrUnavailable) are retried with backoff and not
// yielded (so a store that cannot be reached at all yields nothing: read
// the lock once with Current first to fail fast); other errors (access denied, no such bucket, an unreadable epoch
// object, an invalid name) are yielded once, with a zero State, and end the
// sequence. The sequence ends when ctx ends or the loop stops.
func (c *Client) Watch(ctx context.Context, name string) iter.Seq2[State, error] {
	return func(yield func(State, error) bool) {
		if err := ValidateName(name); err != nil {
			yield(State{}, err)
			return
		}
		w := &watcher{c: c, name: name, yield: yield}
		w.run(ctx)
	}
}

// watchResync is how often a watcher of a free lock lists its epochs, in case
// it missed one (say, during an outage).
const watchResync = 30 * time.Second

// watcher is the state of one Watch.
type watcher struct {
	c     *Client
	name  string
	yield func(State, error) bool

	cur      *observed // the newest epoch object as last read; nil if none
	last     State     // the last state yielded
	yielded  bool
	resyncAt time.Time // when to list again (zero: now)
	flip     bool      // alternates, while the newest epoch is lapsed, between it and the next key
	// While the newest epoch is shared or pending: its shares as last
	// listed (key and ETag, to tell a change), and who holds them.
	shareList map[string]sizeVerdict
	holders   []State
}

func (w *watcher) run(ctx context.Context) {
	clk := w.c.cfg.clock
	bo := newBackoff(acquireRetryBase, acquireRetryMax)
	for ctx.Err() == nil {
		err := w.step(ctx)
		if err == nil {
			err = w.slotLock()
		}
		var wait time.Duration
		switch {
		case err == nil:
			bo.reset()
			if !w.report() {
				return
			}
			wait = w.pause()
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrUnavailable), classify(err) == failCanceled:
			w.c.cfg.logger.Warn("s3lock: watching the lock failed; retrying", "bucket", w.c.bucket, "lock", w.name, "err", err)
			w.resyncAt = time.Time{} // something may have happened meanwhile
			wait = bo.next()
		default:
			w.yield(State{}, err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(wait):
		}
	}
}

// slotLock refuses a slot lock (WithSlots), whose newest epoch object is a
// marker: before any state of it is yielded.
func (w *watcher) slotLock() error {
	if w.cur == nil || !w.cur.body.marker() {
		return nil
	}
	return fmt.Errorf("%w: lock %q in bucket %s is a slot lock with %d slots (marker %s); Watch follows the "+
		"holder of a mutex: read who holds the slots with Current (State.Holders)", ErrSlotsMismatch,
		w.name, w.c.bucket, w.cur.body.Slots, w.cur.key)
}

// step makes the request that is due: a LIST and GET when a resync is due,
// else a look at the newest epoch object (held) or at the next epoch's key
// (free).
func (w *watcher) step(ctx context.Context) error {
	if err := w.look(ctx); err != nil {
		return err
	}
	if w.cur == nil || !w.cur.body.sharedEpoch() && !w.cur.body.Pending {
		w.shareList, w.holders = nil, nil
		return nil
	}
	return w.shares(ctx)
}

// look makes the request on the lock's epochs that is due (step).
func (w *watcher) look(ctx context.Context) error {
	now := w.c.cfg.clock.Now()
	if w.cur != nil && w.cur.body.sharedEpoch() {
		return w.nextEpoch(ctx) // open while it is the newest: look for the next
	}
	held := w.cur != nil && !free(w.cur)
	if !held && !now.Before(w.resyncAt) {
		return w.resync(ctx)
	}
	if !held && w.cur != nil && !w.cur.body.Released {
		// Lapsed: it may still be released (an operator's ForceRelease)
		// or renewed late; look at it every other poll (a 304 when not).
		w.flip = !w.flip
		if w.flip {
			return w.reread(ctx, w.cur.etag)
		}
	}
	if !held {
		return w.nextEpoch(ctx)
	}
	if !now.Before(w.lapseAt()) {
		return w.reread(ctx, "") // it may have lapsed: judge by the store's clock
	}
	return w.reread(ctx, w.cur.etag)
}

// nextEpoch looks for the epoch after the newest (a GET of its key) and
// makes it the newest if it exists.
func (w *watcher) nextEpoch(ctx context.Context) error {
	next := uint64(1)
	if w.cur != nil {
		next = w.cur.epoch + 1
	}
	if next > MaxEpoch {
		return nil
	}
	o, err := w.c.getEpoch(ctx, epochKey(w.name, next), next, "")
	switch {
	case classify(err) == failNotFound:
		return nil // not yet
	case err != nil:
		return err
	}
	w.cur = o
	return nil
}

// shares lists the shares of a lock whose newest epoch is shared or
// pending (one LIST), and reads them again (a GET each) only when the
// listing changed: a join, a leave or a renewal.
func (w *watcher) shares(ctx context.Context) error {
	listed := map[string]listedEpoch{}
	sig := map[string]sizeVerdict{}
	err := w.c.listKeys(ctx, sharePrefix(w.name), func(k listedKey) {
		e := listedEpoch{key: k.key, etag: k.etag, lastModified: k.lastModified, size: k.size}
		listed[k.key] = e
		sig[k.key], _ = judgeListed(e, k.date) // a renewal changes nothing here; a release or a lapse does
	})
	if err != nil {
		return err
	}
	if w.shareList != nil && maps.Equal(sig, w.shareList) {
		return nil
	}
	s, err := w.c.withShareHolders(ctx, w.c.stateOf(w.name, w.cur), w.cur, listed)
	if err != nil {
		return err
	}
	w.shareList, w.holders = sig, s.Holders
	return nil
}

// lapseAt is when, by this client's clock, the lease last read may lapse if
// its holder does not renew it: by the store's clock when it says what time
// it is, else a validity plus slack after this client read it.
func (w *watcher) lapseAt() time.Time {
	if left, ok := remaining(w.cur); ok {
		return w.cur.sent.Add(left)
	}
	return w.cur.received.Add(w.cur.body.validity() + serverSlack)
}

// reread reads the newest epoch object again (conditionally on etag, if
// set). A deleted object makes the watcher list again.
func (w *watcher) reread(ctx context.Context, etag string) error {
	o, err := w.c.getEpoch(ctx, w.cur.key, w.cur.epoch, etag)
	switch {
	case err == nil:
		w.cur = o
		return nil
	case classify(err) == failNotModified:
		return nil
	case classify(err) == failNotFound:
		return w.resync(ctx)
	}
	return err
}

// resync finds the lock's newest epoch with a LIST, and reads it.
func (w *watcher) resync(ctx context.Context) error {
	newest, found, _, err := w.c.findNewest(ctx, w.name)
	if err != nil {
		return err
	}
	w.resyncAt = w.c.cfg.clock.Now().Add(watchResync)
	if !found {
		w.cur = nil
		return nil
	}
	o, err := w.c.getEpoch(ctx, newest.key, newest.epoch, "")
	if classify(err) == failNotFound {
		return nil // deleted since the LIST: the next step looks again
	}
	if err != nil {
		return err
	}
	w.cur = o
	return nil
}

// report yields the state if it changed; false if the loop stopped.
func (w *watcher) report() bool {
	var s State
	if w.cur == nil {
		s = State{Name: w.name}
	} else {
		s = w.c.stateOf(w.name, w.cur)
	}
	if w.shareList != nil {
		s = heldByShares(s, w.holders)
	}
	if w.yielded && s.Epoch == w.last.Epoch && s.Phase() == w.last.Phase() && s.Holder == w.last.Holder &&
		s.Pending == w.last.Pending && sameHolders(s.Holders, w.last.Holders) {
		return true
	}
	w.last, w.yielded = s, true
	return w.yield(s, nil)
}

// sameHolders reports whether a and b list the same holders' objects.
func sameHolders(a, b []State) bool {
	return slices.EqualFunc(a, b, func(x, y State) bool { return x.Key == y.Key })
}

// pause is how long to wait before the next step: a poll interval, or less
// when the holder's lease may lapse sooner.
func (w *watcher) pause() time.Duration {
	wait := jitter(w.c.cfg.pollInterval)
	if w.cur == nil || free(w.cur) || w.cur.body.sharedEpoch() {
		return wait
	}
	return max(minPollInterval, min(wait, w.lapseAt().Sub(w.c.cfg.clock.Now())))
}
