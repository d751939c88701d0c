package s3lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Token names a lease: a lock (Bucket, Name), one of its epochs, and for a
// slot lock's lease its slot. Lease.Token returns a lease's token with its
// Nonce, which proves the lease is the one the token was made for: another
// process resumes that very lease with it (a pipeline step that acquires,
// and a later one that releases). The nonce guards against mistakes, not
// people: it is in the epoch object too, readable by anyone with
// s3:GetObject on the lock's keys; who may write them (s3:PutObject) can
// take or end leases anyway.
// A Token without a Nonce (a literal, an import ID) names an epoch
// whoever holds it: Resume adopts it, Lookup reads it, ForceRelease ends it.
// Bucket may be left empty for the client's bucket.
type Token struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	// Slot and Slots are set for a lease of a slot lock (WithSlots): the slot it
	// holds, and the lock's number of slots; the epoch is the slot's.
	Slot  int `json:"slot,omitempty"`
	Slots int `json:"slots,omitempty"`
	// Epoch is the lease's epoch: the fencing token. Epochs of a lock only
	// grow; pass it to whatever the lock protects (see package fence).
	// For a slot lock the epoch is its slot's: it grows with every holder
	// of that slot, and says nothing about the order of holders of other
	// slots.
	Epoch uint64 `json:"epoch"`
	// Share is set for a shared lease (WithShared): its share's id. Every
	// shared holder of one shared epoch has that Epoch.
	Share string `json:"share,omitempty"`
	Nonce string `json:"nonce"`
}

// Key returns the object key of the epoch the token names, e.g.
// "deploy/lock-0000000007.json" for epoch 7 of the lock "deploy", or
// "jobs/lock-slots/2/lock-0000000003.json" for epoch 3 of slot 2 of "jobs".
func (t Token) Key() string {
	if t.Share != "" {
		return shareKey(t.Name, t.Epoch, t.Share)
	}
	return epochKey(t.target(), t.Epoch)
}

// String returns the token as JSON.
func (t Token) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

// ParseToken reads a token written by Token.String.
func ParseToken(s string) (Token, error) {
	var t Token
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return Token{}, invalid("lease token is not valid JSON: %v", err)
	}
	// Never echo the token: its nonce is what releases the lease.
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{{"bucket", t.Bucket == ""}, {"name", t.Name == ""}, {"epoch", t.Epoch == 0}, {"nonce", t.Nonce == ""}} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return Token{}, invalid("lease token lacks %s", strings.Join(missing, ", "))
	case t.Epoch > MaxEpoch:
		return Token{}, invalid("lease token epoch %d is beyond the maximum %d", t.Epoch, MaxEpoch)
	}
	if err := t.checkSlot(); err != nil {
		return Token{}, err
	}
	if err := ValidateName(t.Name); err != nil {
		return Token{}, err
	}
	return t, nil
}

// Resume takes over the lease t names, if it is still held: the lock's
// (or slot's) newest epoch, not released, not lapsed, and, when t carries a
// Nonce, still the acquisition t was made for. Without a Nonce it adopts
// the epoch whoever acquired it: for importing a lease into Terraform, or
// for an operator who must finish a crashed holder's work. Otherwise the
// error is a *LeaseLostError (matching ErrLeaseLost) whose Reason says why:
// LostReleased when it was released (a release already done), LostLapsed,
// LostForceReleased, LostReplaced, LostNotThisLease when t's Nonce is not
// the epoch's acquisition's, or LostDeleted when the epoch object is gone.
// The resumed lease trusts itself only for what is left of the lease as
// judged by the store's clock (State.TrustedUntil), and renews itself
// unless WithoutAutoRenew is given (the one option Resume takes). It costs one LIST and one GET (two of
// each to adopt a slot without a Nonce: the lock's marker says it is a slot
// lock, else ErrSlotsMismatch); ctx bounds them.
//
// Resume is a takeover: the handle the token came from must not be used any
// more (Detach it, or let its process end). If both are, the next renewal of
// one of them finds the other's write and ends that handle as lost; until
// then both believe they hold the lease, as with ForceRelease. To check a
// lease without taking it over, use Lookup.
func (c *Client) Resume(ctx context.Context, t Token, opts ...Option) (*Lease, error) {
	if t.Share != "" {
		return c.takeOverShare(ctx, t, opts)
	}
	target, ref, err := c.leaseOf(ctx, t)
	if err != nil {
		return nil, err
	}
	return c.takeOver(ctx, target, t.Epoch, t.Nonce, ref, opts)
}

