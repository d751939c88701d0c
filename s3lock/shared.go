package s3lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file holds shared leases (WithShared, PROTOCOL.md §17): any number of
// shared holders or one exclusive holder. A shared holder holds a share,
// "<name>/lock-shared/<S>/<id>.json", a lease of its own under the shared
// epoch S, the lock's newest epoch, which has no holder and never lapses. An
// exclusive acquirer that finds shares creates its epoch *pending* above
// them, which keeps new shared holders out, and trusts it as exclusive only
// once every share below it has ended (awaitShares); the first write after
// that drops the mark.

// WithShared takes a shared lease instead of an exclusive one: any number of
// shared holders hold the lock together, and an exclusive holder (an
// acquisition without WithShared) holds it alone (PROTOCOL.md §17). Take it
// for work that only reads what the lock guards — a plan, a report — and
// never writes it: nothing stops a shared holder from writing, and shared
// holders of one epoch share one fencing token (Token.Epoch), so a fenced
// write cannot tell them apart: do not pass a shared lease's epoch to
// package fence as a writer's.
//
// A shared acquisition joins the lock while it is free or shared; it waits
// while an exclusive holder holds it, and also while an exclusive acquirer
// waits for the shared holders that were there before it (a writer is not
// starved by a stream of new readers). In line (WithOrder), shared waiters
// are served together, and never before an exclusive waiter that joined
// before them. A shared acquisition of a lock that is free or already
// shared costs four or five requests however many hold it; release costs
// two. WithShared does not mix with WithSlots (ErrInvalidConfig); a shared
// acquisition that finds a slot lock gets a *SlotsError.
func WithShared() Option {
	return leaseOption("WithShared", func(a *acquireConfig) error {
		a.shared = true
		return nil
	})
}

// checkShared checks that a's options go together.
func (a *acquireConfig) checkShared() error {
	if a.shared && a.slots > 1 {
		return invalid("WithShared and WithSlots(%d) do not mix: a lock is either a slot lock or one with shared holders", a.slots)
	}
	return nil
}

// sharedLock is a shared acquisition (WithShared): its attempts join the
// lock's newest shared epoch, or create one above an exclusive epoch that
// ended, then create a share and check that no epoch came above it; it
// waits for an exclusive holder (or a pending one) as a mutex does.
type sharedLock struct {
	lock mutex
}

func (s *sharedLock) wait(ctx context.Context, w *waiter, held *HeldError) error {
	return s.lock.wait(ctx, w, held)
}

func (s *sharedLock) forget() {}

