package tfstate

import (
	"errors"
	"fmt"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/transfer"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The bounds of the store's state transfers: how large a state may be, and
// how long its GET may take.

// MaxStateSize bounds a state the store writes or reads, and the http
// backend accepts: the largest states seen in the field are tens of
// megabytes, and the store holds a state in memory (Terraform holds it
// several times over). A larger object at a state's key is not read into
// memory: the read fails naming its size.
const MaxStateSize = 256 << 20

// markRoom is the most a fence mark adds to a state ("\n", up to 64 bits,
// "\n"): a stored body may exceed MaxStateSize by this much.
const markRoom = 1 + 64 + 1

// transferTimeout is how long a state transfer of n bytes may take, as the
// SDK's fence.Put times its PUT of one (transfer.Timeout: the request
// timeout plus 8 s per MiB), so that a large state on a slow link can be
// locked, written and read.
func transferTimeout(n int64) time.Duration { return transfer.Timeout(n) }

// ErrStateTooLarge is a state larger than the store reads or writes
// (MaxStateSize).
var ErrStateTooLarge = errors.New("the state is larger than the store reads or writes")

// tooLarge is a state at key that is size (sizeText) where the limit is
// limit bytes.
func (s *Store) tooLarge(doing, key, size string, limit int64) error {
	what := "nothing was written"
	if doing == "reading" {
		what = "it was not read; check what the object holds"
	}
	return fmt.Errorf("%s the state s3://%s/%s: %w: it is %s, and the limit is %s (Terraform states are "+
		"rarely past tens of MiB): %s", doing, s.cfg.Bucket, key, ErrStateTooLarge, size, sizeText(limit), what)
}

// sizeText is n bytes, in MiB too from one MiB.
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

// GetTimeoutError is a state GET that did not finish within its timeout
// (transferTimeout of the state's size, once the store said it).
type GetTimeoutError struct {
	After time.Duration
	Size  int64 // -1: not known (no answer yet, or no Content-Length)
}

func (e *GetTimeoutError) Error() string {
	why := "the request timeout; it had not said the state's size"
	if e.Size >= 0 {
		why = "the request timeout, and time for its " + sizeText(e.Size) + " on a slow link"
	}
	return fmt.Sprintf("the store did not send the state within %s (%s)", e.After.Round(time.Millisecond), why)
}

// Unwrap makes it match s3lock.ErrUnavailable: the store did not answer.
func (e *GetTimeoutError) Unwrap() error { return s3lock.ErrUnavailable }
