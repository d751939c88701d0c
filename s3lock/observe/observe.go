// Package observe is what an s3lock.Client reports of its work to an
// Observer (s3lock.WithObserver): each acquisition and how long it waited,
// each renewal and failed renewal, each lease lost or released, and each S3
// request with its outcome, for metrics, traces or a summary.
//
// It is a package of its own, as net/http/httptrace is beside net/http: an
// adapter (the package s3lockotel turns the events into OpenTelemetry
// metrics and spans) needs only this vocabulary, and package s3lock's own
// documentation stays the lock API.
package observe

import "time"

// Observer hears what an s3lock.Client does (s3lock.WithObserver), for metrics, traces or a
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

// Kind says what an Event reports; its value is its name.
type Kind string

// The kinds of Event. New kinds may be added; observers should ignore kinds
// they do not know.
const (
	// Acquired: an acquisition succeeded (Epoch, Key; Wait is how long
	// Acquire took, 0 for TryAcquire). A lease taken over with Resume is
	// no acquisition: its release or loss is reported all the same,
	// so releases and losses can outnumber acquisitions.
	Acquired Kind = "acquired"
	// AcquireFailed: an Acquire or TryAcquire whose arguments were
	// accepted returned an error (Err; Wait). A held lock for TryAcquire, a
	// wait that timed out or was cancelled, a superseded waiter and a
	// failing store all count.
	AcquireFailed Kind = "acquire-failed"
	// Renewed: a renewal was confirmed.
	Renewed Kind = "renewed"
	// RenewFailed: one attempt of a renewal failed (Err: a 5xx, a
	// timeout, a refusal) without the lease being lost by it; a renewal
	// retries while the lease is trusted, so one renewal can fail several
	// times before it is confirmed (Renewed) or the lease is lost.
	RenewFailed Kind = "renew-failed"
	// Lost: the lease ended without this handle releasing it (Err is
	// the *s3lock.LeaseLostError, Reason its reason).
	Lost Kind = "lost"
	// Released: the lease was released through this handle.
	Released Kind = "released"
	// Request: one S3 request (Op, Outcome, Duration, Key).
	Request Kind = "request"
)

// Event is one thing a Client did. Which fields are set depends on Kind.
type Event struct {
	Kind   Kind
	Bucket string
	Lock   string // the lock's name ("" for requests: see Key)
	Key    string // the object concerned
	Epoch  uint64
	// Slot is the slot of a slot lock's lease (s3lock.WithSlots), from 1; 0 for a
	// mutex's. Epoch is then the slot's.
	Slot int
	// Wait is how long an Acquire ran before it acquired or gave up; Try
	// marks a TryAcquire (which does not wait: Wait is 0).
	Wait time.Duration
	Try  bool
	// Reason is a lost lease's reason: an s3lock.LossReason's value
	// ("lapsed", "replaced", ...).
	Reason string
	// Op, Outcome and Duration describe a request: the S3 operation
	// ("GetObject", "PutObject", "ListObjectsV2", ...), how it ended and
	// how long it took. Outcome is how the protocol reads the answer, one
	// of "ok", "not-modified" (304), "precondition-failed" (412),
	// "not-found" (404), "conflict" (409), "unavailable" (5xx, throttling,
	// timeouts, connection errors), "denied" (403, no usable credentials),
	// "canceled" (the caller's context ended) or "error" (anything else:
	// no such bucket, 501, an unreadable lease). Several are normal
	// answers, not failures: a waiter's poll of an unchanged lease is
	// "not-modified", a create that lost a race "precondition-failed";
	// "unavailable", "denied" and "error" are failures.
	Op       string
	Outcome  string
	Duration time.Duration
	// Err is why an acquisition or renewal failed, or why a lease was lost.
	Err error
}