// attempt is one shared acquisition attempt (PROTOCOL.md §17, "Shared
// acquire"): LIST, GET of the newest epoch (skipped when known), the shared
// epoch's create if it must be created, the share's create, and the check.
func (s *sharedLock) attempt(ctx context.Context, head bool) (*Lease, error) {
	m := &s.lock
	c, name := m.c, m.name
	l := listing{start: c.cfg.clock.Now()}
	var err error
	l.newest, l.found, l.page, err = c.findNewest(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := m.stillListed(ctx, l.newest, l.found); err != nil {
		return nil, err
	}
	epoch, join := uint64(1), false
	if l.found {
		prev, err := m.readNewest(ctx, l)
		switch {
		case err != nil:
			return nil, err
		case prev.body.marker():
			se := c.slotsError(name, prev, 1)
			se.Shared = true
			return nil, se
		case prev.body.sharedEpoch():
			epoch, join = l.newest.epoch, true
		default:
			// An exclusive epoch: held or pending-and-live makes this
			// reader wait; ended, the shared epoch goes above it.
			if err := m.busy(prev, l.newest, l.page); err != nil {
				return nil, err
			}
			epoch = l.newest.epoch + 1
		}
	}
	if err := m.leaveToLine(ctx, head, l.page); err != nil {
		return nil, err
	}
	if !join {
		err := c.createSharedEpoch(ctx, name, epoch)
		if herr := m.createFoundEpoch(ctx, epoch, err); herr != nil {
			return nil, herr
		}
		if err != nil {
			return nil, err
		}
	}
	h, err := c.createShare(ctx, name, epoch, m.a)
	if err != nil {
		return nil, err
	}
	if err := c.checkShare(ctx, h); err != nil {
		return nil, err
	}
	lease := c.newLease(h, m.a)
	c.cfg.logger.Info("s3lock: acquired a shared lease", "bucket", c.bucket, "key", lease.key, "epoch", epoch, "holder", c.cfg.holder)
	lease.startBackground()
	if !join {
		c.startCleanup(c.cleanupFor(name, epoch, l.page))
	}
	return lease, nil
}

// createSharedEpoch creates epoch of name as a shared epoch (If-None-Match:
// *). It returns nil when the key holds a shared epoch (ours, or another
// reader's: join it), errRetry when it holds an epoch already over, a
// *HeldError when it holds a live exclusive one. A shared epoch is never
// abandoned: one that lands unused is open and harmless (readers join it,
// a writer creates above it).
func (c *Client) createSharedEpoch(ctx context.Context, name string, epoch uint64) error {
	p := payload{owner: owner{Holder: c.cfg.holder}, Format: sharedFormat, Mode: modeShared, Epoch: epoch,
		Nonce: randomHex(16), Write: randomHex(8), AcquiredAt: c.cfg.clock.Now().UTC()}
	body, err := p.encode()
	if err != nil {
		return err
	}
	key := epochKey(name, epoch)
	s := settleCreate(ctx, c, condWrite{key: key, body: body, nonce: p.Nonce, write: p.Write}, maxCreateAttempts, c.epochReader(epoch))
	switch s.verdict {
	case landed:
		return nil
	case refused:
		if classify(s.err) == failCollision {
			return c.collision(ctx, name, s.err)
		}
		return s.err
	case other:
		switch f := s.found; {
		case f.body.sharedEpoch():
			return nil
		case free(f) || f.body.marker():
			return errRetry
		}
		return c.heldError(name, s.found)
	case unknown:
		return errors.Join(s.err, s.readErr)
	}
	if ctx.Err() != nil {
		return errors.Join(ctx.Err(), s.err)
	}
	return s.err
}

// createShare creates a share of this client's under shared epoch epoch of
// name: a lease of its own, trusted from before its create was first sent.
// A create whose outcome stays unknown is abandoned (a late copy lands
// released).
func (c *Client) createShare(ctx context.Context, name string, epoch uint64, a acquireConfig) (holding, error) {
	now := c.cfg.clock.Now()
	id := randomHex(shareIDDigits / 2)
	p := payload{
		owner:      owner{Holder: c.cfg.holder, ValidityMs: a.leaseDuration.Milliseconds()},
		Format:     sharedFormat,
		Mode:       modeShared,
		Share:      id,
		Epoch:      epoch,
		Nonce:      randomHex(16),
		Write:      randomHex(8),
		AcquiredAt: now.UTC(),
		Metadata:   a.metadata,
	}
	var capAt time.Time
	if a.maxHold > 0 {
		capAt = now.Add(a.maxHold)
		p.MaxHoldUntil = capAt.UTC()
	}
	key := shareKey(name, epoch, id)
	body, err := p.encode()
	if err != nil {
		return holding{}, err
	}
	s := settleCreate(ctx, c, condWrite{key: key, body: body, nonce: p.Nonce, write: p.Write}, maxCreateAttempts, c.epochReader(epoch))
	switch {
	case s.verdict == landed:
		return holding{name: name, epoch: epoch, share: id, p: p, etag: s.etag, trust: trustFor(now, p.validity()), capAt: capAt}, nil
	case s.verdict == other && s.found.body.Nonce == p.Nonce && !s.found.body.Released:
		return holding{name: name, epoch: epoch, share: id, p: p, etag: s.etag, trust: trustFor(now, p.validity()), capAt: capAt}, nil
	case s.verdict == refused:
		if classify(s.err) == failCollision {
			return holding{}, c.collision(ctx, name, s.err)
		}
		return holding{}, s.err
	}
	c.abandon(ctx, key, epoch, p)
	err = errors.Join(s.err, s.readErr)
	switch {
	case ctx.Err() != nil:
		return holding{}, errors.Join(ctx.Err(), err)
	case err == nil:
		return holding{}, errRetry // another's object at our random key: not ours to use
	}
	return holding{}, err
}

// checkShare is the shared acquisition's check (PROTOCOL.md §17, step 5),
// sent only after the share's create was answered: a LIST of the lock's
// epochs must show the share's epoch as the newest. An epoch above it means
// an exclusive acquirer (or anyone) came since: the share is withdrawn and
// the attempt starts over (errRetry; it then finds the newer epoch, and
// waits for it). A listing that does not show the share's epoch at all is
// the name collision check of a lock's first epoch (firstEpochListed). The
// share is withdrawn too if its trust ended meanwhile.
func (c *Client) checkShare(ctx context.Context, h holding) error {
	newest, found, _, err := c.findNewest(ctx, h.name)
	switch {
	case err != nil:
	case found && newest.epoch == h.epoch:
		if h.trust.over(c.cfg.clock.Now()) {
			err = &opError{Op: "Acquire", Bucket: c.bucket, Key: h.key(), Kind: ErrUnavailable,
				Err: errors.New("the store answered only after the new share had already expired")}
		}
	case found && newest.epoch > h.epoch:
		c.cfg.logger.Debug("s3lock: an epoch came above the new share; withdrawing it", "bucket", c.bucket,
			"key", h.key(), "newer", newest.key)
		err = errRetry
	default:
		if err = c.hiddenEpochs(ctx, "Acquire", h.name, epochKey(h.name, h.epoch)); err == nil {
			err = errRetry // its epoch is gone (cleaned up after a newer one): look again
		}
	}
	if err != nil {
		c.withdrawShare(ctx, h.key())
	}
	return err
}

// withdrawShare deletes a share this client created and will not use (best
// effort, one request timeout even after ctx ended): its create was
// answered, so no copy of it lands later. A share that cannot be deleted
// lapses, and only lengthens an exclusive acquirer's wait.
func (c *Client) withdrawShare(ctx context.Context, key string) {
	dctx, cancel := c.detached(ctx)
	defer cancel()
	if err := c.deleteKey(dctx, key); err != nil {
		c.cfg.logger.Warn("s3lock: could not withdraw a share; it will lapse", "bucket", c.bucket, "key", key, "err", err)
	}
}

// key is the object key of what h holds: its epoch object, or its share.
func (h holding) key() string {
	if h.share != "" {
		return shareKey(h.name, h.epoch, h.share)
	}
	return epochKey(h.name, h.epoch)
}

// pendingOver reports whether an exclusive epoch created after prev must be
// pending (PROTOCOL.md §17): prev is a shared epoch, or an exclusive epoch
// that ended still pending (its writer gave up, or crashed, before the
// shares below it ended; they may still be held).
func pendingOver(prev *observed) bool {
	return prev != nil && (prev.body.sharedEpoch() || prev.body.Pending)
}

// awaitShares is an exclusive acquisition's wait for the shares below its
// pending epoch (l): it lists every share of every epoch below l's, and
// waits until each of those it did not judge ended then has ended, listing
// them once a poll interval; shares that appear later are not waited for
// (their readers' check sees l's epoch and withdraws them). Then it drops
// the pending mark (a renewal) and deletes the ended shares in the
// background. A TryAcquire (a.try) does not wait: it releases l and returns
// a *HeldError naming a shared holder. For a waiting Acquire the wait is its
// waiter's (sharesFound: WithWait counts from when the shares are found
// held, and the wait observer is told of them whenever their number
// changes); when it ends, l is released (it stays pending) and the error is
// the waiter's *waitError, whose last cause is a *HeldError naming a shared
// holder (it matches ErrHeld). If l's trust ends first (its renewals
// failed), the attempt starts over.
func (m *mutex) awaitShares(ctx context.Context, l *Lease) error {
	c := m.c
	ws := &shareWait{c: c, name: m.name, epoch: l.epoch, seen: map[string]sighting{}}
	err := ws.look(ctx)
	told := -1 // how many shares the waiter was last told of
	for err == nil && len(ws.live) > 0 {
		if m.a.try || m.waiter == nil {
			err = ws.heldError(ctx)
			break
		}
		if n := len(ws.live); n != told {
			told = n
			ctx = m.waiter.sharesFound(ws.heldError(ctx))
		}
		select {
		case <-ctx.Done():
			err = m.waiter.gaveUp(ctx)
		case <-l.Done():
			err = errRetry // the pending lease ended (its renewals failed): attempt again
		case <-c.cfg.clock.After(earlier(c.cfg.pollInterval)):
			// Its place in line first: errRetry when it lost it, or the
			// newer waiter it gave way to.
			if err = m.waiter.lineDuty(ctx); err == nil {
				if err = ws.look(ctx); errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
					err = nil // the next look tells
				}
			}
		}
	}
	if err == nil && l.Err() != nil {
		err = errRetry // its trust ended as the shares did: not exclusive
	}
	if err != nil {
		if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, ErrLeaseLost) {
			c.cfg.logger.Warn("s3lock: could not release a pending epoch; it lapses", "bucket", c.bucket, "key", l.key, "err", rerr)
		}
		return err
	}
	l.clearPending(ctx)
	if ended := ws.ended; len(ended) > 0 {
		c.startCleanup(func(ctx context.Context) { _ = c.deleteKeys(ctx, ended) })
	}
	return nil
}

