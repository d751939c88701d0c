package s3lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds a lock's line: the tickets through which ordered waiters
// (OrderFIFO, OrderNewest) take their turn (PROTOCOL.md §13). The line decides who
// attempts the lock; the lock itself is only its epoch objects.

// Order says in which order a waiting Acquire takes its turn (WithOrder).
type Order string

// The orders of WithOrder.
const (
	// OrderNone races for a released lock (the default).
	OrderNone Order = "none"
	// OrderFIFO waits in the lock's line: first come, first served.
	OrderFIFO Order = "fifo"
	// OrderNewest waits in the line and gives way to newer OrderNewest
	// waiters: newest wins.
	OrderNewest Order = "newest"
)

// ParseOrder returns the Order named s ("fifo", "newest" or "none"); other
// strings are an error matching ErrInvalidConfig.
func ParseOrder(s string) (Order, error) {
	switch o := Order(s); o {
	case OrderNone, OrderFIFO, OrderNewest:
		return o, nil
	}
	return "", invalid("order %q: use %q (first come, first served), %q (newest wins) or %q (no order)",
		s, OrderFIFO, OrderNewest, OrderNone)
}

// ordered reports whether o waits in the line.
func (o Order) ordered() bool { return o == OrderFIFO || o == OrderNewest }

// errLineBusy: an ordered attempt found the lock free but others waiting in
// its line; the attempt must join the line rather than take the lock.
var errLineBusy = errors.New("s3lock: the lock is free but others wait in its line")

// errLostPlace: a waiter's ticket is gone, or its place is no longer
// trusted; it must join the line again.
var errLostPlace = errors.New("s3lock: lost its place in the line")

// errNotHead makes a waiting Acquire that was watching the holder go back to
// waiting for its turn: it joined the line again.
var errNotHead = errors.New("s3lock: no longer at the head of the line")

// ticketObs is a ticket as read from the store.
type ticketObs struct {
	etag string
	body *ticketBody
}

// lineView is one listing of a lock's line.
type lineView struct {
	tickets  []listedTicket // in key order: the order of service
	date     time.Time      // the store's clock at the first page; zero if not sent
	received time.Time      // this client's clock when the first page arrived
}

type listedTicket struct {
	ticketRef
	etag         string
	lastModified time.Time
}

// sightings remembers, per ticket key, the ETag a waiter last saw and when
// it first saw it: on a store that sends no Date, a ticket unchanged for
// ticketValidity + serverSlack by the waiter's own clock has lapsed.
type sightings map[string]sighting

type sighting struct {
	etag string
	at   time.Time
}

// live reports whether t is still in line: not lapsed by the store's clock
// (its last heartbeat is less than ticketValidity + serverSlack old), or on
// a store that sends no Date, not seen unchanged for that long (seen may be
// nil: then every ticket counts as live).
func (v *lineView) live(t listedTicket, seen sightings) bool {
	if !v.date.IsZero() && !t.lastModified.IsZero() {
		return ticketLive(t.lastModified, v.date)
	}
	if seen == nil {
		return true
	}
	s, ok := seen[t.key]
	if !ok || s.etag != t.etag {
		seen[t.key] = sighting{etag: t.etag, at: v.received}
		return true
	}
	return v.received.Sub(s.at) < ticketValidity+serverSlack
}

// place is a waiter's ticket in a lock's line: what it wrote, until when it
// trusts its place, and what it saw of the others.
type place struct {
	c        *Client
	name     string
	order    Order
	metadata map[string]string
	// shared is a shared waiter's place (WithShared): only exclusive
	// waiters before it keep it from its turn, so that shared waiters at
	// the front go in together (PROTOCOL.md §17, "The line").
	shared bool

	ref      ticketRef
	body     ticketBody
	etag     string
	trust    trust // from when the last confirmed write was sent
	nextBeat time.Time
	seen     sightings
	// unsettled holds the heartbeats given up with their outcome unknown.
	unsettled unsettled
}

// standing is where a waiter stands in one listing of the line.
type standing struct {
	present bool          // its own ticket was listed
	ahead   int           // live tickets before its own
	newer   *listedTicket // the first live OrderNewest ticket after its own
}

