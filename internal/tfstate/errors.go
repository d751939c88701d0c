package tfstate

import (
	"errors"
	"fmt"
	"strings"

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

// NotCurrentError is a force-unlock of an ID that is not the lock's
// current lease: nothing was released.
type NotCurrentError struct {
	Bucket, Lock, ID string
	Current          s3lock.State
}

func (e *NotCurrentError) Error() string {
	now := "it is free"
	if e.Current.Phase() == s3lock.PhaseHeld {
		now = fmt.Sprintf("it is held under lock ID %s by %s", LockID(e.Current.Epoch), Printable(e.Current.Holder))
	} else if e.Current.Epoch > 0 {
		now = fmt.Sprintf("its newest lease, lock ID %s, is %s", LockID(e.Current.Epoch), e.Current.Phase())
	}
	return fmt.Sprintf("lock ID %s is not the current lease of the state lock s3://%s/%s, so nothing was unlocked: %s",
		e.ID, e.Bucket, e.Lock, now)
}