// clearPending drops the pending mark of an exclusive epoch whose wait for
// the shares below it ended: from now on it is format 1, which an s3lock
// without shared leases may take the next epoch after. One renewal; if it
// fails, the next write (a renewal, or the release) drops it.
func (l *Lease) clearPending(ctx context.Context) {
	l.mu.Lock()
	l.p.Pending, l.p.Format = false, formatVersion
	l.mu.Unlock()
	if err := l.Renew(ctx); err != nil {
		l.c.cfg.logger.Debug("s3lock: the renewal that clears the pending mark failed; the next write clears it",
			"bucket", l.c.bucket, "key", l.key, "err", err)
	}
}

// shareWaiting is the waiting Acquire an exclusive acquisition waits for
// shares within (waiter).
type shareWaiting interface {
	// sharesFound says that the acquisition waits for the shared holders
	// held describes; it returns the context of the wait.
	sharesFound(held *HeldError) context.Context
	// gaveUp is the error of a wait whose context ended.
	gaveUp(ctx context.Context) error
	// lineDuty keeps an ordered waiter's place in line meanwhile (its
	// heartbeat): errRetry when it lost its place (the next attempt takes
	// its turn again), a *SupersededError when a newer waiter displaced it.
	lineDuty(ctx context.Context) error
}

