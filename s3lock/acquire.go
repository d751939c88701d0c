package s3lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// errRetry makes an acquisition attempt start over at once: the state it read
// changed under it in a way that is not "held" (an epoch vanished, or the
// epoch it created turned out to be stale).
var errRetry = errors.New("s3lock: state changed during the attempt; retry")

// TryAcquire takes the lock name if it is free, and returns at once
// otherwise: with an error matching ErrHeld (a *HeldError saying who holds
// it) when it is held, and with other errors (matching ErrUnavailable for
// failures that may pass) when the store could not be read. It costs one
// LIST, one GET and one conditional PUT; the first acquisition of a lock
// costs LIST, PUT and a LIST that checks the new epoch is listed. With an
// order (WithOrder) it does not take a free lock while others wait in
// its line: a *HeldError whose Queued is true says how many (a LIST of the
// line when the lock's listing shows it, and one more to count them).
// If ctx ends during the attempt, TryAcquire makes sure it leaves no lease
// behind and returns ctx's error.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	a, err := c.acquireConfig(opts)
	if err != nil {
		return nil, err
	}
	lease, err := c.tryAcquire(ctx, name, a)
	c.observeAcquire(name, lease, err, 0, true)
	return lease, err
}

// observeAcquire reports the end of an acquisition that ran for wait (try:
// a TryAcquire).
func (c *Client) observeAcquire(name string, lease *Lease, err error, wait time.Duration, try bool) {
	if lease != nil {
		e := lease.event(observe.Acquired)
		e.Wait, e.Try = wait, try
		c.observe(e)
		return
	}
	c.observe(observe.Event{Kind: observe.AcquireFailed, Lock: name, Key: epochPrefix(name), Wait: wait, Try: try, Err: err})
}

// tryAcquire is TryAcquire for a name already checked.
func (c *Client) tryAcquire(ctx context.Context, name string, a acquireConfig) (*Lease, error) {
	a.try = true
	lock := newLockMode(c, name, a)
	head := false // set when every ticket in the line has lapsed (lineHeld)
	for i := 0; ; i++ {
		lease, err := lock.attempt(ctx, head)
		var held *HeldError
		switch {
		case errors.Is(err, errLineBusy):
			head, err = c.lineHeld(ctx, name, a.shared)
		case errors.As(err, &held) && held.line && a.order.ordered():
			// Say how many wait in line too (one LIST of it).
			if st, lerr := (&place{c: c, name: name, shared: a.shared}).stand(ctx); lerr == nil {
				held.Ahead = st.ahead
			}
		}
		if errors.Is(err, errRetry) && i < maxQuickRetries && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, errRetry) {
			err = &opError{Op: "Acquire", Bucket: c.bucket, Key: epochPrefix(name), Kind: ErrUnavailable,
				Err: errors.New("the lock changed during every attempt")}
		}
		return lease, err
	}
}

// lineHeld is an ordered TryAcquire's answer to a free lock with a line: a
// *HeldError counting the live tickets; or, when every ticket has lapsed,
// errRetry with head true, so that the next attempt (made as the head's)
// takes the lock.
func (c *Client) lineHeld(ctx context.Context, name string, shared bool) (head bool, err error) {
	p := &place{c: c, name: name, shared: shared}
	st, err := p.stand(ctx) // deletes the lapsed tickets (all are "ahead")
	switch {
	case err != nil:
		return false, err
	case st.ahead == 0:
		return true, errRetry
	}
	return false, &HeldError{Bucket: c.bucket, Name: name, Key: linePrefix(name), Ahead: st.ahead, Queued: true}
}

// mutex is the acquisition of a lock that admits one holder, or of one slot
// of a slot lock (a mutex in every respect, §14): its attempts (here) and
// its wait for the holder's lease (wait.go), and what they already know
// when it attempts again. It follows etcd's client/v3/concurrency/mutex.go:
// one attempt (tryAcquire there), then a wait for what it found (waitDeletes
// there; here the holder's lease); a slot lock is a type of its own
// (slotLock, slots.go).
type mutex struct {
	c     *Client
	name  string
	a     acquireConfig
	known known
	// direct lets an attempt after a poll read the newest epoch released
	// create the next one without listing first (attemptDirect): a lock's
	// mutex, not a slot's.
	direct bool
	// contended is set when a direct create lost to another's: others
	// poll this lock too, and the attempts list first from then on.
	contended bool
	// polled is set when the wait that just ended read the newest epoch
	// released (known.released): only the next attempt may create
	// directly, before anything (a turn in line, a look at the line) can
	// have made that read old.
	polled bool
	// waiter is the waiting Acquire the mutex attempts for (nil for a
	// TryAcquire): a wait for shares (awaitShares) is its wait.
	waiter shareWaiting
	// For stores that send no Date header: when this client first saw the
	// holder's current ETag, by its own clock (deadline).
	seenEtag string
	seenAt   time.Time
}