// join takes a ticket at the back of the line: LIST for the highest number,
// then create the next one. An unknown outcome is read back by nonce, as an
// epoch create's is (settleCreate); a join that gives up while the outcome
// is unknown deletes the key (best effort: a create that lands later
// lapses).
func (p *place) join(ctx context.Context) error {
	c := p.c
	v, err := c.listLine(ctx, p.name)
	if err != nil {
		return err
	}
	n := uint64(1)
	for _, t := range v.tickets {
		n = max(n, t.n+1)
	}
	if n > MaxEpoch {
		return fmt.Errorf("%w: the line of lock %q in bucket %s reached ticket %d; wait until it empties",
			ErrEpochExhausted, p.name, c.bucket, MaxEpoch)
	}
	ref := ticketRef{key: ticketKey(p.name, n, p.order, randomHex(ticketIDDigits/2), p.shared), n: n, order: p.order, shared: p.shared}
	now := c.cfg.clock.Now()
	body := newTicketBody(c.cfg.holder, p.order, now, p.metadata)
	data, err := body.encode()
	if err != nil {
		return err
	}
	sent := now // the place is trusted from before the first attempt
	s := settleCreate(ctx, c, condWrite{key: ref.key, body: data, nonce: body.Nonce, write: body.Write},
		maxJoinAttempts, c.getTicket)
	switch {
	case s.verdict == landed, s.verdict == other && s.found.body.Nonce == body.Nonce:
		p.hold(ref, body, s.etag, sent)
		return nil
	case s.verdict == refused:
		return s.err
	case s.verdict == other:
		return &opError{Op: "Acquire", Bucket: c.bucket, Key: ref.key, Kind: ErrUnavailable,
			Err: errors.New("another writer created this waiter's ticket")}
	}
	p.forget(ctx, ref.key)
	if s.verdict == unknown {
		return errors.Join(s.err, s.readErr)
	}
	return errors.Join(ctx.Err(), s.err)
}

// hold records a ticket as this waiter's.
func (p *place) hold(ref ticketRef, body ticketBody, etag string, sent time.Time) {
	p.ref, p.body, p.etag, p.unsettled = ref, body, etag, nil
	p.trustFrom(sent)
	p.c.cfg.logger.Info("s3lock: waiting in line", "bucket", p.c.bucket, "lock", p.name, "ticket", ref.key,
		"order", string(p.order))
}

// trustFrom extends the place's trust from a write sent at sent.
func (p *place) trustFrom(sent time.Time) {
	p.trust = trustFor(sent, ticketValidity)
	p.nextBeat = sent.Add(ticketRenewEvery)
}

// beat rewrites the ticket when a heartbeat is due, through settle. It
// returns errLostPlace when the place is no longer trusted or the ticket is
// gone or changed; a heartbeat whose outcome stays unknown (or that the
// store refused) is retried at the next call while the place is trusted.
func (p *place) beat(ctx context.Context) error {
	c := p.c
	now := c.cfg.clock.Now()
	if p.trust.over(now) {
		return errLostPlace
	}
	if now.Before(p.nextBeat) {
		return nil
	}
	b := p.body
	b.Renewals++
	b.Write = randomHex(8)
	b.RenewedAt = now.UTC()
	data, err := b.encode()
	if err != nil {
		return err
	}
	sent := now
	w := condWrite{key: p.ref.key, etag: p.etag, body: data, nonce: b.Nonce, write: b.Write, earlier: p.unsettled}
	s := settle(ctx, c, w, c.getTicket)
	switch s.verdict {
	case landed:
	case landedEarlier:
		// An earlier heartbeat that did not seem to land did, since: the
		// ticket is still ours. Count it, and write again soon.
		b, sent = *s.found.body, p.unsettled[s.found.body.Write]
	case unchanged, unknown:
		p.unsettled.add(b.Write, sent) // it may still land
		p.nextBeat = now.Add(ticketRenewEvery / renewRetryDivisor)
		return nil
	case refused:
		p.nextBeat = now.Add(ticketRenewEvery / renewRetryDivisor) // it cannot land: only try again soon
		return nil
	default:
		return errLostPlace // deleted as lapsed, or rewritten
	}
	if p.trust.over(c.cfg.clock.Now()) {
		return errLostPlace // confirmed too late: someone may have skipped it
	}
	p.body, p.etag = b, s.etag
	if sent.After(p.trust.from) {
		p.trustFrom(sent)
	}
	return nil
}