// target is the name of the lock whose epoch the token names: its slot, for
// a lease of a slot lock.
func (t Token) target() string {
	if t.Slot > 0 {
		return slotName(t.Name, t.Slot)
	}
	return t.Name
}

// leaseOf checks t and returns the name of the lock whose epoch it names
// and, for a slot lease, which slot of which lock. A token with a Nonce
// says how many slots its lock has; one without is checked against the
// lock's marker (a LIST and a GET).
func (c *Client) leaseOf(ctx context.Context, t Token) (string, slotRef, error) {
	if err := c.checkToken(t); err != nil {
		return "", slotRef{}, err
	}
	switch {
	case t.Slot == 0:
		return t.Name, slotRef{}, nil
	case t.Nonce != "":
		return t.target(), slotRef{lock: t.Name, slot: t.Slot, slots: t.Slots}, nil
	}
	sub, n, err := c.slotOf(ctx, t.Name, t.Slot)
	switch {
	case err != nil:
		return "", slotRef{}, err
	case t.Slots != 0 && t.Slots != n:
		return "", slotRef{}, fmt.Errorf("%w: lock %q in bucket %s has %d slots, but the token says %d", ErrSlotsMismatch,
			t.Name, c.bucket, n, t.Slots)
	}
	return sub, slotRef{lock: t.Name, slot: t.Slot, slots: n}, nil
}

// slotOf checks that name is a slot lock with a slot numbered slot (one
// LIST and one GET of its marker), and returns the slot's name and the
// lock's number of slots.
func (c *Client) slotOf(ctx context.Context, name string, slot int) (string, int, error) {
	sub, err := slotTarget(name, slot)
	if err != nil {
		return "", 0, err
	}
	newest, found, _, err := c.findNewest(ctx, name)
	var m *observed
	if err == nil && found {
		m, err = c.getEpoch(ctx, newest.key, newest.epoch, "")
	}
	switch {
	case err != nil:
		return "", 0, err
	case m == nil || !m.body.marker():
		return "", 0, fmt.Errorf("%w: lock %q in bucket %s is not a slot lock; name its epoch without a slot",
			ErrSlotsMismatch, name, c.bucket)
	case slot > m.body.Slots:
		return "", 0, fmt.Errorf("%w: lock %q in bucket %s has %d slots; there is no slot %d", ErrSlotsMismatch,
			name, c.bucket, m.body.Slots, slot)
	}
	return sub, m.body.Slots, nil
}

// slotTarget checks a lock name and slot number and returns the slot's name.
func slotTarget(name string, slot int) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	if err := validateSlot(slot); err != nil {
		return "", err
	}
	return slotName(name, slot), nil
}

// Lookup reads the state of the lease t names without taking it over: the
// lock's State (Slot set for a slot's lease) if the lease is still held,
// with TrustedUntil estimated as Resume would; otherwise the
// *LeaseLostError that Resume would return. As for Resume, a Token without
// a Nonce names the epoch whoever holds it. It writes nothing, so the
// holder is not disturbed. It costs what Resume costs; ctx bounds it.
func (c *Client) Lookup(ctx context.Context, t Token) (State, error) {
	if t.Share != "" {
		return c.lookupShare(ctx, t)
	}
	target, _, err := c.leaseOf(ctx, t)
	if err != nil {
		return State{}, err
	}
	st, err := c.lookup(ctx, target, t.Epoch, t.Nonce)
	if err == nil && t.Slot > 0 {
		st.Name, st.Slot = t.Name, t.Slot
	}
	return st, err
}

func (c *Client) lookup(ctx context.Context, name string, epoch uint64, nonce string) (State, error) {
	h, err := c.inspect(ctx, name, epoch, nonce)
	if err != nil {
		return State{}, err
	}
	st := c.stateOf(name, h.obs)
	st.TrustedUntil = h.trust.until // as Resume's: cut at the cap
	return st, nil
}

// checkToken checks that t can name a lease of this client's bucket.
func (c *Client) checkToken(t Token) error {
	if t.Bucket != "" && t.Bucket != c.bucket {
		return invalid("lease token is for bucket %s, but this client locks in bucket %s", t.Bucket, c.bucket)
	}
	if err := validateEpoch(t.Epoch); err != nil {
		return err
	}
	if err := t.checkSlot(); err != nil {
		return err
	}
	if t.Share != "" && (t.Slot != 0 || len(t.Share) != shareIDDigits || !isHex(t.Share)) {
		return invalid("share %q is not a share id (%d hex digits, of a lock without slots)", shown(t.Share), shareIDDigits)
	}
	return ValidateName(t.Name)
}