// known is what a mutex's acquisition already knows when it attempts
// again; only the mutex's own methods write it.
type known struct {
	// released is the newest epoch object as last read, already released:
	// if the LIST shows the same ETag, the GET can be skipped.
	released *observed
	// lapsed is an epoch object that the waiter watched stay unchanged (same
	// key and ETag) for a whole lease, on a store that does not say what
	// time it is.
	lapsed *observed
	// exists is an epoch that a create found already there (a 412 read
	// back): the next attempt's LIST must show it, or the store's listing
	// hides the lock's objects (hiddenEpochs).
	exists uint64
}

// attempt makes one acquisition attempt: find the newest epoch, establish
// that it is released or lapsed, create the next one. head says that the
// attempt is made by the head of the lock's line: it takes a free lock
// although the line is not empty (its own ticket is in it).
func (m *mutex) attempt(ctx context.Context, head bool) (*Lease, error) {
	r := m.polledFree(head)
	m.polled = false
	if r != nil {
		return m.attemptDirect(ctx, r)
	}
	l := listing{start: m.c.cfg.clock.Now()}
	var err error
	l.newest, l.found, l.page, err = m.c.findNewest(ctx, m.name)
	if err != nil {
		return nil, err
	}
	return m.attemptListed(ctx, head, l)
}

// forget is a no-op: a mutex keeps nothing about its holder that waiting in
// line makes old (a slot lock does).
func (m *mutex) forget() {}

// listing is what an attempt's listing of a lock found: its newest epoch
// (found false: none) and its first page; start is when the attempt began.
// free is set when the listing judged the newest epoch free from its size
// code (judgeListed, a slot's): then the GET is skipped.
type listing struct {
	start  time.Time
	newest listedEpoch
	found  bool
	page   *listed
	free   bool
}

// attemptListed is an attempt from step 3 on, after the listing l.
func (m *mutex) attemptListed(ctx context.Context, head bool, l listing) (*Lease, error) {
	c, name := m.c, m.name
	newest, page := l.newest, l.page
	if err := m.stillListed(ctx, newest, l.found); err != nil {
		return nil, err
	}
	next := uint64(1)
	a := m.a
	if l.found {
		prev, err := m.readNewest(ctx, l)
		switch {
		case err != nil:
			return nil, err
		case prev.body.marker():
			return nil, c.slotsError(name, prev, 1) // a slot lock (§14)
		case prev.body.sharedEpoch() && newest.epoch >= MaxEpoch:
			return nil, m.exhausted(newest.epoch)
		case !prev.body.sharedEpoch():
			if err := m.busy(prev, newest, page); err != nil {
				return nil, err
			}
		}
		a.pending = pendingOver(prev) // shares below may be held (§17)
		next = newest.epoch + 1
	}
	if err := m.leaveToLine(ctx, head, page); err != nil {
		return nil, err
	}
	lease, err := c.create(ctx, name, next, a, l.start)
	if herr := m.createFoundEpoch(ctx, next, err); herr != nil {
		return nil, herr
	}
	if err != nil {
		return nil, err
	}
	lease.startBackground()
	if a.pending {
		if err := m.awaitShares(ctx, lease); err != nil {
			return nil, err
		}
	}
	c.cfg.logger.Info("s3lock: acquired", "bucket", c.bucket, "key", lease.key, "epoch", next, "holder", c.cfg.holder)
	c.startCleanup(c.cleanupFor(name, next, page))
	return lease, nil
}

