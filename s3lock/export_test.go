package s3lock

import (
	"testing"
	"time"
)

// SetTimingForTest shortens the attempt window and the cleanup age for one
// test, keeping cleanupAge > attemptWindow + serverSlack as the protocol
// requires.
func SetTimingForTest(tb testing.TB, window time.Duration) {
	tb.Helper()
	oldWindow, oldAge := attemptWindow, cleanupAge
	attemptWindow = window
	cleanupAge = window + serverSlack + time.Second
	tb.Cleanup(func() { attemptWindow, cleanupAge = oldWindow, oldAge })
}

// OpError is the error of a failed S3 request, for tests that read the
// operation, bucket and key it names.
type OpError = opError

// WithRenewInterval and WithHistory set the renew interval and the history
// kept per lock, for tests that need short renewals or a short history.
var (
	WithRenewInterval = withRenewInterval
	WithHistory       = withHistory
)

// MaxListStalls is how many pages in a row that list nothing new a listing
// goes on from before it fails.
const MaxListStalls = maxListStalls

// CleanupAge returns the current cleanup age.
func CleanupAge() time.Duration { return cleanupAge }

// WaitCleanup waits for the client's background history cleanups.
func (c *Client) WaitCleanup() { c.cleanups.Wait() }

// EncodeReleasedForTest returns a released lease payload for epoch, as the
// protocol writes it, for tests that seed history.
func EncodeReleasedForTest(holder string, epoch uint64, validity time.Duration) []byte {
	p := payload{owner: owner{Holder: holder, ValidityMs: validity.Milliseconds()}, Released: true, Format: formatVersion,
		Epoch: epoch, Nonce: randomHex(16), Renewals: 1, AcquiredAt: time.Now().UTC(), ReleasedAt: time.Now().UTC()}
	b, err := p.encode()
	if err != nil {
		panic(err)
	}
	return b
}

// Limits and defaults the tests check against, unexported in the package.
const (
	DefaultHistory  = defaultHistory
	MaxNameLength   = maxNameLength
	MaxPayloadBytes = maxPayloadBytes
)

// HeldSlot returns the slot a *HeldError of a full slot lock describes, and
// the lock's number of slots (0, 0 for any other *HeldError).
func HeldSlot(e *HeldError) (slot, slots int) { return e.slot, e.slots }
