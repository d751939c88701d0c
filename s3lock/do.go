package s3lock

import (
	"context"
	"errors"
)

// Do acquires the lock name (waiting as Acquire does), runs fn with a context
// that is cancelled if the lease is lost, and releases the lease when fn
// returns. fn receives the lease for its epoch (the fencing token). Do
// returns fn's error joined with any error from losing or releasing the
// lease; if the lease was lost while fn ran, the result matches ErrLeaseLost
// even when fn succeeded, because its work may not have been exclusive. The
// lease is released even if fn panics. ctx bounds the wait for the lock and
// is the parent of fn's context.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, lease *Lease) error, opts ...Option) (err error) {
	if fn == nil {
		return invalid("Do needs a function to run")
	}
	lease, err := c.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lease.Done():
			cancel(lease.Err())
		case <-fctx.Done():
		}
	}()
	// Release even if fn panics; a lease lost meanwhile makes Release
	// return the *LeaseLostError.
	defer func() {
		rctx, rcancel := c.detached(ctx)
		defer rcancel()
		err = errors.Join(err, lease.Release(rctx))
	}()
	return fn(fctx, lease)
}
