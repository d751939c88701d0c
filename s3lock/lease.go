package s3lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lock: one epoch of it. Its epoch is the fencing token.
// Unless acquired WithoutAutoRenew, it renews itself in the background until
// Release or Detach, or until it is lost; Done is closed when it ends.
//
// A Lease is safe for concurrent use.
type Lease struct {
	c        *Client
	name     string
	key      string
	epoch    uint64
	nonce    string
	validity time.Duration
	renewInt time.Duration
	auto     bool

	writeMu sync.Mutex // serializes Renew and Release writes

	mu         sync.Mutex
	etag       string
	p          payload
	trustUntil time.Time // client clock; the lease is not trusted from then on
	ended      error     // nil while active; ErrReleased or a *LeaseLostError
	detached   bool

	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	bg       sync.WaitGroup
}

// newLease returns an active lease whose last confirmed write was sent at
// sent (client clock) and whose trust window is trustUntil.
func (c *Client) newLease(name string, epoch uint64, p payload, etag string, trustUntil time.Time, renewInt time.Duration, auto bool) *Lease {
	return &Lease{
		c:          c,
		name:       name,
		key:        Key(name, epoch),
		epoch:      epoch,
		nonce:      p.Nonce,
		validity:   p.validity(),
		renewInt:   renewInt,
		auto:       auto,
		etag:       etag,
		p:          p,
		trustUntil: trustUntil,
		done:       make(chan struct{}),
		stop:       make(chan struct{}),
	}
}

// Epoch returns the lease's epoch: the fencing token. Epochs of a lock only
// grow; pass it to whatever the lock protects (see FencedPut).
func (l *Lease) Epoch() uint64 { return l.epoch }

// Name returns the lock name.
func (l *Lease) Name() string { return l.name }

// Key returns the key of the lease's epoch object.
func (l *Lease) Key() string { return l.key }

// Bucket returns the bucket of the lock.
func (l *Lease) Bucket() string { return l.c.bucket }

// Holder returns the identity written into the lease.
func (l *Lease) Holder() string { return l.p.LeaderID }

// Duration returns how long the lease stays valid after each renewal.
func (l *Lease) Duration() time.Duration { return l.validity }

// Metadata returns a copy of the lease's metadata.
func (l *Lease) Metadata() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.p.Metadata))
	for k, v := range l.p.Metadata {
		out[k] = v
	}
	return out
}

// AcquiredAt returns when the lease was acquired, by the client's clock.
func (l *Lease) AcquiredAt() time.Time { return l.p.AcquiredAt }

// ExpiresAt returns when the holder stops trusting the lease unless it is
// renewed, by the client's clock. It is earlier, by a safety margin, than
// the moment anyone else could judge the lease lapsed.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trustUntil
}

// Done returns a channel that is closed when the lease ends: released, or
// lost. Err says which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is active, ErrReleased after Release, and
// a *LeaseLostError (matching ErrLeaseLost) if it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// Token returns what another process needs to take the lease over with
// Resume.
func (l *Lease) Token() Token {
	return Token{Bucket: l.c.bucket, Name: l.name, Epoch: l.epoch, Nonce: l.nonce}
}

// end records why the lease ended and closes Done, once.
func (l *Lease) end(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return l.ended
	}
	l.ended = err
	close(l.done)
	l.stopOnce.Do(func() { close(l.stop) })
	return err
}

func (l *Lease) lost(reason string, cause error) error {
	err := l.end(&LeaseLostError{Bucket: l.c.bucket, Key: l.key, Epoch: l.epoch, Reason: reason, Err: cause})
	if errors.Is(err, ErrLeaseLost) {
		l.c.cfg.logger.Warn("s3lock: lease lost", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch, "err", err)
	}
	return err
}

// Renew extends the lease by its duration, counted from just before the
// renewal was sent. It fails with a *LeaseLostError if the lease can no
// longer be trusted (it lapsed, or its epoch object was changed by someone
// else), and with other errors (which leave the lease active until it
// expires) when the store could not be reached. If ctx ends first, Renew
// returns ctx's error; a renewal that may have reached the store is checked
// by reading the object back.
func (l *Lease) Renew(ctx context.Context) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	now := l.c.cfg.clock.Now()
	l.mu.Lock()
	next, etag, trustUntil := l.p, l.etag, l.trustUntil
	l.mu.Unlock()
	if !now.Before(trustUntil) {
		return l.lost("it expired before it could be renewed", nil)
	}
	next.Renewals++
	next.RenewedAt = now.UTC()
	// A renewal only counts if it is confirmed before the lease stops being
	// trusted: after that, someone may already hold the next epoch.
	wctx, cancel := context.WithTimeout(ctx, trustUntil.Sub(now))
	defer cancel()
	newEtag, sent, err := l.write(wctx, etag, &next)
	if err != nil {
		if !l.c.cfg.clock.Now().Before(trustUntil) && !errors.Is(err, ErrLeaseLost) {
			return l.lost("it expired while the renewal was failing", err)
		}
		return err
	}
	if !l.c.cfg.clock.Now().Before(trustUntil) {
		return l.lost("the renewal was confirmed only after the lease expired", nil)
	}
	l.mu.Lock()
	l.etag, l.p = newEtag, next
	l.trustUntil = sent.Add(l.validity - safetyMargin(l.validity))
	l.mu.Unlock()
	l.c.cfg.logger.Debug("s3lock: renewed", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch, "renewals", next.Renewals)
	return nil
}

