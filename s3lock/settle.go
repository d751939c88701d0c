package s3lock

import (
	"context"
	"time"
)

// This file is the one home of a conditional write whose answer may be lost
// (PROTOCOL.md §10): an epoch object's create, renewal and release, and a
// line ticket's create and heartbeat are each one condWrite, settled by
// settle. Like etcd's concurrency.Mutex, whose one transaction says whether
// its condition held and what is there, settle says what became of the
// write; S3 has no such transaction, so an answer that settles nothing is
// read back. What to do next (retry, give up, end a lease) is the caller's.

// condWrite is one conditional write: body at key, if the object is etag
// (If-Match), or if there is none when etag is "" (If-None-Match: *).
type condWrite struct {
	key, etag string
	body      []byte
	// nonce and write are body's stamps: the writer's (one per lease or
	// ticket) and this write's own (one per write). A read-back tells whose
	// write it found by them.
	nonce, write string
	// earlier are the writer's writes given up with their outcome unknown.
	earlier unsettled
	// until bounds the read-back besides the request timeout (zero: no
	// bound): past it, the outcome no longer decides anything.
	until time.Time
	// answered, if set, is told the write's error as soon as the store
	// answered (or failed to) while ctx was live, before any read-back: a
	// lease keeps it as the cause should its deadline pass meanwhile.
	answered func(error)
}

// stamped is an object as a read-back found it: an epoch object or a
// ticket.
type stamped interface {
	stamps() (etag, nonce, write string)
}

// verdict is what became of a conditional write.
type verdict int

const (
	// landed: the write is the object (the store said so, or a read-back
	// found its write id).
	landed verdict = iota
	// refused: the store refused the write outright; it did not happen and
	// will not if sent again as is.
	refused
	// absent: there is no object (the answer to an If-Match write, or a
	// read-back: a create has not landed, yet).
	absent
	// unchanged: a read-back found the object the condition named: the
	// write did not land, yet.
	unchanged
	// landedEarlier: a read-back found one of the writer's earlier writes,
	// given up unsettled, that landed since.
	landedEarlier
	// other: a read-back found a write that is not this writer's (or is, by
	// its nonce, but not one it knows of).
	other
	// unknown: the read-back failed too: the write may still land.
	unknown
)

// settled is the outcome of a conditional write.
type settled[O stamped] struct {
	verdict verdict
	// etag is the object's ETag: the write's, when it landed, or the one a
	// read-back found.
	etag string
	// found is what the read-back found (nil without one).
	found O
	// err is the write's error, unless it landed at once; readErr the
	// read-back's, if it failed.
	err, readErr error
}

// settle makes the conditional write w once and says what became of it. An
// answer that settles nothing — a timeout, a reset connection, a 5xx, a
// 409, or a 412 that may answer the SDK's retry of our own committed write
// — is resolved by reading the key back with read, in a context that
// survives ctx's end for one request timeout (never past w.until): the
// caller's cancellation must not leave the outcome unknown.
func settle[O stamped](ctx context.Context, c *Client, w condWrite, read func(context.Context, string) (O, error)) settled[O] {
	etag, err := c.putEpoch(ctx, w.key, w.etag, w.body)
	if err == nil {
		return settled[O]{verdict: landed, etag: etag}
	}
	s := settled[O]{err: err}
	if w.answered != nil && ctx.Err() == nil {
		w.answered(err)
	}
	switch f := classify(err); {
	case f == failNotFound && w.etag != "":
		s.verdict = absent
		return s
	case f.refused() || f == failNotFound:
		s.verdict = refused
		return s
	}
	timeout := c.cfg.requestTimeout
	if !w.until.IsZero() {
		timeout = min(timeout, w.until.Sub(c.cfg.clock.Now()))
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	found, rerr := read(rctx, w.key)
	cancel()
	if rerr != nil {
		s.verdict, s.readErr = unknown, rerr
		if classify(rerr) == failNotFound {
			s.verdict = absent
		}
		return s
	}
	etag, nonce, write := found.stamps()
	s.found, s.etag = found, etag
	switch {
	case write == w.write:
		s.verdict = landed
	case w.etag != "" && etag == w.etag:
		s.verdict = unchanged
	case nonce == w.nonce && w.earlier.has(write):
		s.verdict = landedEarlier
	default:
		s.verdict = other
	}
	return s
}

// settleCreate settles a create (w.etag is ""): while read-backs find the
// key absent it writes again, the same body, so that a late arrival of an
// earlier attempt is recognised as its own; at most tries writes, paced by
// backoff, and none after ctx ended. Its verdict is absent when it gave up.
func settleCreate[O stamped](ctx context.Context, c *Client, w condWrite, tries int,
	read func(context.Context, string) (O, error)) settled[O] {
	bo := newBackoff(createRetryBase, createRetryMax)
	for try := 1; ; try++ {
		s := settle(ctx, c, w, read)
		if s.verdict != absent || ctx.Err() != nil || try >= tries {
			return s
		}
		select {
		case <-ctx.Done():
		case <-c.cfg.clock.After(bo.next()):
		}
	}
}

// unsettled holds a writer's writes given up with their outcome unknown, by
// write id, with when each was sent: such a write may still land, and a
// read-back that finds it must take it for the writer's own, not someone
// else's.
type unsettled map[string]time.Time

// add notes a write whose outcome stays unknown.
func (u *unsettled) add(write string, sent time.Time) {
	if *u == nil {
		*u = unsettled{}
	}
	(*u)[write] = sent
}

// has reports whether write is one of u.
func (u unsettled) has(write string) bool {
	_, ok := u[write]
	return ok
}

func (o *observed) stamps() (etag, nonce, write string) { return o.etag, o.body.Nonce, o.body.Write }

func (o *ticketObs) stamps() (etag, nonce, write string) { return o.etag, o.body.Nonce, o.body.Write }

// epochReader reads an epoch object of epoch back, for settle.
func (c *Client) epochReader(epoch uint64) func(context.Context, string) (*observed, error) {
	return func(ctx context.Context, key string) (*observed, error) { return c.getEpoch(ctx, key, epoch, "") }
}
