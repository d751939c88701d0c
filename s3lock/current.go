package s3lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// State is what a lock's newest epoch object says. A lock that never existed
// has Epoch 0 and Held false.
type State struct {
	Name  string
	Key   string // key of the newest epoch object; "" if none
	Epoch uint64 // newest epoch; 0 if the lock never existed
	// Held is true while the newest lease is neither released nor lapsed
	// (judged by the store's clock).
	Held bool
	// Released is true if the holder (or an operator) released the newest
	// lease. A lease that lapsed is neither Held nor Released.
	Released   bool
	Holder     string
	AcquiredAt time.Time // the holder's clock
	ReleasedAt time.Time // the releaser's clock
	ReleasedBy string    // set by ForceRelease
	// ExpiresAt is when the lease lapses unless renewed, by this client's
	// clock (derived from the store's clock, so skew does not matter): when
	// a waiter may take the lock. In a holder's own Lease.State it is when
	// the holder stops trusting the lease (TrustedUntil): earlier, by a
	// safety margin, so work under the lease stops before anyone else may
	// take it.
	ExpiresAt time.Time
	// TrustedUntil is the latest moment, by this client's clock, until
	// which a handle that took the lease over now (Resume) would
	// trust it: never later than its holder's own deadline. Zero unless
	// Held and the store said what time it is.
	TrustedUntil time.Time
	// HeldUntilAtMost is the lease's cap (WithMaxHold): it is not renewed
	// past it. By the acquirer's clock, as AcquiredAt (in a holder's own
	// Lease.State, by this client's); zero when the lease has no cap.
	HeldUntilAtMost time.Time
	LeaseDuration   time.Duration
	Renewals        uint64
	Metadata        map[string]string
	// Waiters is how many ordered waiters (OrderFIFO, OrderNewest) are in the
	// lock's line, as Current and List count them (Watch leaves it 0); Line
	// says who they are.
	Waiters int
	// Slots is n for a slot lock (WithSlots(n)), whose newest epoch object is
	// its marker: Holders then lists the slots that are held (each State
	// with its Slot, sorted by slot), Held says whether any is, and
	// Holder, ExpiresAt and LeaseDuration are empty. 0 for a mutex.
	Slots int
	// Shared is set when the newest epoch is a shared epoch (WithShared):
	// Holders then lists its live shares (each State with its share's Key,
	// Holder and ExpiresAt), Held says whether any is, and Holder,
	// ExpiresAt and LeaseDuration are empty. Pending is set when the
	// newest epoch is an exclusive acquirer's that waits for the shared
	// holders before it (Holders lists them): no new shared holder joins
	// meanwhile.
	Shared, Pending bool
	Holders         []State
	// Share is set in an entry of Holders of a shared lock (and by Lookup
	// of a share's token): the share's id, as its Token carries it.
	Share string
	// Slot is set in an entry of Holders (and by Lookup of a slot lease's
	// token): the slot, from 1 to Slots; Key and Epoch are the slot's.
	Slot int
	// Err is set, by List only, for a lock whose newest epoch object could
	// not be read as a lease (matching ErrCorruptLease); the other fields then
	// only name it. Current returns such an error instead.
	Err error
}

// Phase is where a lock's newest lease stands; its value is its name.
type Phase string

// The phases of a lock.
const (
	// PhaseFree: the lock was never acquired (or all its epoch objects
	// were deleted); or, for a slot lock, none of its slots is held.
	PhaseFree Phase = "free"
	// PhaseHeld: the newest lease is neither released nor lapsed.
	PhaseHeld Phase = "held"
	// PhaseReleased: the newest lease was released, by its holder or an
	// operator (ReleasedBy says which).
	PhaseReleased Phase = "released"
	// PhaseLapsed: the newest lease ran out without being renewed or
	// released.
	PhaseLapsed Phase = "lapsed"
	// PhaseUnreadable: the newest epoch object is not a lease (List only;
	// State.Err says why).
	PhaseUnreadable Phase = "unreadable"
)

// Phase says where the lock stands: the one rule for free, held, released
// and lapsed.
func (s State) Phase() Phase {
	switch {
	case s.Err != nil:
		return PhaseUnreadable
	case s.Epoch == 0:
		return PhaseFree
	case s.Held:
		return PhaseHeld
	case s.Slots > 1 && s.Slot == 0:
		return PhaseFree // a slot lock none of whose slots is held
	case s.Released:
		return PhaseReleased
	}
	return PhaseLapsed
}

