package s3lock

import (
	"context"
	"time"
)

// cleanupFor returns the work that keeps a lock's history bounded after
// epoch newest was created, or nil when none is due. page is the first LIST
// page the acquisition read.
//
// An epoch is deleted only when it is older than the retained history AND
// its successor is at least cleanupAge old by the store's clock: a contender
// that read the lock before the successor existed, and whose create of the
// successor's key could therefore land after the deletion, is bound by
// attemptWindow to look again before trusting its lease (PROTOCOL.md §7,
// "History cleanup").
func (c *Client) cleanupFor(name string, newest uint64, page *listed) func(context.Context) {
	if page == nil {
		return nil
	}
	if page.truncated {
		return func(ctx context.Context) { c.sweep(ctx, name, newest) }
	}
	keys := deletable(page.epochs, nil, newest, c.cfg.history, page.date)
	// Deleting in batches of at least `history` keys costs one DeleteObjects
	// per `history` acquisitions.
	if len(keys) < c.cfg.history {
		return nil
	}
	return func(ctx context.Context) { _ = c.deleteHistory(ctx, name, keys) }
}

// startCleanup runs work (if any) in the background, apart from the lease it
// belongs to: a slow store must not delay renewals or releases. It is bounded
// by two request timeouts.
func (c *Client) startCleanup(work func(context.Context)) {
	if work == nil {
		return
	}
	c.cleanups.Add(1)
	go func() {
		defer c.cleanups.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.cfg.requestTimeout)
		defer cancel()
		work(ctx)
	}()
}

// deletable returns the keys of epochs (ascending) that may be deleted.
// after is the first epoch following the slice, if the caller knows it.
func deletable(epochs []listedEpoch, after *listedEpoch, newest uint64, history int, date time.Time) []string {
	if date.IsZero() {
		return nil // the store did not say what time it is: never delete
	}
	var keys []string
	for i, e := range epochs {
		if e.epoch+uint64(history) > newest {
			break
		}
		var succ listedEpoch
		switch {
		case i+1 < len(epochs):
			succ = epochs[i+1]
		case after != nil:
			succ = *after
		default:
			continue
		}
		if date.Sub(succ.lastModified) >= cleanupAge {
			keys = append(keys, e.key)
		}
	}
	return keys
}

// sweep pages through a lock's whole history and deletes what may go: the
// way back to one-page listings after history piled up.
func (c *Client) sweep(ctx context.Context, name string, newest uint64) {
	var pending []listedEpoch
	var date time.Time
	lister := epochLister{c: c, name: name}
	err := lister.each(ctx, "", func(l *listed) (bool, error) {
		if date.IsZero() || (!l.date.IsZero() && l.date.Before(date)) {
			date = l.date // the earliest answer's clock: conservative
		}
		pending = append(pending, l.epochs...)
		if len(pending) > 1 {
			last := pending[len(pending)-1]
			keys := deletable(pending[:len(pending)-1], &last, newest, c.cfg.history, date)
			if len(keys) > 0 {
				if err := c.deleteHistory(ctx, name, keys); err != nil {
					return true, err // a later holder will retry
				}
			}
			pending = pending[len(pending)-1:]
		}
		return false, nil
	})
	if err != nil {
		c.cfg.logger.Debug("s3lock: history sweep stopped", "bucket", c.bucket, "lock", name, "err", err)
	}
}

func (c *Client) deleteHistory(ctx context.Context, name string, keys []string) error {
	err := c.deleteKeys(ctx, keys)
	if err != nil {
		c.cfg.logger.Debug("s3lock: deleting old epochs failed; a later holder will retry",
			"bucket", c.bucket, "lock", name, "err", err)
		return err
	}
	c.cfg.logger.Debug("s3lock: deleted old epochs", "bucket", c.bucket, "lock", name,
		"count", len(keys), "first", keys[0], "last", keys[len(keys)-1])
	return nil
}