// shareWait is what an exclusive acquirer knows of the shares below its
// pending epoch: those it waits for (live, by key), those it judged ended,
// and, for a store that sends no Date, when it first saw each share's ETag.
type shareWait struct {
	c     *Client
	name  string
	epoch uint64
	// listed is set after the first listing: from then on only the keys
	// in live are judged.
	listed bool
	live   map[string]listedKey
	ended  []string
	seen   sightings
}

// look lists the shares (one LIST per 1,000 keys) and judges each share of
// an epoch below ws.epoch that it waits for (on the first look, every one):
// ended when gone, released or lapsed by the store's clock; from the
// listing's size code where it can tell, else with a GET (PROTOCOL.md §17).
func (ws *shareWait) look(ctx context.Context) error {
	found := map[string]listedKey{}
	err := ws.c.listKeys(ctx, sharePrefix(ws.name), func(k listedKey) {
		if e, ok := parseShareKey(ws.name, k.key); ok && e < ws.epoch {
			found[k.key] = k
		}
	})
	if err != nil {
		return err
	}
	if ws.listed {
		for key := range ws.live {
			if _, ok := found[key]; !ok {
				delete(ws.live, key) // deleted by its holder: ended
			}
		}
		for key := range found {
			if _, ok := ws.live[key]; !ok {
				delete(found, key) // a share that came after the first look: not waited for
			}
		}
	}
	ws.listed, ws.live = true, map[string]listedKey{}
	for key, k := range found {
		ended, err := ws.judge(ctx, k)
		switch {
		case err != nil:
			return err
		case ended:
			ws.ended = append(ws.ended, key)
		default:
			ws.live[key] = k
		}
	}
	return nil
}