// Current reads who holds the lock name now, without acquiring it: one LIST
// and one GET, bounded by ctx, and one LIST of the lock's line when someone
// waits in it (State.Waiters). A lock that shows no epoch costs a HEAD of
// its first epoch and one per path segment of its name instead of the GET:
// a store whose listing hides the lock's objects, or an object at the lock's
// name or a parent path, make it ErrNameCollision rather than free.
func (c *Client) Current(ctx context.Context, name string) (State, error) {
	if err := ValidateName(name); err != nil {
		return State{}, err
	}
	return c.current(ctx, name)
}

// current is Current for a name already checked.
func (c *Client) current(ctx context.Context, name string) (State, error) {
	newest, found, page, err := c.findNewest(ctx, name)
	if err != nil {
		return State{}, err
	}
	if !found {
		// Never held — unless the store's listing hides the lock's
		// objects: then its first epoch exists (one HEAD more).
		if err := c.hiddenEpochs(ctx, "Current", name, epochKey(name, 1)); err != nil {
			return State{}, err
		}
		if err := c.unlistedBesideObject(ctx, name); err != nil {
			return State{}, err
		}
		return State{Name: name}, nil
	}
	obs, err := c.getEpoch(ctx, newest.key, newest.epoch, "")
	if err != nil {
		return State{}, err
	}
	s := c.stateOf(name, obs)
	switch {
	case s.Slots > 1:
		if s.Holders, err = c.slotHolders(ctx, name, nil); err != nil {
			return State{}, err
		}
		s.Held = len(s.Holders) > 0
	case s.Shared || obs.body.Pending:
		if s.Holders, err = c.shareHolders(ctx, name, newest.epoch, s.Shared, nil); err != nil {
			return State{}, err
		}
		if !s.Held && len(s.Holders) > 0 {
			// A writer gave up waiting for them: the lock is still held
			// by its shared holders.
			s.Shared, s.Held, s.Holder = true, true, ""
		}
		s.Held = s.Held || len(s.Holders) > 0
	}
	if page.line || page.truncated { // someone waits: count the line (one LIST)
		v, err := c.listLine(ctx, name)
		if err != nil {
			return State{}, err
		}
		for _, t := range v.tickets {
			if v.live(t, nil) {
				s.Waiters++
			}
		}
	}
	return s, nil
}

func (c *Client) stateOf(name string, o *observed) State {
	s := State{
		Name:            name,
		Key:             o.key,
		Epoch:           o.epoch,
		Released:        o.body.Released,
		Holder:          o.body.Holder,
		AcquiredAt:      o.body.AcquiredAt,
		HeldUntilAtMost: o.body.MaxHoldUntil,
		ReleasedAt:      o.body.ReleasedAt,
		ReleasedBy:      o.body.ReleasedBy,
		LeaseDuration:   o.body.validity(),
		Renewals:        o.body.Renewals,
		Metadata:        o.body.Metadata,
		Share:           o.body.Share,
	}
	if o.body.marker() { // a slot lock: the caller reads its slots
		s.Slots, s.Holder, s.LeaseDuration = o.body.Slots, "", 0
		return s
	}
	if o.body.sharedEpoch() { // held by its shares: the caller reads them
		s.Shared, s.Holder = true, ""
		return s
	}
	if !o.body.Released {
		left, ok := remaining(o)
		if !ok {
			left = o.body.validity() + serverSlack
		}
		s.Held = left > 0
		s.Pending = s.Held && o.body.Pending
		if s.Held {
			s.ExpiresAt = o.received.Add(left)
			if tr, ok := trustWindow(o); ok {
				s.TrustedUntil = tr.until
			}
		}
	}
	return s
}

// List returns the state of every lock whose name starts with prefix, sorted
// by name: for dashboards and policy checks. It lists every key under the
// prefix and reads each lock's newest epoch object (up to eight at a time),
// all bounded by ctx. A lock whose newest object is unreadable is listed
// with State.Err set rather than failing the whole list. Keys that are not
// epoch objects of a valid lock name are left out, and with them storecheck's
// probes (the "s3lock-probe" segment is reserved). A prefix that no lock
// name can start with is refused (ValidatePrefix).
func (c *Client) List(ctx context.Context, prefix string) ([]State, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	x := lockIndex{newest: map[string]listedEpoch{}, slotNewest: map[string]map[int]listedEpoch{}, waiting: map[string]int{}}
	if err := c.listKeys(ctx, prefix, x.add); err != nil {
		return nil, err
	}
	newest, slotNewest, waiting := x.newest, x.slotNewest, x.waiting
	names, objs, errs := readNewest(ctx, c, newest)
	states := make([]State, len(names))
	var slotLocks []int
	for i, obs := range objs {
		if errs[i] != nil {
			continue
		}
		states[i] = c.stateOf(names[i], obs)
		states[i].Waiters = waiting[names[i]]
		if states[i].Slots > 1 {
			slotLocks = append(slotLocks, i)
		}
	}
	forEach(len(slotLocks), listConcurrency, func(k int) {
		i := slotLocks[k]
		slots := slotNewest[names[i]]
		if slots == nil {
			slots = map[int]listedEpoch{}
		}
		states[i].Holders, errs[i] = c.slotHolders(ctx, names[i], slots)
		states[i].Held = len(states[i].Holders) > 0
	})
	return listedStates(names, newest, states, errs)
}