// checkSlot checks a token's slot fields: none, or a slot of a slot lock.
// A token without a Nonce may leave Slots to the lock's marker.
func (t Token) checkSlot() error {
	if t.Nonce == "" && t.Slots == 0 && t.Slot != 0 {
		return validateSlot(t.Slot)
	}
	if (t.Slot != 0 || t.Slots != 0) && (t.Slot < 1 || t.Slots < 2 || t.Slots > MaxSlots || t.Slot > t.Slots) {
		return invalid("lease token slot %d of %d is not a slot of a lock (slots 1 to n, n from 2 to %d)",
			t.Slot, t.Slots, MaxSlots)
	}
	return nil
}

// takeOver builds a Lease for an existing epoch object; nonce "" accepts
// any holder.
func (c *Client) takeOver(ctx context.Context, name string, epoch uint64, nonce string, ref slotRef, opts []Option) (*Lease, error) {
	a, err := takeoverConfig(opts, ref)
	if err != nil {
		return nil, err
	}
	h, err := c.inspect(ctx, name, epoch, nonce)
	if err != nil {
		return nil, err
	}
	a.leaseDuration = h.obs.body.validity()
	a.renewInterval = c.renewIntervalFor(a.leaseDuration)
	lease := c.newLease(holding{name: name, epoch: epoch, p: *h.obs.body, etag: h.obs.etag, trust: h.trust}, a)
	lease.startBackground()
	return lease, nil
}

// heldLease is an epoch object found held, with the window in which a new
// handle of it may trust it.
type heldLease struct {
	obs   *observed
	trust trust
}

// inspect reads epoch of the lock name and checks that a handle may hold
// it: it is the lock's newest epoch, neither released nor lapsed, and
// carries nonce (any nonce when nonce is ""). Otherwise it returns the
// *LeaseLostError that says why not.
func (c *Client) inspect(ctx context.Context, name string, epoch uint64, nonce string) (heldLease, error) {
	// name is a lock's, or a slot's (checked by the caller: leaseOf,
	// checkToken, slotTarget).
	if err := validateEpoch(epoch); err != nil {
		return heldLease{}, err
	}
	key := epochKey(name, epoch)
	lost := func(reason LossReason, detail string) error {
		return &LeaseLostError{Bucket: c.bucket, Name: name, Key: key, Epoch: epoch, Reason: reason, Detail: detail}
	}
	// Only the newest epoch can be held: an older one may look alive (a
	// renewal that reached the store after its holder gave up) while the
	// lock has moved on.
	newest, found, _, err := c.findNewest(ctx, name)
	switch {
	case err != nil:
		return heldLease{}, err
	case !found || newest.epoch < epoch:
		// Not listed: deleted, or hidden by the store's listing.
		if err := c.hiddenEpochs(ctx, "Resume", name, key); err != nil {
			return heldLease{}, err
		}
		return heldLease{}, lost(LostDeleted, "its epoch object does not exist")
	case newest.epoch > epoch:
		return heldLease{}, lost(LostReplaced, fmt.Sprintf("it was replaced by a newer epoch (the lock is at epoch %d)", newest.epoch))
	}
	obs, err := c.getEpoch(ctx, key, epoch, "")
	if classify(err) == failNotFound {
		return heldLease{}, lost(LostDeleted, "its epoch object does not exist")
	}
	if err != nil {
		return heldLease{}, err
	}
	switch b := obs.body; {
	case b.marker():
		return heldLease{}, c.slotsError(name, obs, 1)
	case b.sharedEpoch():
		return heldLease{}, lost(LostNotThisLease, "it is a shared epoch, held by its shares: name a share (a token with its share id)")
	}
	h, err := c.heldObject(obs, nonce, lost)
	if err != nil || !obs.body.Pending {
		return h, err
	}
	return c.pendingHeld(ctx, name, h, nonce)
}