// readNewest reads the lock's newest epoch as the listing l showed it: the
// object a wait read released, while the LIST shows its ETag unchanged; a
// released object, when the listing judged it free from its size code; else
// one GET (errRetry if it was deleted since the LIST).
func (m *mutex) readNewest(ctx context.Context, l listing) (*observed, error) {
	newest := l.newest
	switch r := m.known.released; {
	case r != nil && r.key == newest.key && r.etag != "" && r.etag == newest.etag:
		return r, nil // unchanged since it was read released (the LIST shows its ETag)
	case l.free && newest.etag != "":
		return &observed{key: newest.key, epoch: newest.epoch, etag: newest.etag, body: &payload{Released: true}}, nil // free by its size code
	}
	prev, err := m.c.getEpoch(ctx, newest.key, newest.epoch, "")
	if classify(err) == failNotFound {
		return nil, errRetry // deleted since the LIST: look again
	}
	return prev, err
}

// busy is what an attempt makes of the lock's newest epoch, read in prev
// (listed as newest, in page), when it is no marker in force: a *HeldError
// while its lease is live (not released, not lapsed by the store's clock,
// not watched until it lapsed: known.lapsed), an ErrEpochExhausted error
// when no epoch may follow it, else nil: the next epoch is the attempt's to
// create. A slot lock's attempt asks the same of a mutex's lease it finds.
func (m *mutex) busy(prev *observed, newest listedEpoch, page *listed) error {
	switch {
	case !free(prev) && !sameObject(prev, m.known.lapsed):
		he := m.c.heldError(m.name, prev)
		he.line = page.line
		return he
	case newest.epoch >= MaxEpoch:
		return m.exhausted(newest.epoch)
	}
	return nil
}

// exhausted is the error of an attempt that found epoch, the last one.
func (m *mutex) exhausted(epoch uint64) error {
	return fmt.Errorf("%w: lock %q in bucket %s reached epoch %d; use another lock name",
		ErrEpochExhausted, m.name, m.c.bucket, epoch)
}

// leaveToLine is an attempt's last check before it takes a free lock: an
// ordered attempt not made by the head leaves the lock to the line
// (errLineBusy) when someone waits in it. The step-2 LIST answers that
// question when it shows no line and was not truncated (no request); else
// one LIST of the line counts its tickets — a line's common prefix does not
// prove that anyone waits: a stray key shows it, and some stores keep
// listing a prefix after its last key was deleted (SeaweedFS, §13).
func (m *mutex) leaveToLine(ctx context.Context, head bool, page *listed) error {
	if !m.a.order.ordered() || head || (!page.line && !page.truncated) {
		return nil
	}
	v, err := m.c.listLine(ctx, m.name)
	if err != nil {
		return err
	}
	for _, t := range v.tickets {
		if !m.a.shared || !t.shared { // shared waiters keep no shared acquirer out
			return errLineBusy
		}
	}
	return nil
}

// create writes epoch of name with If-None-Match: *, as a lease of this
// client's.
func (c *Client) create(ctx context.Context, name string, epoch uint64, a acquireConfig, start time.Time) (*Lease, error) {
	h, err := c.createHolding(ctx, name, epoch, a)
	if err != nil {
		return nil, err
	}
	return c.established(ctx, h, start, a)
}

// createHolding writes epoch of name with If-None-Match: *, as a lease of
// this client's, and returns what it holds: the lease's validity counts
// from before the create was first sent.
func (c *Client) createHolding(ctx context.Context, name string, epoch uint64, a acquireConfig) (holding, error) {
	now := c.cfg.clock.Now()
	p := payload{
		owner:      owner{Holder: c.cfg.holder, ValidityMs: a.leaseDuration.Milliseconds()},
		Format:     formatVersion,
		Epoch:      epoch,
		Nonce:      randomHex(16),
		Write:      randomHex(8),
		AcquiredAt: now.UTC(),
		Metadata:   a.metadata,
	}
	if a.pending {
		p.Pending, p.Format = true, sharedFormat // §17: shares below may still be held
	}
	var capAt time.Time // WithMaxHold: counted, as the validity, from before the create
	if a.maxHold > 0 {
		capAt = now.Add(a.maxHold)
		p.MaxHoldUntil = capAt.UTC()
	}
	etag, err := c.createObject(ctx, name, epoch, p)
	if err != nil {
		return holding{}, err
	}
	return holding{name: name, epoch: epoch, p: p, etag: etag, trust: trustFor(now, p.validity()), capAt: capAt}, nil
}