// Release ends the lease and frees the lock for the next acquirer with one
// conditional write on the lease's own epoch object. Releasing twice is not
// an error. If the lease was already lost, Release writes nothing and returns
// the *LeaseLostError, so the caller learns that its work may not have been
// exclusive. If ctx ends before the release is confirmed, the lease is left
// to expire.
func (l *Lease) Release(ctx context.Context) error {
	l.stopBackground()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Err(); err != nil {
		if errors.Is(err, ErrReleased) {
			return nil
		}
		return err
	}
	now := l.c.cfg.clock.Now()
	l.mu.Lock()
	next, etag, trustUntil := l.p, l.etag, l.trustUntil
	l.mu.Unlock()
	if !now.Before(trustUntil) {
		return l.lost("it expired before it was released", nil)
	}
	next.Renewals++
	next.Expired = true
	next.ReleasedAt = now.UTC()
	if _, _, err := l.write(ctx, etag, &next); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("s3lock: releasing s3://%s/%s (epoch %d): %w", l.c.bucket, l.key, l.epoch, err)
	}
	l.mu.Lock()
	l.p = next
	l.mu.Unlock()
	l.c.cfg.logger.Info("s3lock: released", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch)
	_ = l.end(ErrReleased)
	return nil
}

// Detach stops the background renewal without releasing: the lease stays
// held in the store until it expires or someone resumes it with its Token
// and releases it. Use it to hand a lease to another process.
func (l *Lease) Detach() Token {
	l.mu.Lock()
	l.detached = true
	l.mu.Unlock()
	l.stopBackground()
	return l.Token()
}

// write replaces the lease's epoch object (compare-and-swap on etag) with
// next. When the outcome is unknown (a timeout, a 5xx, a reset connection,
// or a 412 that may answer the SDK's retry of our own committed write) it
// reads the object back and compares the nonce and the renewal counter. It
// returns the new ETag and the time the first attempt was sent.
func (l *Lease) write(ctx context.Context, etag string, next *payload) (string, time.Time, error) {
	body, err := next.encode()
	if err != nil {
		return "", time.Time{}, err
	}
	sent := l.c.cfg.clock.Now()
	var bo backoff
	bo.base, bo.max = 20*time.Millisecond, time.Second
	for {
		newEtag, err := l.c.putEpoch(ctx, l.key, etag, body)
		if err == nil {
			return newEtag, sent, nil
		}
		f := classify(err)
		switch f {
		case failAccessDenied, failNoSuchBucket, failOther, failUnsupported:
			return "", sent, err
		case failNotFound:
			return "", sent, l.lost("its epoch object was deleted", err)
		}
		// Unknown outcome: read back (with a context that outlives a
		// cancelled caller, so that a committed write is not missed).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.cfg.requestTimeout)
		obs, rerr := l.c.getEpoch(rctx, l.key, l.epoch, "")
		cancel()
		switch {
		case rerr == nil && obs.body.Nonce != l.nonce:
			return "", sent, l.lost("its epoch object now belongs to "+obs.body.LeaderID, err)
		case rerr == nil && obs.body.Renewals == next.Renewals && obs.body.Expired == next.Expired:
			return obs.etag, sent, nil // our write landed
		case rerr == nil && obs.etag == etag:
			// Our write did not land; the object is as we left it: retry.
		case rerr == nil && obs.body.Expired:
			by := obs.body.ReleasedBy
			if by == "" {
				by = "another client"
			}
			return "", sent, l.lost("it was force-released by "+by, err)
		case rerr == nil:
			return "", sent, l.lost("its epoch object was changed by someone else", err)
		case classify(rerr) == failNotFound:
			return "", sent, l.lost("its epoch object was deleted", err)
		}
		if ctx.Err() != nil {
			return "", sent, errors.Join(ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
			return "", sent, errors.Join(ctx.Err(), err)
		case <-l.c.cfg.clock.After(bo.next()):
		}
	}
}

// startBackground starts the goroutine that deletes old epochs (when the
// acquisition found some due) and then renews the lease, or, without
// automatic renewal, marks it lost when it expires.
func (l *Lease) startBackground(cleanup func(context.Context)) {
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if cleanup != nil {
			// The cleanup runs to completion (bounded by its own timeout)
			// even if the lease is released meanwhile: it is this lease's
			// share of keeping the lock's history short.
			cctx, cancel := context.WithTimeout(context.Background(), 2*l.c.cfg.requestTimeout)
			cleanup(cctx)
			cancel()
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-l.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		l.keepAlive(ctx)
	}()
}

func (l *Lease) stopBackground() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.bg.Wait()
}

func (l *Lease) keepAlive(ctx context.Context) {
	clk := l.c.cfg.clock
	var bo backoff
	bo.base, bo.max = 50*time.Millisecond, max(l.renewInt/4, 100*time.Millisecond)
	wait := l.renewInt
	for {
		untilExpiry := l.ExpiresAt().Sub(clk.Now())
		if !l.auto {
			wait = untilExpiry
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(max(0, min(wait, untilExpiry))):
		}
		if !clk.Now().Before(l.ExpiresAt()) {
			reason := "it expired without being renewed"
			if l.auto {
				reason = "renewals kept failing until it expired"
			}
			_ = l.lost(reason, nil)
			return
		}
		if !l.auto {
			continue
		}
		err := l.Renew(ctx)
		switch {
		case err == nil:
			bo.reset()
			wait = l.renewInt
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrReleased):
			return
		default:
			if ctx.Err() != nil {
				return
			}
			l.c.cfg.logger.Warn("s3lock: renewal failed; retrying", "bucket", l.c.bucket, "key", l.key,
				"epoch", l.epoch, "left", l.ExpiresAt().Sub(clk.Now()), "err", err)
			wait = bo.next()
		}
	}
}