// judge says whether the listed share k has ended: released, gone, or
// lapsed by the store's clock (on a store without Date, unchanged for its
// validity plus serverSlack by this client's clock).
func (ws *shareWait) judge(ctx context.Context, k listedKey) (bool, error) {
	switch v, _ := judgeListed(listedEpoch{key: k.key, etag: k.etag, lastModified: k.lastModified, size: k.size}, k.date); v {
	case sizeFree:
		return true, nil
	case sizeHeld:
		return false, nil
	}
	e, _ := parseShareKey(ws.name, k.key)
	obs, err := ws.c.getEpoch(ctx, k.key, e, "")
	switch {
	case classify(err) == failNotFound:
		return true, nil
	case err != nil:
		return false, err
	case free(obs):
		return true, nil
	case !obs.date.IsZero():
		return false, nil
	}
	s, ok := ws.seen[k.key]
	if !ok || s.etag != obs.etag {
		ws.seen[k.key] = sighting{etag: obs.etag, at: obs.received}
		return false, nil
	}
	return obs.received.Sub(s.at) >= obs.body.validity()+serverSlack, nil
}

// heldError describes the shares a TryAcquire found (one GET, of one of
// them, for its holder): the lock is held shared.
func (ws *shareWait) heldError(ctx context.Context) *HeldError {
	he := &HeldError{Bucket: ws.c.bucket, Name: ws.name, Key: sharePrefix(ws.name), Shared: true, Waiting: len(ws.live)}
	for key := range ws.live {
		e, _ := parseShareKey(ws.name, key)
		if obs, err := ws.c.getEpoch(ctx, key, e, ""); err == nil {
			h := ws.c.heldError(ws.name, obs)
			h.Shared, h.Waiting, h.obs = true, len(ws.live), nil
			return h
		}
		break
	}
	return he
}

// shareText says, for messages, what a shared lease's key is.
func shareText(n int) string {
	if n == 1 {
		return "1 shared holder"
	}
	return fmt.Sprintf("%d shared holders", n)
}

// takeOverShare is Resume of a share's token (t.Share set).
func (c *Client) takeOverShare(ctx context.Context, t Token, opts []Option) (*Lease, error) {
	if err := c.checkToken(t); err != nil {
		return nil, err
	}
	a, err := takeoverConfig(opts, slotRef{})
	if err != nil {
		return nil, err
	}
	h, err := c.inspectShare(ctx, t)
	if err != nil {
		return nil, err
	}
	a.shared = true
	a.leaseDuration = h.obs.body.validity()
	a.renewInterval = c.renewIntervalFor(a.leaseDuration)
	lease := c.newLease(holding{name: t.Name, epoch: t.Epoch, share: t.Share, p: *h.obs.body, etag: h.obs.etag, trust: h.trust}, a)
	lease.startBackground()
	return lease, nil
}

// lookupShare is Lookup of a share's token.
func (c *Client) lookupShare(ctx context.Context, t Token) (State, error) {
	if err := c.checkToken(t); err != nil {
		return State{}, err
	}
	h, err := c.inspectShare(ctx, t)
	if err != nil {
		return State{}, err
	}
	st := c.stateOf(t.Name, h.obs)
	st.TrustedUntil = h.trust.until
	return st, nil
}

// inspectShare reads the share t names and checks that a handle may hold
// it: no epoch above its shared epoch is an exclusive one that cleared (it
// waited for the share to end: PROTOCOL.md §17) — only pending ones, and
// shared ones above a pending one that ended — and, without t's nonce, none
// is a writer's that still waits (it may not wait for this share); and the
// share is neither released, deleted nor lapsed and carries t's nonce. One
// LIST and one GET, and a GET per epoch above the share's.
func (c *Client) inspectShare(ctx context.Context, t Token) (heldLease, error) {
	key := t.Key()
	lost := func(reason LossReason, detail string) error {
		return &LeaseLostError{Bucket: c.bucket, Name: t.Name, Key: key, Epoch: t.Epoch, Reason: reason, Detail: detail}
	}
	var above []listedEpoch
	err := (&epochLister{c: c, name: t.Name}).each(ctx, epochKey(t.Name, t.Epoch), func(l *listed) (bool, error) {
		above = append(above, l.epochs...)
		return false, nil
	})
	if err != nil {
		return heldLease{}, err
	}
	for _, e := range above {
		obs, err := c.getEpoch(ctx, e.key, e.epoch, "")
		switch {
		case classify(err) == failNotFound:
			continue // cleaned up: a newer epoch is above it, and is read too
		case err != nil:
			return heldLease{}, err
		case obs.body.sharedEpoch():
			continue // readers came after a writer that gave up: shares below may still be held
		case !obs.body.Pending:
			return heldLease{}, lost(LostReplaced, fmt.Sprintf("an exclusive holder came after it (the lock is at epoch %d)", above[len(above)-1].epoch))
		case t.Nonce == "" && !free(obs):
			// Adopted without its acquisition's nonce, the share may be
			// one its reader withdrew (and could not delete) after this
			// writer listed the shares: the writer does not wait for it.
			return heldLease{}, fmt.Errorf("%w; a share is adopted without its token's nonce only while no writer waits "+
				"above it", c.heldError(t.Name, obs))
		}
	}
	obs, err := c.getEpoch(ctx, key, t.Epoch, "")
	switch {
	case classify(err) == failNotFound:
		return heldLease{}, lost(LostDeleted, "its share does not exist (released, or force-released)")
	case err != nil:
		return heldLease{}, err
	case obs.body.Share != t.Share:
		return heldLease{}, lost(LostNotThisLease, "the object at its key is not its share")
	}
	return c.heldObject(obs, t.Nonce, lost)
}

