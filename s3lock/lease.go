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
	c          *Client
	name       string
	key        string
	epoch      uint64
	nonce      string
	holder     string
	acquiredAt time.Time
	validity   time.Duration
	renewInt   time.Duration
	auto       bool

	writeMu sync.Mutex // serializes Renew and Release writes

	mu sync.Mutex
	// etag and p are the epoch object as this handle last wrote (or read) it.
	etag string
	p    payload
	// trustFrom and trustUntil bound the window in which the lease is
	// trusted, by the client clock: trustFrom is when the last confirmed
	// write was sent.
	trustFrom, trustUntil time.Time
	ended                 error // nil while active; ErrReleased or a *LeaseLostError

	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	bg       sync.WaitGroup
}

// newLease returns an active lease whose last confirmed write was sent at
// trustFrom (client clock) and that is trusted until trustUntil.
func (c *Client) newLease(name string, epoch uint64, p payload, etag string, trustFrom, trustUntil time.Time, renewInt time.Duration, auto bool) *Lease {
	return &Lease{
		c:          c,
		name:       name,
		key:        Key(name, epoch),
		epoch:      epoch,
		nonce:      p.Nonce,
		holder:     p.LeaderID,
		acquiredAt: p.AcquiredAt,
		validity:   p.validity(),
		renewInt:   renewInt,
		auto:       auto,
		etag:       etag,
		p:          p,
		trustFrom:  trustFrom,
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
func (l *Lease) Holder() string { return l.holder }

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

// AcquiredAt returns when the lease was acquired, by the acquirer's clock.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

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

// untrusted returns why the lease may not be trusted at now (client clock),
// or "" while it may be: its window ended, or the wall clock ran ahead of the
// monotonic clock by more than the safety margin, which is what a suspended
// host looks like (the monotonic clock stops during suspend; the store's does
// not).
func (l *Lease) untrusted(now time.Time) string {
	l.mu.Lock()
	from, until := l.trustFrom, l.trustUntil
	l.mu.Unlock()
	if !now.Before(until) {
		return "it expired"
	}
	wall, mono := now.Round(0).Sub(from.Round(0)), now.Sub(from)
	if wall-mono > safetyMargin(l.validity) {
		return fmt.Sprintf("the host's wall clock advanced %s more than its monotonic clock (suspended?)", wall-mono)
	}
	return ""
}

// Renew extends the lease by its duration, counted from just before the
// renewal was sent. It fails with a *LeaseLostError if the lease can no
// longer be trusted (it lapsed, or its epoch object was changed by someone
// else), and with other errors (which leave the lease active until it
// expires) when the store could not be reached. Renew gives up when the
// lease would stop being trusted, or when ctx ends (returning ctx's error);
// a renewal that may have reached the store is checked by reading the
// object back.
func (l *Lease) Renew(ctx context.Context) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	clk := l.c.cfg.clock
	now := clk.Now()
	if why := l.untrusted(now); why != "" {
		return l.lost(why+" before it could be renewed", nil)
	}
	l.mu.Lock()
	next, etag, until := l.p, l.etag, l.trustUntil
	l.mu.Unlock()
	next.Renewals++
	next.RenewedAt = now.UTC()
	// A renewal only counts if it is confirmed while the lease is still
	// trusted: after that, someone may already hold the next epoch.
	wctx, cancel := context.WithTimeout(ctx, until.Sub(now))
	defer cancel()
	newEtag, sent, err := l.write(wctx, etag, &next)
	if err != nil {
		if why := l.untrusted(clk.Now()); why != "" && !errors.Is(err, ErrLeaseLost) {
			return l.lost(why+" while the renewal was failing", err)
		}
		return err
	}
	if why := l.untrusted(clk.Now()); why != "" {
		return l.lost(why+" before the renewal was confirmed", nil)
	}
	l.mu.Lock()
	l.etag, l.p = newEtag, next
	l.trustFrom, l.trustUntil = sent, sent.Add(l.validity-safetyMargin(l.validity))
	l.mu.Unlock()
	l.c.cfg.logger.Debug("s3lock: renewed", "bucket", l.c.bucket, "key", l.key, "epoch", l.epoch, "renewals", next.Renewals)
	return nil
}

// Release ends the lease and frees the lock for the next acquirer with one
// conditional write on the lease's own epoch object. Releasing twice is not
// an error. If the lease was already lost, Release writes nothing and returns
// the *LeaseLostError, so the caller learns that its work may not have been
// exclusive; if the lease stops being trusted before the release is
// confirmed, Release returns a *LeaseLostError too (the lease lapses anyway).
// If ctx ends first, Release returns ctx's error and the lease lapses.
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
	if why := l.untrusted(now); why != "" {
		return l.lost(why+" before it was released", nil)
	}
	l.mu.Lock()
	next, etag, until := l.p, l.etag, l.trustUntil
	l.mu.Unlock()
	next.Renewals++
	next.Expired = true
	next.ReleasedAt = now.UTC()
	wctx, cancel := context.WithTimeout(ctx, until.Sub(now))
	defer cancel()
	if _, _, err := l.write(wctx, etag, &next); err != nil {
		switch {
		case errors.Is(err, ErrLeaseLost):
			return err
		case l.untrusted(l.c.cfg.clock.Now()) != "" && ctx.Err() == nil:
			return l.lost("it expired before the release was confirmed; it lapses on its own", err)
		}
		return err
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
// and releases it. Use it to hand a lease to another process; do not use
// this handle afterwards.
func (l *Lease) Detach() Token {
	l.stopBackground()
	return l.Token()
}

// write replaces the lease's epoch object (compare-and-swap on etag) with
// next, which it stamps with a fresh write id. When the outcome is unknown (a
// timeout, a 5xx, a reset connection, or a 412 that may answer the SDK's
// retry of our own committed write) it reads the object back: our write id
// means it landed; the ETag we hold means it did not (retry); anything else
// means someone else wrote the object and the lease is lost. It returns the
// new ETag and the time the first attempt was sent.
func (l *Lease) write(ctx context.Context, etag string, next *payload) (string, time.Time, error) {
	next.Write = randomHex(8)
	body, err := next.encode()
	if err != nil {
		return "", time.Time{}, err
	}
	sent := l.c.cfg.clock.Now()
	var bo backoff
	// Retry often enough to get through before the lease stops being
	// trusted once the store answers again.
	bo.base, bo.max = 20*time.Millisecond, max(50*time.Millisecond, min(time.Second, l.renewInt/8))
	for {
		newEtag, err := l.c.putEpoch(ctx, l.key, etag, body)
		if err == nil {
			return newEtag, sent, nil
		}
		switch f := classify(err); {
		case f.refused():
			return "", sent, err
		case f == failNotFound:
			return "", sent, l.lost("its epoch object was deleted", err)
		}
		rctx, cancel := l.c.detached(ctx)
		obs, rerr := l.c.getEpoch(rctx, l.key, l.epoch, "")
		cancel()
		switch {
		case rerr == nil && obs.body.Write == next.Write:
			return obs.etag, sent, nil // our write landed
		case rerr == nil && obs.etag == etag:
			// Our write did not land; the object is as we left it: retry.
		case rerr == nil && obs.body.Nonce != l.nonce:
			return "", sent, l.lost("its epoch object now belongs to "+obs.body.LeaderID, err)
		case rerr == nil && obs.body.Expired && obs.body.ReleasedBy != "":
			return "", sent, l.lost("it was force-released by "+obs.body.ReleasedBy, err)
		case rerr == nil:
			return "", sent, l.lost("its epoch object was written by another handle (a Resume or Adopt of it)", err)
		case classify(rerr) == failNotFound:
			return "", sent, l.lost("its epoch object was deleted", err)
		}
		select {
		case <-ctx.Done():
			return "", sent, errors.Join(ctx.Err(), err)
		case <-l.c.cfg.clock.After(bo.next()):
		}
	}
}

// startBackground starts the goroutine that renews the lease, or, without
// automatic renewal, marks it lost when it expires.
func (l *Lease) startBackground() {
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
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
	var lastErr error
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
		if why := l.untrusted(clk.Now()); why != "" {
			if l.auto {
				why += " while renewals were failing"
			} else {
				why += " without being renewed"
			}
			_ = l.lost(why, lastErr)
			return
		}
		if !l.auto {
			continue
		}
		err := l.Renew(ctx)
		switch {
		case err == nil:
			bo.reset()
			wait, lastErr = l.renewInt, nil
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrReleased):
			return
		default:
			if ctx.Err() != nil {
				return
			}
			lastErr = err
			l.c.cfg.logger.Warn("s3lock: renewal failed; retrying", "bucket", l.c.bucket, "key", l.key,
				"epoch", l.epoch, "left", l.ExpiresAt().Sub(clk.Now()), "err", err)
			wait = bo.next()
		}
	}
}