// createObject writes epoch of name with If-None-Match: * and body p, and
// returns the ETag of the object it created. A write whose outcome is
// unknown is settled by reading the key back (settleCreate): our nonce
// means it is ours.
func (c *Client) createObject(ctx context.Context, name string, epoch uint64, p payload) (string, error) {
	key := epochKey(name, epoch)
	body, err := p.encode()
	if err != nil {
		return "", err
	}
	w := condWrite{key: key, body: body, nonce: p.Nonce, write: p.Write}
	s := settleCreate(ctx, c, w, maxCreateAttempts, c.epochReader(epoch))
	switch s.verdict {
	case landed:
		return s.etag, nil
	case refused:
		if classify(s.err) == failCollision {
			return "", c.collision(ctx, name, s.err)
		}
		return "", s.err
	case other:
		return c.createdByOther(name, s.found, p)
	case unknown:
		// Cannot tell whether our write landed: make sure it will not hold
		// the lock for nobody, then report.
		c.abandon(ctx, key, epoch, p)
		return "", errors.Join(s.err, s.readErr)
	}
	// Not there after every attempt, or ctx ended: a late arrival of our
	// write must not hold the lock for nobody.
	c.abandon(ctx, key, epoch, p)
	if ctx.Err() != nil {
		return "", errors.Join(ctx.Err(), s.err)
	}
	return "", s.err
}

// createdByOther is the answer to a create of epoch (body p) whose read-back
// found obs, not our write: ours after all if it has our nonce and is not
// released (its ETag), else errRetry (ours but force-released, or someone
// else's epoch already over, or a slot lock's marker, which the next attempt
// reads as such), else a *HeldError.
func (c *Client) createdByOther(name string, obs *observed, p payload) (string, error) {
	switch {
	case obs.body.Nonce == p.Nonce && !obs.body.Released:
		return obs.etag, nil
	case obs.body.Nonce == p.Nonce:
		return "", errRetry // ours, but already released (force-released)
	case free(obs) || obs.body.marker() || obs.body.sharedEpoch():
		return "", errRetry
	}
	return "", c.heldError(name, obs)
}

// createFoundEpoch looks at the error of a create of epoch next of name
// that found the key there already: a *HeldError of that epoch (someone
// created it since the LIST, or the listing hides it: a LIST now tells — a
// race is rare, so is this request), or errRetry (it was there, already
// over: the next attempt's LIST must show it, known.exists). It returns an
// error to report instead of err, if the listing hides the lock's objects.
func (m *mutex) createFoundEpoch(ctx context.Context, next uint64, err error) error {
	var held *HeldError
	switch {
	case errors.As(err, &held) && held.Epoch == next:
		return m.c.listedOrHidden(ctx, m.name, next)
	case errors.Is(err, errRetry):
		m.known.exists = next
	}
	return nil
}

// stillListed checks that the listing just made (newest, found) shows the
// epoch that the last attempt's create found there (known.exists), if any.
func (m *mutex) stillListed(ctx context.Context, newest listedEpoch, found bool) error {
	e := m.known.exists
	if e == 0 || found && newest.epoch >= e {
		return nil
	}
	m.known.exists = 0
	return m.c.hiddenEpochs(ctx, "Acquire", m.name, epochKey(m.name, e))
}

// listedOrHidden checks that a listing shows epoch of name, which a create
// found already there; if none does, the listing hides it (hiddenEpochs).
func (c *Client) listedOrHidden(ctx context.Context, name string, epoch uint64) error {
	newest, found, _, err := c.findNewest(ctx, name)
	switch {
	case err != nil:
		return err
	case found && newest.epoch >= epoch:
		return nil
	}
	return c.hiddenEpochs(ctx, "Acquire", name, epochKey(name, epoch))
}

