package s3lock

import (
	"errors"
	"fmt"
	"time"
)

// Observer hears what a Client does (WithObserver), for metrics, traces or a
// summary: each acquisition and how long it waited, each renewal and failed
// renewal, each lease lost or released, and each S3 request with its
// outcome. Observe is called synchronously by the goroutine doing the work
// (sometimes while a Lease holds its internal locks), from several goroutines
// at once: it must be safe for concurrent use, quick, and must call neither
// the Client nor its Leases (hand the event to another goroutine to act on
// it). The package s3lockotel adapts it to
// OpenTelemetry.
type Observer interface {
	Observe(Event)
}

// ObserverFunc is an Observer that is a function.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event. New kinds may be added; observers should ignore kinds
// they do not know.
const (
	// EventAcquired: an acquisition succeeded (Epoch, Key; Wait is how long
	// Acquire took, 0 for TryAcquire). A lease taken over with Resume or
	// Adopt is no acquisition: its release or loss is reported all the same,
	// so releases and losses can outnumber acquisitions.
	EventAcquired EventKind = iota + 1
	// EventAcquireFailed: an Acquire or TryAcquire whose arguments were
	// accepted returned an error (Err; Wait). A held lock for TryAcquire, a
	// wait that timed out or was cancelled, a superseded waiter and a
	// failing store all count.
	EventAcquireFailed
	// EventRenewed: a renewal was confirmed.
	EventRenewed
	// EventRenewFailed: one attempt of a renewal failed (Err: a 5xx, a
	// timeout, a refusal) without the lease being lost by it; a renewal
	// retries while the lease is trusted, so one renewal can fail several
	// times before it is confirmed (EventRenewed) or the lease is lost.
	EventRenewFailed
	// EventLost: the lease ended without this handle releasing it (Err is
	// the *LeaseLostError, Reason its reason).
	EventLost
	// EventReleased: the lease was released through this handle.
	EventReleased
	// EventRequest: one S3 request (Op, Outcome, Duration, Key).
	EventRequest
)

// String returns the kind's name: "acquired", "acquire-failed", "renewed",
// "renew-failed", "lost", "released" or "request".
func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventAcquireFailed:
		return "acquire-failed"
	case EventRenewed:
		return "renewed"
	case EventRenewFailed:
		return "renew-failed"
	case EventLost:
		return "lost"
	case EventReleased:
		return "released"
	case EventRequest:
		return "request"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one thing a Client did. Which fields are set depends on Kind.
type Event struct {
	Kind   EventKind
	Bucket string
	Lock   string // the lock's name ("" for requests: see Key)
	Key    string // the object concerned
	Epoch  uint64
	// Slot is the slot of a slot lock's lease (Slots), from 1; 0 for a
	// mutex's. Epoch is then the slot's.
	Slot int
	// Wait is how long an Acquire ran before it acquired or gave up; Try
	// marks a TryAcquire (which does not wait: Wait is 0).
	Wait time.Duration
	Try  bool
	// Reason is a lost lease's reason.
	Reason LossReason
	// Op, Outcome and Duration describe a request: the S3 operation
	// ("GetObject", "PutObject", "ListObjectsV2", ...), how it ended (see
	// Outcome) and how long it took.
	Op       string
	Outcome  Outcome
	Duration time.Duration
	// Err is why an acquisition or renewal failed, or why a lease was lost.
	Err error
}

// Outcome is how an S3 request ended, as the protocol reads it. Several are
// normal answers, not failures: a waiter's poll of an unchanged lease is
// OutcomeNotModified, a create that lost a race OutcomePreconditionFailed.
type Outcome string

// The outcomes of a request.
const (
	OutcomeOK                 Outcome = "ok"
	OutcomeNotModified        Outcome = "not-modified"        // 304
	OutcomePreconditionFailed Outcome = "precondition-failed" // 412
	OutcomeNotFound           Outcome = "not-found"           // 404 NoSuchKey
	OutcomeConflict           Outcome = "conflict"            // 409
	OutcomeUnavailable        Outcome = "unavailable"         // 5xx, throttling, timeouts, connection errors
	OutcomeDenied             Outcome = "denied"              // 403, no usable credentials
	OutcomeCanceled           Outcome = "canceled"            // the caller's context ended
	OutcomeError              Outcome = "error"               // anything else (no such bucket, 501, ...)
)

// outcomeOf names how a request that returned err ended.
func outcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	if errors.Is(err, ErrCorruptLease) {
		return OutcomeError // answered, but not a lease (or ticket) s3lock can read
	}
	switch classify(err) {
	case failNotModified:
		return OutcomeNotModified
	case failPrecondition:
		return OutcomePreconditionFailed
	case failNotFound:
		return OutcomeNotFound
	case failConflict:
		return OutcomeConflict
	case failTransient:
		return OutcomeUnavailable
	case failAccessDenied, failCredentials:
		return OutcomeDenied
	case failCanceled:
		return OutcomeCanceled
	}
	return OutcomeError
}

// observe hands e to the client's observer, if it has one.
func (c *Client) observe(e Event) {
	if c.cfg.observer == nil {
		return
	}
	e.Bucket = c.bucket
	c.cfg.observer.Observe(e)
}
