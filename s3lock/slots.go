package s3lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds slot locks (Slots, PROTOCOL.md §14): a lock that admits up
// to n holders. Its newest epoch object is a marker that records n and never
// lapses; each holder holds one of its slots, "<name>/lock-slots/<i>", a
// mutex in every respect (its own epochs, renewals, release, lapse and
// history). The marker is what keeps a slot lock and a mutex of the same
// name apart, and every holder to the same n.

// slotSet is the slots of one slot lock, as a waiting Acquire (or one
// TryAcquire) sees them.
type slotSet struct {
	n int
	// marker is the lock's marker as last read: while the LIST shows its
	// ETag unchanged, the GET is skipped.
	marker *observed
	slots  []*slotWatch
	// next is where the next round of attempts and polls starts: a random
	// slot at first, so that acquirers spread over the slots.
	next int
}

// slotWatch is one slot as the waiter last found it.
type slotWatch struct {
	i int    // 1-based
	w waiter // the slot's name, hints and seen ETag
	// held is the slot's lease as last read, nil while the slot is worth an
	// attempt; deadline is when that lease may lapse (waiter.deadline).
	held     *HeldError
	deadline time.Time
}

func newSlotSet(c *Client, name string, n int) *slotSet {
	s := &slotSet{n: n, next: rand.IntN(n)}
	for i := 1; i <= n; i++ {
		s.slots = append(s.slots, &slotWatch{i: i, w: waiter{c: c, name: slotName(name, i)}})
	}
	return s
}

// reset makes every slot worth an attempt again (the waiter's knowledge of
// them is old: it waited in line meanwhile).
func (s *slotSet) reset() {
	for _, sl := range s.slots {
		sl.held = nil
	}
}

// attemptSlots is one acquisition attempt at a slot lock: check the marker
// (writing it if the lock is free), then try the slots that may be free.
// It returns a *HeldError with Slots set when every slot is held, and one
// without when the lock is a mutex whose lease is still held (the waiter
// watches that lease, then makes the lock a slot lock).
func (w *waiter) attemptSlots(ctx context.Context) (*Lease, error) {
	c, s := w.c, w.slots
	start := c.cfg.clock.Now()
	newest, found, page, err := c.findNewest(ctx, w.name)
	if err != nil {
		return nil, err
	}
	if err := c.stillListed(ctx, w.name, newest, found, &w.hints); err != nil {
		return nil, err
	}
	next := uint64(1)
	if found {
		m := s.marker
		if r := w.hints.released; m == nil && r != nil {
			m = r // a mutex's lease this waiter watched until it was released
		}
		if !sameObject(m, &observed{key: newest.key, etag: newest.etag}) {
			m, err = c.getEpoch(ctx, newest.key, newest.epoch, "")
			switch {
			case classify(err) == failNotFound:
				return nil, errRetry // deleted since the LIST: look again
			case err != nil:
				return nil, err
			}
		}
		switch {
		case m.body.marker() && m.body.Slots != s.n:
			return nil, c.slotsError(w.name, m, s.n)
		case m.body.marker():
			s.marker = m
			if err := c.leaveToLine(ctx, w.name, w.a, &w.hints, page); err != nil {
				return nil, err
			}
			return w.trySlots(ctx)
		case !free(m) && !sameObject(m, w.hints.lapsed):
			he := c.heldError(w.name, m) // a mutex's lease: wait for it
			he.line = page.line
			return nil, he
		case newest.epoch >= MaxEpoch:
			return nil, fmt.Errorf("%w: lock %q in bucket %s reached epoch %d; use another lock name",
				ErrEpochExhausted, w.name, c.bucket, newest.epoch)
		}
		next = newest.epoch + 1
	}
	if err := c.leaveToLine(ctx, w.name, w.a, &w.hints, page); err != nil {
		return nil, err
	}
	err = c.createMarker(ctx, w.name, next, s.n, start, page)
	if herr := c.createFoundEpoch(ctx, w.name, next, err, &w.hints); herr != nil {
		return nil, herr
	}
	if err != nil {
		return nil, err
	}
	return nil, errRetry // the next attempt reads the marker and takes a slot
}