// hiddenEpochs checks, for op on the lock name, whether the epoch object key
// exists although a listing of the lock's epochs does not show it: then the
// store's listing hides the lock's objects — as MinIO's does when an object
// sits at the lock's name or a parent path (PROTOCOL.md §2) — and every
// decision taken from a listing would be wrong, so it is a permanent
// ErrNameCollision, naming the colliding object when a HEAD finds one. It
// returns nil when the key does not exist (it was deleted meanwhile) and
// the GET's error when it cannot tell. One GET, and a HEAD per path segment
// when the listing does hide the key.
func (c *Client) hiddenEpochs(ctx context.Context, op, name, key string) error {
	_, err := c.headKey(ctx, key)
	switch {
	case classify(err) == failNotFound:
		return nil
	case err != nil:
		return err
	}
	if cerr := c.collidingObject(ctx, op, name); errors.Is(cerr, ErrNameCollision) {
		return cerr
	}
	return &opError{Op: op, Bucket: c.bucket, Key: key, Kind: ErrNameCollision,
		Err: fmt.Errorf("the store's listing of %s does not show s3://%s/%s, which exists: the store hides the "+
			"lock's objects from listings (on MinIO, an object at the lock's name or a parent path does)",
			epochPrefix(name), c.bucket, key)}
}

// collision is the error of an acquisition whose write the store refused
// (err) because an object sits at the lock's name or a parent path: it names
// that object when it can find it.
func (c *Client) collision(ctx context.Context, name string, err error) error {
	if cerr := c.collidingObject(ctx, "Acquire", name); errors.Is(cerr, ErrNameCollision) {
		return cerr
	}
	return err
}

// collidingObject returns an ErrNameCollision error (for op) if an object
// exists at name or at a parent path of it. Only a store that refused a key
// makes that a collision: S3 itself holds "deploy" and "deploy/prod/..." side
// by side.
func (c *Client) collidingObject(ctx context.Context, op, name string) error {
	key, err := c.collidingKey(ctx, name)
	if err != nil || key == "" {
		return err
	}
	return &opError{Op: op, Bucket: c.bucket, Key: key, Kind: ErrNameCollision,
		Err: fmt.Errorf("the object s3://%s/%s exists where lock %q needs a prefix of its own", c.bucket, key, name)}
}

// collidingKey returns the first of name and its parent paths that exists as
// an object ("" if none does): one HEAD per path segment, at most.
func (c *Client) collidingKey(ctx context.Context, name string) (string, error) {
	segs := strings.Split(name, "/")
	for i := range segs {
		key := strings.Join(segs[:i+1], "/")
		_, err := c.headKey(ctx, key)
		switch {
		case err == nil:
			return key, nil
		case classify(err) != failNotFound && classify(err) != failCollision:
			return "", err
		}
	}
	return "", nil
}

// established turns a created epoch object into a Lease, after checking that
// it is still the newest epoch (stillNewest) and still trusted; the attempt
// began at start.
func (c *Client) established(ctx context.Context, h holding, start time.Time, a acquireConfig) (*Lease, error) {
	if err := c.stillNewest(ctx, h.name, h.epoch, h.p, start); err != nil {
		return nil, err
	}
	if err := c.firstEpochListed(ctx, h.name, h.epoch, h.p); err != nil {
		return nil, err
	}
	if h.trust.over(c.cfg.clock.Now()) {
		key := epochKey(h.name, h.epoch)
		c.abandon(ctx, key, h.epoch, h.p)
		return nil, &opError{Op: "Acquire", Bucket: c.bucket, Key: key, Kind: ErrUnavailable,
			Err: errors.New("the store answered only after the new lease had already expired")}
	}
	return c.newLease(h, a), nil
}

// stillNewest checks that an attempt that began at start and created epoch
// (with body p) was quick enough for its LIST to still be current; if it was
// not, it lists again to make sure no newer epoch exists (the epoch created
// may have been an old one that cleanup had deleted, §7), and abandons the
// epoch created if one does (errRetry).
func (c *Client) stillNewest(ctx context.Context, name string, epoch uint64, p payload, start time.Time) error {
	if c.cfg.clock.Now().Sub(start) <= attemptWindow {
		return nil
	}
	newer, err := c.newerEpoch(ctx, name, epoch)
	if err != nil {
		c.abandon(ctx, epochKey(name, epoch), epoch, p)
		return err
	}
	if newer != "" {
		c.cfg.logger.Warn("s3lock: created a stale epoch; a newer one exists", "bucket", c.bucket,
			"key", epochKey(name, epoch), "newer", newer)
		c.abandon(ctx, epochKey(name, epoch), epoch, p)
		return errRetry
	}
	return nil
}

