package s3lock

import (
	"context"
	"errors"
	"fmt"
)

// ForceRelease is an operator's unlock: it marks the epoch t names
// released, whoever holds it, so the next acquirer need not wait for the
// lease to lapse (t's Nonce, if any, plays no part). It acts only on that
// epoch's object (a compare-and-swap on the ETag it read, retried if the
// holder renews meanwhile), so it can never release a newer lease by
// mistake. Releasing an epoch that is already released is not an error; an
// epoch object that is not valid JSON is overwritten with a released lease.
// The holder of the epoch finds out at its next renewal; until then it may
// still believe it holds the lock, which is what fencing tokens are for.
// ctx bounds the requests (a GET and a PUT, repeated if the holder renews
// meanwhile).
//
// With t.Slot set it releases that slot's epoch of a slot lock (WithSlots).
// Without, the epoch of a slot lock's marker is refused with ErrHeld while
// any of its slots is held (one LIST and a GET per slot more): releasing it
// makes the lock free for a mutex or another number of slots (PROTOCOL.md
// §14).
func (c *Client) ForceRelease(ctx context.Context, t Token) error {
	if err := c.checkToken(t); err != nil {
		return err
	}
	if t.Share != "" {
		return c.forceReleaseShare(ctx, t)
	}
	return c.forceRelease(ctx, t.target(), t.Epoch)
}

// slotsFree refuses to force-release the marker m of the slot lock name
// while any of its slots is held (ErrHeld): a mutex's lease, or a marker with
// another n, could then be trusted beside the slots' holders (§14). The
// holders' slots are force-released first, one by one.
func (c *Client) slotsFree(ctx context.Context, name string, m *observed) error {
	holders, err := c.slotHolders(ctx, name, nil)
	if err != nil || len(holders) == 0 {
		return err
	}
	h := holders[0]
	return fmt.Errorf("%w: lock %q in bucket %s is a slot lock and %d of its %d slots are held (slot %d by %q, epoch %d): "+
		"its marker %s is force-released only once no slot is held; force-release the slots first (ForceRelease of a Token with its Slot, "+
		"s3lock force-release --slot), or wait until their holders release them", ErrHeld, name, c.bucket,
		len(holders), m.body.Slots, h.Slot, h.Holder, h.Epoch, m.key)
}

// forceRelease is ForceRelease of epoch of the lock (or slot) name.
func (c *Client) forceRelease(ctx context.Context, name string, epoch uint64) error {
	if err := validateEpoch(epoch); err != nil {
		return err
	}
	return c.forceReleaseKey(ctx, name, epochKey(name, epoch), epoch)
}

// forceReleaseKey marks the object at key (epoch of the lock name, or a
// share of it) released.
func (c *Client) forceReleaseKey(ctx context.Context, name, key string, epoch uint64) error {
	for range maxForceAttempts {
		var p payload
		etag := ""
		obs, err := c.getEpoch(ctx, key, epoch, "")
		var corrupt *corruptLeaseError
		switch {
		case classify(err) == failNotFound:
			return fmt.Errorf("%w: s3://%s/%s does not exist", ErrNoSuchEpoch, c.bucket, key)
		case errors.As(err, &corrupt) && corrupt.etag != "":
			etag = corrupt.etag
			p = payload{Format: formatVersion, Epoch: epoch, Reason: "replaced an unreadable lease object"}
		case err != nil:
			return err
		case obs.body.Released:
			return nil
		case obs.body.sharedEpoch():
			return invalid("s3://%s/%s is a shared epoch: it has no holder of its own, and stays open while it is the newest "+
				"epoch; force-release its shares instead (their tokens carry a share id; `s3lock status` lists them)", c.bucket, key)
		case obs.body.marker():
			if err := c.slotsFree(ctx, name, obs); err != nil {
				return err
			}
			etag, p = obs.etag, *obs.body
			p.Reason = "force-released: the lock is no longer a slot lock"
		default:
			etag, p = obs.etag, *obs.body
			p.Reason = "force-released"
		}
		p.asRead() // what was there stays there, escapes and all: evidence for whoever looks
		p.Renewals++
		p.Write = randomHex(8)
		p.Released = true
		p.ReleasedAt = c.cfg.clock.Now().UTC()
		p.ReleasedBy = c.cfg.holder
		body, err := p.encode()
		if err != nil {
			return err
		}
		_, err = c.putEpoch(ctx, key, etag, body)
		if err == nil {
			c.cfg.logger.Warn("s3lock: force-released", "bucket", c.bucket, "key", key, "epoch", epoch, "holder", p.Holder)
			return nil
		}
		switch classify(err) {
		case failPrecondition, failConflict, failTransient:
			// Renewed meanwhile, or unknown outcome: read again; a landed
			// release reads as released.
			continue
		default:
			return err
		}
	}
	return &opError{Op: "ForceRelease", Bucket: c.bucket, Key: key, Kind: ErrUnavailable,
		Err: errors.New("the epoch object kept changing; try again")}
}