// forceReleaseShare is ForceRelease of a share's token: it marks the share
// released, as ForceRelease marks an epoch (its holder's next write finds it
// so: LostForceReleased); a writer judges it ended, and deletes it.
func (c *Client) forceReleaseShare(ctx context.Context, t Token) error {
	err := c.forceReleaseKey(ctx, t.Name, t.Key(), t.Epoch)
	if errors.Is(err, ErrNoSuchEpoch) {
		return fmt.Errorf("%w: no such share: s3://%s/%s does not exist (released, force-released and cleaned up, or another share id or epoch)",
			ErrNoSuchEpoch, c.bucket, t.Key())
	}
	return err
}

// shareHolders returns the live shares of the lock name, sorted by key: of
// shared epoch epoch (of), or of every epoch below it (the shares a pending
// epoch waits for). listed holds the shares as a listing found them (nil:
// list them first, one LIST per 1,000); then one GET each, up to eight at a
// time.
func (c *Client) shareHolders(ctx context.Context, name string, epoch uint64, of bool, listed map[string]listedEpoch) ([]State, error) {
	if listed == nil {
		listed = map[string]listedEpoch{}
		err := c.listKeys(ctx, sharePrefix(name), func(k listedKey) {
			listed[k.key] = listedEpoch{key: k.key, etag: k.etag, lastModified: k.lastModified, size: k.size}
		})
		if err != nil {
			return nil, err
		}
	}
	for key, e := range listed {
		s, ok := parseShareKey(name, key)
		if !ok || of && s != epoch || !of && s >= epoch {
			delete(listed, key)
			continue
		}
		e.epoch = s
		listed[key] = e
	}
	_, objs, errs := readNewest(ctx, c, listed)
	var out []State
	for k, obs := range objs {
		switch {
		case classify(errs[k]) == failNotFound:
			continue // released since the LIST
		case errs[k] != nil:
			return nil, errs[k]
		}
		if st := c.stateOf(name, obs); st.Held {
			out = append(out, st)
		}
	}
	return out, nil
}

// withShareHolders adds to s, the state of a lock whose newest epoch (read
// in obs) is shared or pending, the shares that hold it (shareHolders;
// listed as for it). A pending epoch that ended while shares below it still
// hold leaves the lock held by them: Shared.
func (c *Client) withShareHolders(ctx context.Context, s State, obs *observed, listed map[string]listedEpoch) (State, error) {
	holders, err := c.shareHolders(ctx, s.Name, obs.epoch, s.Shared, listed)
	if err != nil {
		return s, err
	}
	return heldByShares(s, holders), nil
}

// heldByShares is s with holders, the live shares of its lock: held if any
// is; a pending epoch that ended while they still hold leaves the lock
// held by them (Shared).
func heldByShares(s State, holders []State) State {
	s.Holders = holders
	if !s.Held && len(holders) > 0 {
		s.Shared, s.Holder = true, ""
	}
	s.Held = s.Held || len(holders) > 0
	return s
}

// shareOwner returns the lock whose shares hold the key, if key is a share.
func shareOwner(key string) (string, bool) {
	i := strings.LastIndex(key, "/"+sharedSegment+"/")
	if i <= 0 {
		return "", false
	}
	name := key[:i]
	if _, ok := parseShareKey(name, key); !ok || ValidateName(name) != nil {
		return "", false
	}
	return name, true
}
