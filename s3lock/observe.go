package s3lock

import (
	"errors"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// The outcomes of a request (Event.Outcome).
const (
	outcomeOK                 = "ok"
	outcomeNotModified        = "not-modified"        // 304
	outcomePreconditionFailed = "precondition-failed" // 412
	outcomeNotFound           = "not-found"           // 404 NoSuchKey
	outcomeConflict           = "conflict"            // 409
	outcomeUnavailable        = "unavailable"         // 5xx, throttling, timeouts, connection errors
	outcomeDenied             = "denied"              // 403, no usable credentials
	outcomeCanceled           = "canceled"            // the caller's context ended
	outcomeError              = "error"               // anything else (no such bucket, 501, ...)
)

// outcomeOf names how a request that returned err ended.
func outcomeOf(err error) string {
	if err == nil {
		return outcomeOK
	}
	if errors.Is(err, ErrCorruptLease) {
		return outcomeError // answered, but not a lease (or ticket) s3lock can read
	}
	switch classify(err) {
	case failNotModified:
		return outcomeNotModified
	case failPrecondition:
		return outcomePreconditionFailed
	case failNotFound:
		return outcomeNotFound
	case failConflict:
		return outcomeConflict
	case failTransient:
		return outcomeUnavailable
	case failAccessDenied, failCredentials:
		return outcomeDenied
	case failCanceled:
		return outcomeCanceled
	}
	return outcomeError
}

// observe hands e to the client's observer, if it has one.
func (c *Client) observe(e observe.Event) {
	if c.cfg.observer == nil {
		return
	}
	e.Bucket = c.bucket
	c.cfg.observer.Observe(e)
}