// firstEpochListed checks, after this client created a lock's first epoch
// (its listing showed none), that a listing shows it, and nothing newer. A
// store whose listing hides the lock's objects (MinIO, with an object at the
// lock's name) would otherwise let a second holder in: its lease at epoch 2
// is invisible once cleanup has deleted epoch 1, so a create of epoch 1
// succeeds beside it. The epoch is abandoned and the name refused
// (ErrNameCollision). A listing that shows a newer epoch means the epoch
// created is stale (§7): abandoned, and the attempt starts over. One LIST,
// once in a lock's life.
func (c *Client) firstEpochListed(ctx context.Context, name string, epoch uint64, p payload) error {
	if epoch != 1 {
		return nil
	}
	newest, found, _, err := c.findNewest(ctx, name)
	switch {
	case err == nil && found && newest.epoch == epoch:
		return nil
	case err == nil && found:
		c.cfg.logger.Warn("s3lock: created a stale first epoch; a newer one exists", "bucket", c.bucket,
			"key", epochKey(name, epoch), "newer", newest.key)
		err = errRetry
	case err == nil:
		if err = c.hiddenEpochs(ctx, "Acquire", name, epochKey(name, epoch)); err == nil {
			// Gone since the create (force-released and cleaned up):
			// not a lease to hand out.
			err = errRetry
		}
	}
	c.abandon(ctx, epochKey(name, epoch), epoch, p)
	return err
}

// newerEpoch returns the key of an epoch of name newer than epoch, or "" if
// there is none.
func (c *Client) newerEpoch(ctx context.Context, name string, epoch uint64) (string, error) {
	newer := ""
	lister := epochLister{c: c, name: name}
	err := lister.each(ctx, epochKey(name, epoch), func(l *listed) (bool, error) {
		if n, ok := l.newest(); ok {
			newer = n.key
			return true, nil
		}
		return false, nil // a page of foreign keys only: list on
	})
	return newer, err
}

// abandon makes sure that an epoch this client may have created, but will
// not use, does not keep the lock held for nobody: it creates the key as
// released if it does not exist (so a late copy of our create cannot land),
// or marks our own object released — unless it is a slot lock's marker,
// which others may already use: a marker that landed is never released by
// its writer. It is best effort, bounded by one
// request timeout, and runs even if ctx has ended.
func (c *Client) abandon(ctx context.Context, key string, epoch uint64, p payload) {
	actx, cancel := c.detached(ctx)
	defer cancel()
	rel := p
	rel.Renewals++
	rel.Write = randomHex(8)
	rel.Released = true
	rel.ReleasedAt = c.cfg.clock.Now().UTC()
	rel.Reason = "abandoned by its creator"
	body, err := rel.encode()
	if err != nil {
		return
	}
	for range maxAbandonAttempts {
		if _, err := c.putEpoch(actx, key, "", body); err == nil {
			return
		}
		obs, err := c.getEpoch(actx, key, epoch, "")
		if err != nil {
			if classify(err) == failNotFound {
				continue
			}
			c.cfg.logger.Warn("s3lock: could not check an abandoned epoch; it will lapse", "bucket", c.bucket, "key", key, "err", err)
			return
		}
		switch {
		case obs.body.Nonce != p.Nonce || obs.body.Released:
			return // not ours, or already released
		case p.Slots > 0:
			// Our slot lock's marker landed. Unlike a lease, it is not
			// ours alone: others may have read it and hold slots under
			// it, so releasing it would let a mutex, or another n, in
			// beside them (§14). It stays, recording the n we asked for.
			return
		}
		if _, err := c.putEpoch(actx, key, obs.etag, body); err == nil {
			return
		}
	}
}

// sameObject reports whether a and b are the same version of the same epoch
// object.
func sameObject(a, b *observed) bool {
	return a != nil && b != nil && a.key == b.key && a.etag != "" && a.etag == b.etag
}

// heldError describes the lease read in o.
func (c *Client) heldError(name string, o *observed) *HeldError {
	left, ok := remaining(o)
	if !ok {
		left = o.body.validity() + serverSlack
	}
	return &HeldError{
		Bucket:     c.bucket,
		Name:       name,
		Key:        o.key,
		Epoch:      o.epoch,
		Holder:     o.body.Holder,
		ExpiresIn:  max(left, 0),
		AcquiredAt: o.body.AcquiredAt,
		Metadata:   o.body.Metadata,
		Share:      o.body.Share,
		Pending:    o.body.Pending && !o.body.Released,
		obs:        o,
	}
}