// trySlots attempts every slot that may be free, starting at a rotating
// slot, and returns the first lease it gets. When every slot is held it
// returns a *HeldError for the slot whose lease runs out first.
func (w *waiter) trySlots(ctx context.Context) (*Lease, error) {
	s := w.slots
	sub := w.a
	sub.order, sub.slots = OrderNone, 0 // the line is the lock's, not a slot's
	retry := false
	var failed error // a slot that could not be attempted; the others may be free
	for k := range s.n {
		sl := s.slots[(s.next+k)%s.n]
		if sl.held != nil {
			continue
		}
		sub.slot = slotRef{lock: w.name, slot: sl.i, slots: s.n}
		lease, err := w.c.attempt(ctx, sl.w.name, sub, &sl.w.hints)
		var held *HeldError
		switch {
		case err == nil:
			return lease, nil
		case errors.As(err, &held):
			sl.held, sl.w.hints = held, hints{}
			sl.deadline = sl.w.deadline(held.obs)
		case errors.Is(err, errRetry):
			retry = true
		case ctx.Err() != nil:
			return nil, err
		default:
			failed = err
		}
	}
	s.next = (s.next + 1) % s.n
	switch {
	case retry:
		return nil, errRetry
	case failed != nil || s.soonest() == nil:
		return nil, failed // no slot was free, and one could not be tried
	}
	return nil, w.slotsHeld(s.soonest())
}

// soonest returns the held slot whose lease may lapse first.
func (s *slotSet) soonest() *slotWatch {
	var out *slotWatch
	for _, sl := range s.slots {
		if sl.held != nil && (out == nil || sl.deadline.Before(out.deadline)) {
			out = sl
		}
	}
	return out
}

// slotsHeld is the *HeldError of a slot lock whose slots are all held,
// describing slot sl.
func (w *waiter) slotsHeld(sl *slotWatch) *HeldError {
	he := *sl.held
	he.Name, he.Slots, he.Slot = w.name, w.slots.n, sl.i
	he.ExpiresIn = max(0, sl.deadline.Sub(w.c.cfg.clock.Now()))
	return &he
}

