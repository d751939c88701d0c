package s3lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// slotLock is the acquisition of a slot lock (WithSlots(n), n > 1): a type
// of its own, as Consul's api/semaphore.go is beside its lock, that owns its
// attempt (the marker, then the slots), its wait for a slot, and what it
// knows of the slots meanwhile. The marker plays the part of the
// semaphore's ".lock" key: it records n, which every holder must agree on
// (a *SlotsError otherwise, the semaphore's limit conflict). The mutex's
// acquisition knows nothing of slots; each slot is one (slotWatch.m).
type slotLock struct {
	// lock is the lock itself, as a mutex: what its attempts know of its
	// newest epoch (the marker, or a mutex's lease while it is one), and
	// the wait for a mutex's lease (wait).
	lock mutex
	n    int
	// marker is the lock's marker as last read: while the LIST shows its
	// ETag unchanged, the GET is skipped.
	marker *observed
	// sizeCoded is set when the marker says that the slots' epochs carry
	// size codes (format 3): only then are slots judged from a listing.
	sizeCoded bool
	slots     []*slotWatch
	// next is where the next round of attempts and polls starts: a random
	// slot at first, so that acquirers spread over the slots.
	next int
}

// slotWatch is one slot as the slot lock last found it.
type slotWatch struct {
	i int   // 1-based
	m mutex // the slot, a mutex: its name, what its attempts know, the ETag it saw
	// held is the slot's lease as last read, nil while the slot is worth an
	// attempt or known only from a listing; deadline is when that lease may
	// lapse (mutex.deadline), or, for one judged held from a listing
	// (listedHeld), the earliest it may.
	held       *HeldError
	listedHeld bool
	deadline   time.Time
	// newest is the slot's newest epoch as the last listing of the slots
	// showed it, in page (found false: none); listedFree is set when that
	// listing judged it free from its size code.
	newest     listedEpoch
	found      bool
	page       *listed
	listedFree bool
}

func newSlotLock(c *Client, name string, a acquireConfig) *slotLock {
	s := &slotLock{lock: mutex{c: c, name: name, a: a}, n: a.slots, next: rand.IntN(a.slots)}
	sub := a
	sub.order, sub.slots = OrderNone, 0 // the line is the lock's, not a slot's
	for i := 1; i <= s.n; i++ {
		sub.slot = slotRef{lock: name, slot: i, slots: s.n}
		s.slots = append(s.slots, &slotWatch{i: i, m: mutex{c: c, name: slotName(name, i), a: sub}})
	}
	return s
}

// forget makes every slot worth an attempt again (what the slot lock knew
// of them is old: it waited in line meanwhile).
func (s *slotLock) forget() {
	for _, sl := range s.slots {
		sl.held, sl.listedHeld = nil, false
	}
}