// stand lists the line and says where this waiter stands. Lapsed tickets
// ahead of it are deleted (one request) and not counted.
func (p *place) stand(ctx context.Context) (standing, error) {
	v, err := p.c.listLine(ctx, p.name)
	if err != nil {
		return standing{}, err
	}
	var st standing
	var lapsed []string
	for i, t := range v.tickets {
		// Compared by key, so that a waiter whose ticket is gone (lapsed
		// and deleted by others) still learns who came before and after it.
		switch {
		case t.key == p.ref.key:
			st.present = true
		case !v.live(t, p.seen):
			if t.key < p.ref.key || p.ref.key == "" {
				lapsed = append(lapsed, t.key)
			}
		case (t.key < p.ref.key || p.ref.key == "") && (!p.shared || !t.shared):
			st.ahead++
		case t.order == OrderNewest && st.newer == nil && t.key > p.ref.key: // (a shared ticket before its own is not ahead, nor newer)
			st.newer = &v.tickets[i]
		}
	}
	if len(lapsed) > 0 {
		if err := p.c.deleteKeys(ctx, lapsed); err != nil {
			p.c.cfg.logger.Debug("s3lock: could not delete lapsed tickets", "bucket", p.c.bucket, "lock", p.name, "err", err)
		}
	}
	return st, nil
}

// readBack reads the ticket at key with a context that survives the
// caller's cancellation for one request timeout.
func (p *place) readBack(ctx context.Context, key string) (*ticketObs, error) {
	rctx, cancel := p.c.detached(ctx)
	defer cancel()
	return p.c.getTicket(rctx, key)
}

// forget deletes a ticket this waiter wrote or may have written (best
// effort, one request timeout, even if ctx has ended).
func (p *place) forget(ctx context.Context, key string) {
	dctx, cancel := p.c.detached(ctx)
	defer cancel()
	if err := p.c.deleteKey(dctx, key); err != nil {
		p.c.cfg.logger.Warn("s3lock: could not delete a ticket; it will lapse", "bucket", p.c.bucket, "key", key, "err", err)
	}
}

// superseded leaves the line because of the newer ticket t.
func (p *place) superseded(ctx context.Context, t *listedTicket) error {
	e := &SupersededError{Bucket: p.c.bucket, Name: p.name, Key: p.ref.key, NewerKey: t.key}
	if obs, err := p.readBack(ctx, t.key); err == nil {
		e.By = obs.body.Holder
	}
	p.forget(ctx, p.ref.key)
	p.ref = ticketRef{}
	return e
}

// Waiter is one ordered waiter in a lock's line, as Line reports it.
type Waiter struct {
	// Position is the waiter's place in the line: 1 is served next.
	Position int
	// Key is its ticket; Ticket the ticket's number.
	Key    string
	Ticket uint64
	Order  Order
	// Holder, JoinedAt (the waiter's clock; informational) and Metadata
	// come from the ticket; they are empty when Err says why it could not
	// be read.
	Holder   string
	JoinedAt time.Time
	Metadata map[string]string
	Err      error
}

// Line returns the ordered waiters in the line of the lock name, in the order
// they will be served: one LIST of the line and one GET per live ticket
// (tickets whose waiter stopped renewing them are left out), all bounded by
// ctx. Waiters without order are not in the line and not shown. A ticket that
// cannot be read is listed with Err set; a waiter that left between the LIST
// and its GET is left out.
func (c *Client) Line(ctx context.Context, name string) ([]Waiter, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	v, err := c.listLine(ctx, name)
	if err != nil {
		return nil, err
	}
	var ws []Waiter
	for _, t := range v.tickets {
		if v.live(t, nil) {
			ws = append(ws, Waiter{Position: len(ws) + 1, Key: t.key, Ticket: t.n, Order: t.order})
		}
	}
	forEach(len(ws), listConcurrency, func(i int) {
		obs, err := c.getTicket(ctx, ws[i].Key)
		if err != nil {
			ws[i].Err = err
			return
		}
		ws[i].Holder, ws[i].JoinedAt, ws[i].Metadata = obs.body.Holder, obs.body.JoinedAt, obs.body.Metadata
	})
	out := ws[:0]
	for _, w := range ws {
		var corrupt *corruptLeaseError
		switch {
		case w.Err == nil, errors.As(w.Err, &corrupt):
			w.Position = len(out) + 1
			out = append(out, w)
		case classify(w.Err) == failNotFound:
			// Served or left between the LIST and the GET.
		case ctx.Err() != nil:
			return nil, fmt.Errorf("s3lock: reading the line of lock %q in bucket %s: %w", name, c.bucket, ctx.Err())
		default:
			return nil, w.Err
		}
	}
	return out, nil
}

// ticketLive reports whether a ticket last written at lastModified is live at
// date, both by the store's clock: less than ticketValidity + serverSlack
// old. A store that says neither counts it as live.
func ticketLive(lastModified, date time.Time) bool {
	return date.IsZero() || lastModified.IsZero() || date.Sub(lastModified) < ticketValidity+serverSlack
}
