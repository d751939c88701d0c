package tfstate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

// ErrAbandoned is the end of a lease that the store left to lapse because
// Terraform went away (Config.Gone).
var ErrAbandoned = errors.New("the lease was left to lapse: Terraform, which started the provider, is gone")

// ErrLeaseRanOut is a lease whose trust deadline passed before a renewal
// got through.
var ErrLeaseRanOut = errors.New("the lease ran out")

// StaleWriteError is a state write that was refused: nothing was written
// (unless Fence says it may have been, see MayHaveWritten).
type StaleWriteError struct {
	Bucket, Key, Lock string
	Epoch             uint64 // the writer's
	// Err is why: the lease's end (ErrLeaseLost, ErrReleased,
	// ErrLeaseRanOut, ErrAbandoned) or the fence's refusal (a
	// *fence.Error, also in Fence).
	Err   error
	Fence *fence.Error
}

// Newer is the epoch that locked or wrote the state since, when the fence
// saw one (ErrFenced); 0 otherwise.
func (e *StaleWriteError) Newer() uint64 {
	if e.Fence != nil && errors.Is(e.Fence.Err, fence.ErrFenced) {
		return e.Fence.Current
	}
	return 0
}

// MayHaveWritten says that a PUT of this write went out before the state
// was found changed: it may have landed under the change.
func (e *StaleWriteError) MayHaveWritten() bool { return e.Fence != nil && e.Fence.MayHaveWritten }

// Reason says in words why the write was refused.
func (e *StaleWriteError) Reason() string {
	switch {
	case e.Newer() > 0:
		return fmt.Sprintf("epoch %d, a newer lease of the lock, sealed or wrote the state since (the fence refused "+
			"the write of epoch %d)", e.Newer(), e.Epoch)
	case e.Fence != nil && errors.Is(e.Fence.Err, fence.ErrObjectChanged):
		found := "it is gone (deleted)"
		if e.Fence.Found != "" {
			found = "someone else wrote it (a write without s3lock, or by hand)"
		}
		return fmt.Sprintf("the state changed since this run last read or wrote it: %s", found)
	case errors.Is(e.Err, ErrAbandoned), errors.Is(e.Err, ErrLeaseRanOut):
		return fmt.Sprintf("this run's lease (epoch %d) ended: %v", e.Epoch, e.Err)
	}
	return fmt.Sprintf("this run's lease (epoch %d) is no longer the lock's: %v", e.Epoch, e.Err)
}

func (e *StaleWriteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the state s3://%s/%s was not written: %s", e.Bucket, e.Key, e.Reason())
	if e.MayHaveWritten() {
		b.WriteString(" (an attempt of this write went out before that was seen: it may have landed before the change)")
	}
	return b.String()
}

func (e *StaleWriteError) Unwrap() error { return e.Err }

// ErrSharedLock is a write or delete of a state under this process's
// shared lock: a plan's, which never writes the state.
var ErrSharedLock = errors.New("the state is locked shared for a plan; a plan does not write the state")

// sharedRefusal is the refusal of a write of ws's state ("written", or
// "deleted") under this process's shared lock: nothing was sent.
func (s *Store) sharedRefusal(done, ws string) error {
	return fmt.Errorf("the state s3://%s/%s was not %s: %w (a shared lock of %s, which a %s takes, never writes; "+
		"an operation that writes takes the exclusive lock)", s.cfg.Bucket, s.Key(ws), done, ErrSharedLock, s.LockName(ws), OperationPlan)
}

// NotCurrentError is a force-unlock of an ID that is not the lock's
// current lease: nothing was released.
type NotCurrentError struct {
	Bucket, Lock, ID string
	Current          s3lock.State
}

func (e *NotCurrentError) Error() string {
	return fmt.Sprintf("lock ID %s is not the current lease of the state lock s3://%s/%s, so nothing was unlocked: %s",
		e.ID, e.Bucket, e.Lock, stateText(e.Current))
}

// SharedEpochError is a force-unlock of the plain epoch of a lock held
// shared (by plans): the epoch has no holder of its own; each plan's share
// has a lock ID of its own (EPOCH.SHARE), and nothing was unlocked.
type SharedEpochError struct {
	Bucket, Lock, ID string
	Current          s3lock.State
}

func (e *SharedEpochError) Error() string {
	return fmt.Sprintf("lock ID %s is the shared epoch of the state lock s3://%s/%s, so nothing was unlocked: %s; "+
		"force-unlock one plan's lock by its own lock ID", e.ID, e.Bucket, e.Lock, stateText(e.Current))
}

// maxSharesListed bounds the shares a message lists by lock ID.
const maxSharesListed = 5

// stateText says how a state's lock stands, for an error: who holds it
// under which lock ID — each plan's, when plans hold it shared.
func stateText(cur s3lock.State) string {
	switch {
	case cur.Shared && cur.Phase() == s3lock.PhaseHeld:
		return "it is held shared by " + sharesText(cur.Holders)
	case cur.Pending:
		return fmt.Sprintf("it is held under lock ID %s by %s, an exclusive run that waits for %s", LockID(cur.Epoch),
			Printable(cur.Holder), sharesText(cur.Holders))
	case cur.Phase() == s3lock.PhaseHeld:
		return fmt.Sprintf("it is held under lock ID %s by %s", LockID(cur.Epoch), Printable(cur.Holder))
	case cur.Epoch > 0:
		return fmt.Sprintf("its newest lease, lock ID %s, is %s", LockID(cur.Epoch), cur.Phase())
	}
	return "it is free"
}

// sharesText lists shared holders: how many, and the lock IDs and holders
// of the first maxSharesListed.
func sharesText(holders []s3lock.State) string {
	if len(holders) == 0 {
		return "no plan any more"
	}
	n := fmt.Sprintf("%d plan(s)", len(holders))
	var ids []string
	for i, h := range holders {
		if i == maxSharesListed {
			ids = append(ids, fmt.Sprintf("and %d more", len(holders)-i))
			break
		}
		ids = append(ids, fmt.Sprintf("lock ID %s by %s", ShareLockID(h.Epoch, h.Share), Printable(h.Holder)))
	}
	return n + " (" + strings.Join(ids, "; ") + ")"
}

// heldOf is the *s3lock.HeldError of a lock in bucket that Current read
// held (cur; now is the store's clock): for a lock held shared, one of its
// shares.
func heldOf(bucket string, cur s3lock.State, now time.Time) *s3lock.HeldError {
	who := cur
	held := &s3lock.HeldError{Bucket: bucket, Pending: cur.Pending}
	if cur.Shared && len(cur.Holders) > 0 {
		who = cur.Holders[0]
		held.Shared, held.Waiting, held.Share = true, len(cur.Holders), who.Share
	}
	held.Name, held.Key, held.Epoch, held.Holder, held.AcquiredAt, held.Metadata = cur.Name, who.Key, who.Epoch, who.Holder,
		who.AcquiredAt, who.Metadata
	held.ExpiresIn = max(who.ExpiresAt.Sub(now), 0)
	return held
}