// watchSlots waits until a slot may have become free: a held slot's object
// changed to released or vanished, or its lease's time ran out. It polls
// the held slots in turn, one conditional GET per poll interval, so that a
// waiter costs the same few requests a second whatever n is. It returns nil
// to make the caller attempt again, or an error to give up with.
func (w *waiter) watchSlots(ctx context.Context) error {
	c, s := w.c, w.slots
	clk := c.cfg.clock
	for {
		first := s.soonest()
		if first == nil {
			return nil
		}
		w.notify(w.slotsHeld(first), first.deadline)
		wait := min(jitter(c.cfg.pollInterval), max(0, first.deadline.Sub(clk.Now())), w.untilLineDuty())
		select {
		case <-ctx.Done():
			return w.gaveUp(ctx)
		case <-clk.After(wait):
		}
		if err := w.headDuty(ctx, false); err != nil {
			return err
		}
		if !clk.Now().Before(first.deadline) {
			if _, ok := remaining(first.held.obs); !ok {
				first.w.hints.lapsed = first.held.obs
			}
			first.held = nil
			return nil // its time is up: the attempt judges by the store's clock
		}
		sl := s.pollNext()
		obs := sl.held.obs
		o, err := c.getEpoch(ctx, obs.key, obs.epoch, obs.etag)
		switch f := classify(err); {
		case err == nil && o.body.Released:
			sl.w.hints.released, sl.held = o, nil
			return nil // released
		case err == nil: // renewed
			sl.held = c.heldError(sl.w.name, o)
			sl.deadline = sl.w.deadline(o)
		case f == failNotModified:
		case f == failNotFound:
			sl.held = nil
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

// pollNext returns the next held slot to poll, in turn.
func (s *slotSet) pollNext() *slotWatch {
	for range s.n {
		sl := s.slots[s.next]
		s.next = (s.next + 1) % s.n
		if sl.held != nil {
			return sl
		}
	}
	return s.soonest()
}

// createMarker makes the lock name a slot lock of n slots: it creates epoch
// (the next one; the lock is free) as a marker, with the same conditional
// create, read-back and staleness check as a lease (§5), so that a mutex
// acquirer and the marker's writer never both get that epoch.
func (c *Client) createMarker(ctx context.Context, name string, epoch uint64, n int, start time.Time, page *listed) error {
	p := payload{
		Holder:     c.cfg.holder,
		Format:     markerFormat,
		Epoch:      epoch,
		Nonce:      randomHex(16),
		Write:      randomHex(8),
		AcquiredAt: c.cfg.clock.Now().UTC(),
		Slots:      n,
		Reason: fmt.Sprintf("marker of a lock with %d slots: its holders hold %s1 to %s%d",
			n, slotPrefix(name), slotPrefix(name), n),
	}
	if _, err := c.createObject(ctx, name, epoch, p); err != nil {
		return err
	}
	if err := c.stillNewest(ctx, name, epoch, p, start); err != nil {
		return err
	}
	c.cfg.logger.Info("s3lock: the lock is now a slot lock", "bucket", c.bucket, "key", epochKey(name, epoch), "slots", n)
	c.startCleanup(c.cleanupFor(name, epoch, page))
	return nil
}

// slotsError is the *SlotsError of an acquirer that asked for want slots of
// the lock whose marker was read in m.
func (c *Client) slotsError(name string, m *observed, want int) *SlotsError {
	return &SlotsError{Bucket: c.bucket, Name: name, Key: m.key, Slots: m.body.Slots, Want: want}
}

// slotHolders returns the held slots of the slot lock name, sorted by slot:
// newest is the newest epoch of each slot as a listing found it (nil: list
// the slots first, one LIST), then one GET of each, up to eight at a time.
func (c *Client) slotHolders(ctx context.Context, name string, newest map[int]listedEpoch) ([]State, error) {
	if newest == nil {
		newest = map[int]listedEpoch{}
		err := c.listKeys(ctx, slotPrefix(name), func(k listedKey) {
			if lock, i, epoch, ok := slotOwner(k.key); ok && lock == name {
				if cur, seen := newest[i]; !seen || epoch > cur.epoch {
					newest[i] = listedEpoch{key: k.key, epoch: epoch}
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	slots := make([]int, 0, len(newest))
	for i := range newest {
		slots = append(slots, i)
	}
	slices.Sort(slots)
	states := make([]State, len(slots))
	errs := make([]error, len(slots))
	forEach(len(slots), listConcurrency, func(k int) {
		e := newest[slots[k]]
		obs, err := c.getEpoch(ctx, e.key, e.epoch, "")
		if err != nil {
			errs[k] = err
			return
		}
		states[k] = c.stateOf(name, obs)
		states[k].Slot = slots[k]
	})
	var out []State
	for k, st := range states {
		switch {
		case classify(errs[k]) == failNotFound:
			// Deleted since the LIST: superseded by a newer epoch.
		case errs[k] != nil:
			return nil, errs[k]
		case st.Held:
			out = append(out, st)
		}
	}
	return out, nil
}

// validateSlot checks a slot number of a lock.
func validateSlot(slot int) error {
	if slot < 1 || slot > MaxSlots {
		return invalid("slot %d is outside [1, %d]", slot, MaxSlots)
	}
	return nil
}

// splitSlotName returns the lock and slot of a slot's name
// ("<name>/lock-slots/<i>"); ok is false for any other name.
func splitSlotName(sub string) (name string, slot int, ok bool) {
	i := strings.LastIndex(sub, "/"+slotSegment+"/")
	if i <= 0 {
		return "", 0, false
	}
	name, digits := sub[:i], sub[i+len(slotSegment)+2:]
	slot, err := strconv.Atoi(digits)
	if err != nil || validateSlot(slot) != nil || strconv.Itoa(slot) != digits || ValidateName(name) != nil {
		return "", 0, false
	}
	return name, slot, true
}