// attempt is one acquisition attempt at a slot lock: check the marker
// (writing it if the lock is free), then try the slots that may be free.
// It returns a *HeldError of the slots when every slot is held, and one of
// the lock when the lock is a mutex whose lease is still held (the slot
// lock waits for that lease, then makes the lock a slot lock).
func (s *slotLock) attempt(ctx context.Context, head bool) (*Lease, error) {
	c, name := s.lock.c, s.lock.name
	start := c.cfg.clock.Now()
	newest, found, page, err := c.findNewest(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.lock.stillListed(ctx, newest, found); err != nil {
		return nil, err
	}
	next := uint64(1)
	if found {
		m, err := s.readMarker(ctx, newest)
		switch {
		case err != nil:
			return nil, err
		case m.body.marker() && m.body.Slots != s.n:
			return nil, c.slotsError(name, m, s.n)
		case m.body.sharedEpoch() || m.body.Pending:
			// Shares may be held (even below an ended pending epoch):
			// slots taken beside them would not exclude them.
			return nil, c.slotsError(name, m, s.n)
		case m.body.marker():
			s.marker, s.sizeCoded = m, m.body.Format >= sizeCodedMarkers
			if err := s.lock.leaveToLine(ctx, head, page); err != nil {
				return nil, err
			}
			return s.trySlots(ctx)
		}
		if err := s.lock.busy(m, newest, page); err != nil {
			return nil, err // a mutex's lease: wait for it
		}
		next = newest.epoch + 1
	}
	if err := s.lock.leaveToLine(ctx, head, page); err != nil {
		return nil, err
	}
	err = c.createMarker(ctx, name, next, s.n, start, page)
	if herr := s.lock.createFoundEpoch(ctx, next, err); herr != nil {
		return nil, herr
	}
	if err != nil {
		return nil, err
	}
	return nil, errRetry // the next attempt reads the marker and takes a slot
}

// readMarker returns the lock's newest epoch object, as listed in newest:
// the marker as last read, or a mutex's lease the slot lock watched until
// it was released, if the listing shows the same ETag; else one GET
// (errRetry if it was deleted since the LIST).
func (s *slotLock) readMarker(ctx context.Context, newest listedEpoch) (*observed, error) {
	m := s.marker
	if r := s.lock.known.released; m == nil && r != nil {
		m = r // a mutex's lease this slot lock watched until it was released
	}
	if sameObject(m, &observed{key: newest.key, etag: newest.etag}) {
		return m, nil
	}
	m, err := s.lock.c.getEpoch(ctx, newest.key, newest.epoch, "")
	if classify(err) == failNotFound {
		return nil, errRetry // deleted since the LIST: look again
	}
	return m, err
}

// trySlots lists the slots' epochs (one LIST of "<name>/lock-slots/") and
// judges each slot from its newest epoch's size code (judgeListed): it
// creates the next epoch of a slot judged free without reading it, reads a
// slot the listing cannot judge, and passes over a slot judged held,
// starting at a rotating slot, until it gets a lease. When every slot is
// held it reads the slot that may lapse first and returns a *HeldError for
// it: four requests for a full lock, the LIST and GET of the marker
// included, whatever the number of slots (PROTOCOL.md §14).
func (s *slotLock) trySlots(ctx context.Context) (*Lease, error) {
	start := s.lock.c.cfg.clock.Now()
	if err := s.listSlots(ctx); err != nil {
		return nil, err
	}
	retry := false
	var failed error // a slot that could not be attempted; the others may be free
	for k := range s.n {
		sl := s.slots[(s.next+k)%s.n]
		if sl.listedHeld || sl.held != nil {
			continue // held, as listed now or as read before with the ETag listed now
		}
		lease, err := sl.attempt(ctx, start)
		switch {
		case err == nil:
			return lease, nil
		case errors.Is(err, errRetry):
			retry = true
		case ctx.Err() != nil:
			return nil, err
		case sl.held == nil:
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
	if first := s.soonest(); first.held == nil {
		// Judged held from the listing: read it, to say who holds it and
		// until when (or take it, if it was freed meanwhile).
		first.listedHeld = false
		lease, err := first.attempt(ctx, start)
		switch {
		case err == nil:
			return lease, nil
		case first.held == nil:
			return nil, err
		}
	}
	return nil, s.slotsHeld(s.shown())
}

// listSlots lists the epochs of every slot (one LIST of the slots' prefix,
// one per thousand keys) and judges each slot's newest epoch from it.
func (s *slotLock) listSlots(ctx context.Context) error {
	c := s.lock.c
	pages, err := c.slotPages(ctx, s.lock.name)
	if err != nil {
		return err
	}
	now := c.cfg.clock.Now()
	for _, sl := range s.slots {
		sl.page = pages[sl.i]
		if sl.page == nil {
			sl.page = &listed{}
		}
		prev, wasRead := sl.newest, sl.held != nil && !sl.listedHeld
		sl.newest, sl.found = sl.page.newest()
		sameEpoch := sl.found && sl.newest.key == prev.key
		if wasRead && sameEpoch && sl.newest.etag == prev.etag {
			continue // unchanged since it was read held: its deadline stands
		}
		sl.listedHeld, sl.listedFree = false, false
		v, soonest := sizeUnknown, time.Time{}
		if sl.found && s.sizeCoded {
			v, soonest = judgeListed(sl.newest, sl.page.date)
		}
		switch v {
		case sizeHeld:
			// Renewed, or taken by someone else: held either way. The
			// lease last read of the same epoch goes on describing it.
			sl.listedHeld, sl.deadline = true, now.Add(soonest.Sub(sl.page.date))
			if !sameEpoch {
				sl.held = nil
			}
		case sizeFree:
			sl.held, sl.listedFree = nil, true
		default:
			sl.held = nil
		}
	}
	return nil
}

// attempt attempts slot sl from the last listing of the slots (made at
// start); a *HeldError leaves sl held, with its deadline.
func (sl *slotWatch) attempt(ctx context.Context, start time.Time) (*Lease, error) {
	free := sl.listedFree
	sl.listedFree = false
	lease, err := sl.m.attemptListed(ctx, false,
		listing{start: start, newest: sl.newest, found: sl.found, page: sl.page, free: free})
	var held *HeldError
	if errors.As(err, &held) {
		sl.held, sl.m.known = held, known{}
		sl.deadline = sl.m.deadline(held.obs)
	}
	return lease, err
}

// slotPages lists the epochs of every slot of the slot lock name, each
// slot's as a page of its own (sorted, not truncated, with the listing's
// Date): one LIST of "<name>/lock-slots/", one per thousand keys.
func (c *Client) slotPages(ctx context.Context, name string) (map[int]*listed, error) {
	pages := map[int]*listed{}
	var date time.Time // the earliest page's: no key is judged older than its own page says
	err := c.listKeys(ctx, slotPrefix(name), func(k listedKey) {
		lock, i, epoch, ok := slotOwner(k.key)
		if !ok || lock != name {
			return
		}
		if date.IsZero() || k.date.Before(date) {
			date = k.date
		}
		p := pages[i]
		if p == nil {
			p = &listed{}
			pages[i] = p
		}
		p.epochs = append(p.epochs, listedEpoch{key: k.key, epoch: epoch, etag: k.etag, lastModified: k.lastModified, size: k.size})
	})
	for _, p := range pages {
		p.date = date
		sortEpochs(p.epochs)
	}
	return pages, err
}

// soonest returns the held slot whose lease may lapse first.
func (s *slotLock) soonest() *slotWatch {
	return s.first(func(sl *slotWatch) bool { return sl.held != nil || sl.listedHeld })
}

// shown returns the held slot to describe while waiting: of those read, the
// one that may lapse first.
func (s *slotLock) shown() *slotWatch {
	return s.first(func(sl *slotWatch) bool { return sl.held != nil })
}

// first returns the slot with the earliest deadline of those that match.
func (s *slotLock) first(match func(*slotWatch) bool) *slotWatch {
	var out *slotWatch
	for _, sl := range s.slots {
		if match(sl) && (out == nil || sl.deadline.Before(out.deadline)) {
			out = sl
		}
	}
	return out
}

// slotsHeld is the *HeldError of a slot lock whose slots are all held,
// describing slot sl.
func (s *slotLock) slotsHeld(sl *slotWatch) *HeldError {
	he := *sl.held
	he.Name, he.slots, he.slot = s.lock.name, s.n, sl.i
	he.ExpiresIn = max(0, sl.deadline.Sub(s.lock.c.cfg.clock.Now()))
	return &he
}

// wait waits, for w, until what the last attempt found held may be free:
// one of the slots (held.slots set), or the lease of the mutex the lock
// still is.
func (s *slotLock) wait(ctx context.Context, w *waiter, held *HeldError) error {
	if held.slots > 1 {
		return s.watchSlots(ctx, w)
	}
	return s.lock.wait(ctx, w, held)
}

// watchSlots waits until a slot may have become free: its newest epoch
// changed to one not judged held, or its lease's time may have run out. It
// lists the slots once per poll interval, so that a waiter costs what a
// mutex's waiter costs, one request per poll interval, whatever n is, and
// sees a released slot within one poll interval. It returns nil to make the
// caller attempt again, or an error to give up with.
func (s *slotLock) watchSlots(ctx context.Context, w *waiter) error {
	clk := s.lock.c.cfg.clock
	for {
		first := s.soonest()
		if first == nil {
			return nil
		}
		if shown := s.shown(); shown != nil {
			w.notify(s.slotsHeld(shown), first.deadline)
		}
		if err := w.poll(ctx, first.deadline); err != nil {
			return err
		}
		if !clk.Now().Before(first.deadline) {
			if first.held != nil {
				first.m.timeUp(first.held.obs)
			}
			first.held, first.listedHeld = nil, false
			return nil // its time may be up: the attempt judges by the store's clock
		}
		err := s.listSlots(ctx)
		switch {
		case err == nil:
			for _, sl := range s.slots {
				if sl.held == nil && !sl.listedHeld {
					return nil // freed, or changed so that the listing cannot tell
				}
			}
		case errors.Is(err, ErrUnavailable), classify(err) == failCanceled && ctx.Err() == nil:
			w.last = err
		case ctx.Err() != nil:
			return w.gaveUp(ctx)
		default:
			return err
		}
	}
}

// createMarker makes the lock name a slot lock of n slots: it creates epoch
// (the next one; the lock is free) as a marker, with the same conditional
// create, read-back and staleness check as a lease (§5), so that a mutex
// acquirer and the marker's writer never both get that epoch.
func (c *Client) createMarker(ctx context.Context, name string, epoch uint64, n int, start time.Time, page *listed) error {
	p := payload{
		owner:      owner{Holder: c.cfg.holder},
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
	slots, objs, errs := readNewest(ctx, c, newest)
	var out []State
	for k, obs := range objs {
		switch {
		case classify(errs[k]) == failNotFound:
			// Deleted since the LIST: superseded by a newer epoch.
		case errs[k] != nil:
			return nil, errs[k]
		default:
			st := c.stateOf(name, obs)
			st.Slot = slots[k]
			if st.Held {
				out = append(out, st)
			}
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
