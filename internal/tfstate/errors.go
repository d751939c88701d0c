package tfstate

import (
	"fmt"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// StaleWriteError is a state write that was refused because its lease is
// not the lock's newest any more, or the state changed since its holder
// read it: nothing was written.
type StaleWriteError struct {
	Bucket, Key, Lock string
	Epoch             uint64 // the writer's
	Newer             uint64 // the epoch that sealed or wrote the state since (0: not known)
	Err               error  // the lease's end (ErrLeaseLost, ErrReleased) or the fence's *s3lock.FenceError
}

func (e *StaleWriteError) Error() string {
	who := "the lease is not the lock's newest any more"
	if e.Newer > e.Epoch {
		who = fmt.Sprintf("epoch %d, a newer lease, locked or wrote it since", e.Newer)
	}
	return fmt.Sprintf("the state s3://%s/%s was not written: this run's lease (epoch %d of lock %s) can no longer write it: %s: %v",
		e.Bucket, e.Key, e.Epoch, e.Lock, who, e.Err)
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
		now = fmt.Sprintf("it is held under lock ID %s by %s", LockID(e.Current.Epoch), e.Current.Holder)
	} else if e.Current.Epoch > 0 {
		now = fmt.Sprintf("its newest lease, lock ID %s, is %s", LockID(e.Current.Epoch), e.Current.Phase())
	}
	return fmt.Sprintf("lock ID %s is not the current lease of the state lock s3://%s/%s, so nothing was unlocked: %s",
		e.ID, e.Bucket, e.Lock, now)
}