// readNewest reads the newest epoch object of each key of newest (a lock's
// or a slot's, as a listing found it), up to listConcurrency at a time, and
// returns the keys sorted, with each one's object or why it could not be
// read.
func readNewest[K cmp.Ordered](ctx context.Context, c *Client, newest map[K]listedEpoch) ([]K, []*observed, []error) {
	keys := slices.Sorted(maps.Keys(newest))
	objs := make([]*observed, len(keys))
	errs := make([]error, len(keys))
	forEach(len(keys), listConcurrency, func(i int) {
		e := newest[keys[i]]
		objs[i], errs[i] = c.getEpoch(ctx, e.key, e.epoch, "")
	})
	return keys, objs, errs
}

// lockIndex is what a listing of a prefix shows of each lock: its newest
// epoch, its slots' newest epochs, and how many live tickets wait in its
// line.
type lockIndex struct {
	newest     map[string]listedEpoch
	slotNewest map[string]map[int]listedEpoch
	waiting    map[string]int
}

// add counts the listed key k in x.
func (x *lockIndex) add(k listedKey) {
	key := k.key
	if name, slot, epoch, ok := slotOwner(key); ok {
		m := x.slotNewest[name]
		if m == nil {
			m = map[int]listedEpoch{}
			x.slotNewest[name] = m
		}
		if cur, seen := m[slot]; !seen || epoch > cur.epoch {
			m[slot] = listedEpoch{key: key, epoch: epoch}
		}
		return
	}
	if name, ok := ticketOwner(key); ok {
		if ticketLive(k.lastModified, k.date) {
			x.waiting[name]++
		}
		return
	}
	name, epoch, ok := parseKey(key)
	if !ok || ValidateName(name) != nil {
		return
	}
	if cur, seen := x.newest[name]; !seen || epoch > cur.epoch {
		x.newest[name] = listedEpoch{key: key, epoch: epoch}
	}
}

// listedStates is List's answer from the states read of the locks names
// (newest: their newest epochs as listed), errs[i] saying why states[i]
// could not be read: an unreadable object is listed with its error, one
// deleted since the listing is left out, and any other error is List's.
func listedStates(names []string, newest map[string]listedEpoch, states []State, errs []error) ([]State, error) {
	out := states[:0]
	for i, s := range states {
		var corrupt *corruptLeaseError
		switch {
		case errs[i] == nil:
			out = append(out, s)
		case errors.As(errs[i], &corrupt):
			e := newest[names[i]]
			out = append(out, State{Name: names[i], Key: e.key, Epoch: e.epoch, Err: errs[i]})
		case classify(errs[i]) == failNotFound:
			// Deleted between the LIST and the GET: superseded; skip.
		default:
			return nil, errs[i]
		}
	}
	slices.SortFunc(out, func(a, b State) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// unlistedBesideObject returns an ErrNameCollision error when an object sits
// at name or at a parent path of it, for a lock whose listing shows no
// epoch: on a store whose keys are files the lock cannot be taken, and on
// one whose listing hides the keys under an object (MinIO) a holder whose
// first epoch cleanup deleted is invisible — so such a lock is never
// reported free. (On S3 itself, which keeps both, the lock is free, and
// Current works normally once it has been acquired.)
func (c *Client) unlistedBesideObject(ctx context.Context, name string) error {
	key, err := c.collidingKey(ctx, name)
	if err != nil || key == "" {
		return err
	}
	return &opError{Op: "Current", Bucket: c.bucket, Key: key, Kind: ErrNameCollision,
		Err: fmt.Errorf("no epoch of lock %q is listed and the object s3://%s/%s exists: a store whose listing "+
			"hides the keys under an object (MinIO) would hide its holder too, so s3lock cannot say it is free", name, c.bucket, key)}
}