// pendingHeld checks a pending exclusive epoch (PROTOCOL.md §17) that a
// handle is to hold. With its acquisition's nonce it was cleared (Acquire
// returns only then, and only it gives out the token) and only its clearing
// write failed. Without one, it may be a writer's that still waits for
// shared holders: adopted, it would be trusted beside them. So the shares
// below it are listed (as its writer lists them): while any is held it is
// refused with a *HeldError (Pending, Shared); else it may be held. Either
// way the handle's first write drops the mark.
func (c *Client) pendingHeld(ctx context.Context, name string, h heldLease, nonce string) (heldLease, error) {
	if nonce == "" {
		ws := &shareWait{c: c, name: name, epoch: h.obs.epoch, seen: map[string]sighting{}}
		if err := ws.look(ctx); err != nil {
			return heldLease{}, err
		}
		if len(ws.live) > 0 {
			he := ws.heldError(ctx)
			he.Pending = true
			return heldLease{}, fmt.Errorf("%w; epoch %d of lock %q in bucket %s is an exclusive acquirer's that waits for them: "+
				"it cannot be adopted until they end", he, h.obs.epoch, name, c.bucket)
		}
	}
	b := *h.obs.body
	b.Pending, b.Format = false, formatVersion
	obs := *h.obs
	obs.body = &b
	h.obs = &obs
	return h, nil
}

// heldObject checks that the lease read in obs may be held by a new handle:
// it carries nonce (any nonce when nonce is ""), is not released, and has
// not lapsed; else the *LeaseLostError (through lost) that says why not.
func (c *Client) heldObject(obs *observed, nonce string, lost func(LossReason, string) error) (heldLease, error) {
	switch b := obs.body; {
	case nonce != "" && b.Nonce != nonce:
		return heldLease{}, lost(LostNotThisLease, "its epoch object belongs to another acquisition (holder "+b.Holder+
			"), not the token's: check the token and the bucket")
	case b.Released && b.ReleasedBy != "":
		return heldLease{}, lost(LostForceReleased, "it was force-released by "+b.ReleasedBy)
	case b.Released && b.Reason != "":
		return heldLease{}, lost(LostReleased, "it was released ("+b.Reason+")")
	case b.Released:
		return heldLease{}, lost(LostReleased, "it was released by its holder")
	case b.Nonce == "":
		return heldLease{}, lost(LostNotThisLease, "its epoch object was not written by an s3lock acquisition")
	}
	tr, err := c.heldTrust(obs, lost)
	if err != nil {
		return heldLease{}, err
	}
	return heldLease{obs: obs, trust: tr}, nil
}

// heldTrust is the window in which a new handle of the lease read in obs
// may trust it (trustWindow, cut at its cap), or, through lost, why it may
// not: it has lapsed, or reached its cap.
func (c *Client) heldTrust(obs *observed, lost func(LossReason, string) error) (trust, error) {
	tr, ok := trustWindow(obs)
	if !ok {
		return trust{}, &opError{Op: "GetObject", Bucket: c.bucket, Key: obs.key,
			Err: errors.New("the store sent no Date or Last-Modified, so the lease's age is unknown")}
	}
	tr = capTrust(tr, capOnThisClock(c.cfg.clock, obs.body.MaxHoldUntil), obs.body)
	switch {
	case tr.capped && tr.over(c.cfg.clock.Now()):
		return trust{}, lost(LostMaxHold, maxHoldText(obs.body.maxHold(), obs.body.AcquiredAt))
	case tr.over(c.cfg.clock.Now()):
		age, _ := obs.serverAge()
		return trust{}, lost(LostLapsed, "it has lapsed (last written "+age.String()+" ago, lease "+
			obs.body.validity().String()+")")
	}
	return tr, nil
}

// trustWindow is how long a handle that did not write obs may trust the
// lease it holds: from when the lease was last written, by the store's
// clock, to that plus its duration minus the safety margin. The store's Date
// may be up to dateStaleness behind real time (its one-second resolution,
// and a server that refreshes it once a second): the lease is taken to be
// that much older than it looks, counted from before the read was sent, so
// that the estimate is never later than the original holder's own deadline.
// ok is false when the store did not say what time it is.
func trustWindow(obs *observed) (trust, bool) {
	age, ok := obs.serverAge()
	if !ok {
		return trust{}, false
	}
	return trustFor(obs.sent.Add(-age-dateStaleness), obs.body.validity()), true
}

// validateEpoch checks that epoch can name an epoch object.
func validateEpoch(epoch uint64) error {
	if epoch == 0 || epoch > MaxEpoch {
		return invalid("epoch %d is outside [1, %d]", epoch, MaxEpoch)
	}
	return nil
}
