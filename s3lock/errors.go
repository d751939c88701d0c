package s3lock

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Sentinel errors. Branch on them with errors.Is; the typed errors below
// carry the detail and match the sentinels.
var (
	// ErrHeld means the lock is held by someone else. The error is a
	// *HeldError that says who holds it, which epoch, and for how long at
	// most.
	ErrHeld = errors.New("s3lock: lock is held")

	// ErrLeaseLost means a lease is over without this handle having
	// released it: it lapsed before it could be renewed, reached its
	// maximum hold (WithMaxHold), was force-released
	// or released through another handle, was superseded by a newer epoch,
	// or its epoch object was deleted. Renew, Release, Resume and
	// Lookup all report it so; work done under the lease may not have been
	// exclusive. The error is a *LeaseLostError whose Reason says which.
	ErrLeaseLost = errors.New("s3lock: lease lost")

	// ErrReleased is returned by operations on a lease that was released
	// through this very handle. A lease released through another handle (a
	// pipeline step that released with the token) is, for every other
	// handle, a *LeaseLostError with Reason LostReleased.
	ErrReleased = errors.New("s3lock: lease already released")

	// ErrConditionalWritesUnsupported means the store accepted a write that
	// a conditional header (If-None-Match or If-Match) should have refused:
	// it cannot provide mutual exclusion.
	ErrConditionalWritesUnsupported = errors.New("s3lock: store does not enforce conditional writes")

	// ErrUnorderedListing means the store's listings are not what s3lock
	// reads them as (storecheck.Verify): on a general purpose bucket, keys in
	// ascending order with StartAfter honoured; on a directory bucket,
	// every key once across pages; on both, each object's size as written
	// (slot locks read it, PROTOCOL.md §14), and paged listings that move on
	// to their end (a store that ignores StartAfter, repeats a continuation
	// token or says every page is truncated fails the listing with it,
	// PROTOCOL.md §8). s3lock could misjudge a lock's holder on such a
	// store.
	ErrUnorderedListing = errors.New("s3lock: store does not list keys in order")

	// ErrInvalidName means a lock name was rejected; the error is a
	// *NameError.
	ErrInvalidName = errors.New("s3lock: invalid lock name")

	// ErrInvalidConfig means an option or argument was rejected.
	ErrInvalidConfig = errors.New("s3lock: invalid configuration")

	// ErrCorruptLease means an epoch object exists but is not a lease this
	// package can read: not JSON, too large, or holding impossible values.
	// The error names the bucket and key, and says what is wrong.
	ErrCorruptLease = errors.New("s3lock: unreadable lease object")

	// ErrEpochExhausted means the lock reached MaxEpoch and cannot be
	// acquired again under its name.
	ErrEpochExhausted = errors.New("s3lock: epoch space exhausted")

	// ErrNoSuchEpoch means the epoch named by ForceRelease does not exist.
	// (A Resume or Lookup of a missing epoch reports a
	// *LeaseLostError with Reason LostDeleted.)
	ErrNoSuchEpoch = errors.New("s3lock: no such epoch")

	// ErrUnavailable marks a failure that may pass: 5xx answers, throttling,
	// timeouts, connection errors, conflicting concurrent requests, the SDK
	// retryer running out of attempts or quota. Acquire keeps waiting
	// through them; other calls return them.
	ErrUnavailable = errors.New("s3lock: store unavailable")

	// ErrAccessDenied means the store refused the credentials or the request
	// (403).
	ErrAccessDenied = errors.New("s3lock: access denied")

	// ErrNoSuchBucket means the bucket does not exist.
	ErrNoSuchBucket = errors.New("s3lock: no such bucket")

	// ErrNameCollision means the store cannot hold a lock's objects at their
	// keys: an object exists at the lock's name or at a parent path of it
	// (an object "deploy" and a lock "deploy/prod"), which stores with a
	// file-system backend (versitygw's posix, MinIO) refuse. Waiting does
	// not help: rename the lock or remove the object. The error is an
	// *opError, and Acquire's names the colliding key when it can find it.
	ErrNameCollision = errors.New("s3lock: lock name collides with an object")

	// ErrSuperseded means an OrderNewest (newest wins) Acquire gave up its place
	// in line because a newer OrderNewest waiter joined it. The error is a
	// *SupersededError naming the newer waiter.
	ErrSuperseded = errors.New("s3lock: superseded by a newer waiter")

	// ErrSlotsMismatch means the lock admits another number of holders than
	// the acquirer asked for (WithSlots): it is a slot lock and the acquirer
	// asked for a mutex or another n. The error is a *SlotsError. Waiting
	// does not fix it: every holder of a lock must use the same Slots.
	ErrSlotsMismatch = errors.New("s3lock: the lock admits another number of holders")
)

// HeldError reports that a lock is held. It matches ErrHeld.
type HeldError struct {
	Bucket string
	Name   string
	Key    string
	Epoch  uint64
	Holder string
	// ExpiresIn is how long the lease has left at most if its holder does
	// not renew it, as judged by the store's clock when it was read.
	ExpiresIn time.Duration
	// AcquiredAt is when the holder says it acquired the lease (the
	// holder's clock; informational).
	AcquiredAt time.Time
	Metadata   map[string]string
	// Ahead is how many ordered waiters (OrderFIFO, OrderNewest) are in the lock's
	// line before the caller: for a waiting ordered Acquire's observer,
	// those still to be served first; for an ordered TryAcquire that found
	// the lock free but the line not empty, the whole line (Holder is then
	// empty, Epoch 0 and Queued set). 0 when nobody waits in line or the caller
	// waits without order. While a waiter is not at the head, Holder and
	// Epoch are the holder it last saw, which it does not watch (ExpiresIn
	// is then 0).
	Ahead int
	// Queued is set when the lock itself was free and only ordered waiters
	// ahead kept the caller from it (Ahead says how many; Holder is empty
	// and Epoch 0).
	Queued bool
	// Shared is set when the lock is held by shared holders (WithShared)
	// and an exclusive TryAcquire found them: Holder, Key and ExpiresIn are
	// one share's, and Waiting says how many shares it found held.
	Shared  bool
	Waiting int
	// Share is the share id of the shared holder that Holder and Key
	// describe (Shared), as a share's Token carries it; "" otherwise.
	Share string
	// Pending is set when the holder is an exclusive acquirer that waits
	// for the shared holders before it: no new shared holder joins
	// meanwhile.
	Pending bool

	obs  *observed // what was read, for a waiting Acquire to watch
	line bool      // the attempt's LIST showed the lock's line
	// slots is n when the lock is a slot lock (WithSlots(n), n > 1) whose
	// slots are all held; slot is then the slot that the other fields
	// describe, the one whose lease runs out first (slotLock.slotsHeld). Only
	// the message says them: a caller that asked for n slots knows n, and
	// Key names the slot's epoch object.
	slots, slot int
}

func (e *HeldError) Error() string {
	if e.Queued {
		return fmt.Sprintf("s3lock: lock %q in bucket %s is free, but %s in its line (under %s) before this one; "+
			"an ordered Acquire waits its turn, one without order may take the lock", e.Name, e.Bucket,
			waitersAre(e.Ahead), linePrefix(e.Name))
	}
	msg := fmt.Sprintf("s3lock: lock %q in bucket %s is held by %q (epoch %d, key %s) for at most %s more",
		e.Name, e.Bucket, e.Holder, e.Epoch, e.Key, e.ExpiresIn.Round(time.Second/10))
	switch {
	case e.Shared:
		msg = fmt.Sprintf("s3lock: lock %q in bucket %s is held by %s, %q among them (key %s) for at most %s more",
			e.Name, e.Bucket, shareText(e.Waiting), e.Holder, e.Key, e.ExpiresIn.Round(time.Second/10))
	case e.Pending:
		msg += "; it is an exclusive acquirer that waits for the shared holders before it, and no new shared holder joins meanwhile"
	}
	if e.slots > 1 {
		msg = fmt.Sprintf("s3lock: all %d slots of lock %q in bucket %s are held; the first to run out is slot %d, "+
			"held by %q (epoch %d, key %s) for at most %s more", e.slots, e.Name, e.Bucket, e.slot,
			e.Holder, e.Epoch, e.Key, e.ExpiresIn.Round(time.Second/10))
	}
	if e.Ahead > 0 {
		msg += fmt.Sprintf(", and %s in line before this one", waitersAre(e.Ahead))
	}
	return msg
}

// waitersAre says "1 ordered waiter is" or "n ordered waiters are".
func waitersAre(n int) string {
	if n == 1 {
		return "1 ordered waiter is"
	}
	return fmt.Sprintf("%d ordered waiters are", n)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// SlotsError reports that a lock admits another number of holders than an
// acquirer asked for. It matches ErrSlotsMismatch.
type SlotsError struct {
	Bucket string
	Name   string
	// Key is the lock's marker: the epoch object that records its slots.
	Key string
	// Slots is how many holders the lock admits (0: the lock has shared
	// holders, WithShared, and is no slot lock); Want how many the acquirer
	// asked for (1: a mutex, no WithSlots option).
	Slots, Want int
	// Shared is set when the acquirer asked for a shared lease
	// (WithShared); Want is then 1.
	Shared bool
}

func (e *SlotsError) Error() string {
	asked := fmt.Sprintf("WithSlots(%d)", e.Want)
	switch {
	case e.Shared:
		asked = "a shared lease (WithShared)"
	case e.Want <= 1:
		asked = "a mutex (no WithSlots)"
	}
	if e.Slots == 0 {
		return fmt.Sprintf("s3lock: lock %q in bucket %s has shared and exclusive holders (its epoch %s is a shared "+
			"one, or an exclusive one that waited for shared holders), but this acquirer asked for %s; a lock is either "+
			"a slot lock or one with shared holders: use another lock name for the slot lock", e.Name, e.Bucket, e.Key, asked)
	}
	return fmt.Sprintf("s3lock: lock %q in bucket %s admits %d holders (its marker %s says so), but this acquirer asked "+
		"for %s; every holder of a lock must ask for the same number of slots: use %d, or another lock name "+
		"(an operator can reset the lock by force-releasing the marker's epoch once no slot is held)",
		e.Name, e.Bucket, e.Slots, e.Key, asked, e.Slots)
}

// Is makes errors.Is(err, ErrSlotsMismatch) true.
func (e *SlotsError) Is(target error) bool { return target == ErrSlotsMismatch }

// SupersededError reports that an OrderNewest Acquire left the line because a
// newer OrderNewest waiter joined it. It matches ErrSuperseded.
type SupersededError struct {
	Bucket string
	Name   string
	// Key is the ticket this waiter held in the line; NewerKey the newer
	// waiter's ticket, and By its holder identity ("" if it could not be
	// read).
	Key      string
	NewerKey string
	By       string
}

func (e *SupersededError) Error() string {
	by := e.By
	if by == "" {
		by = "another waiter"
	}
	return fmt.Sprintf("s3lock: stopped waiting for lock %q in bucket %s: superseded by the newer run %q (ticket %s; "+
		"this one's was %s); nothing was acquired", e.Name, e.Bucket, by, e.NewerKey, e.Key)
}

// Is makes errors.Is(err, ErrSuperseded) true.
func (e *SupersededError) Is(target error) bool { return target == ErrSuperseded }

// LossReason says how a lease ended without its handle releasing it. Its
// value is a word for people and metrics ("lapsed", "replaced", ...).
type LossReason string

// The reasons a lease can be lost.
const (
	// LostLapsed: its trust deadline passed before a renewal (or the
	// release) was confirmed; by the store's clock it lapses or has lapsed.
	LostLapsed LossReason = "lapsed"
	// LostReplaced: a newer epoch of the lock exists, or the epoch object
	// of a held lease now belongs to another acquisition.
	LostReplaced LossReason = "replaced"
	// LostNotThisLease: the epoch object a token names (Resume, Lookup)
	// belongs to another acquisition than the token's Nonce: the token
	// names no lease of this lock — a wrong or edited token, one from
	// another bucket's lock of that name, a lock whose objects were
	// deleted and its epoch acquired anew, or an epoch object that no
	// s3lock acquisition wrote (it has no nonce), which no handle can hold.
	LostNotThisLease LossReason = "not this lease"
	// LostForceReleased: an operator released it with ForceRelease.
	LostForceReleased LossReason = "force-released"
	// LostReleased: a takeover (Resume) or Lookup found it released
	// through another handle (the handle a token came from, or a pipeline
	// step that released with the token): a release already done, so a
	// caller that wanted to release it has nothing left to do. A handle
	// whose lease another handle released while it still used it reports
	// LostTakenOver instead.
	LostReleased LossReason = "released"
	// LostTakenOver: another handle of the same lease (a Resume) wrote its
	// epoch object, so this handle no longer speaks for it.
	LostTakenOver LossReason = "taken over"
	// LostDeleted: its epoch object does not exist (deleted, or never
	// written).
	LostDeleted LossReason = "deleted"
	// LostMaxHold: it reached its maximum hold (WithMaxHold), past which
	// it is not renewed. Its epoch object stays its holder's until it
	// lapses, soon after; Release releases it at once.
	LostMaxHold LossReason = "max hold"
)

// LeaseLostError reports why a lease ended without this handle releasing
// it. It matches ErrLeaseLost, whatever the Reason, and unwraps to the
// store's last answer, if any.
type LeaseLostError struct {
	Bucket string
	Name   string
	Key    string
	Epoch  uint64
	Reason LossReason
	// Detail says what was found, for people: "was force-released by ops",
	// "has lapsed (last written 2m0s ago, lease 1m0s)".
	Detail string
	Err    error
}

func (e *LeaseLostError) Error() string {
	detail := e.Detail
	if detail == "" {
		detail = "it was " + string(e.Reason)
	}
	msg := fmt.Sprintf("s3lock: lease on s3://%s/%s (epoch %d) lost: %s", e.Bucket, e.Key, e.Epoch, detail)
	if e.Reason == LostNotThisLease {
		msg = fmt.Sprintf("s3lock: the token names no lease of s3://%s/%s (epoch %d): %s", e.Bucket, e.Key, e.Epoch, detail)
	}
	if e.Err != nil {
		msg += ": " + causeText(e.Err)
	}
	return msg
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap returns the cause.
func (e *LeaseLostError) Unwrap() error { return e.Err }

// waitError reports that Acquire gave up waiting because its context ended
// (or its WithWait passed). It matches the context's error
// (context.DeadlineExceeded for WithWait) and unwraps to the last reason
// the lock could not be taken (a *HeldError, or a failure matching
// ErrUnavailable).
type waitError struct {
	Bucket string
	Name   string
	Err    error  // the context's error
	Why    string // what ended the wait, for people (waitEnded)
	Last   error  // why the last attempt did not acquire; may be nil
	// Attempting is set when no attempt found the lock held or took it
	// within WithWait's bound on the attempts (this long).
	Attempting time.Duration
}

func (e *waitError) Error() string {
	why := e.Why
	if why == "" {
		why = e.Err.Error()
	}
	msg := fmt.Sprintf("s3lock: gave up waiting for lock %q in bucket %s: %s", e.Name, e.Bucket, why)
	if e.Attempting > 0 {
		msg = fmt.Sprintf("s3lock: gave up on lock %q in bucket %s: no attempt to acquire it finished within %s "+
			"(the wait, at least %s): the store answers too slowly, or not at all; check the endpoint and the network",
			e.Name, e.Bucket, e.Attempting, minAttemptWait)
	}
	if e.Last != nil {
		msg += "; last: " + causeText(e.Last)
	}
	return msg
}

// Unwrap returns the context's error and the last cause.
func (e *waitError) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Last}
}

// NameError reports an invalid lock name or name prefix. It matches
// ErrInvalidName.
type NameError struct {
	Name   string
	Reason string
	Prefix bool // Name is a prefix given to ValidatePrefix
}

func (e *NameError) Error() string {
	what := "lock name"
	if e.Prefix {
		what = "lock name prefix"
	}
	return fmt.Sprintf("s3lock: invalid %s %q: %s", what, e.Name, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidName) true.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// corruptLeaseError reports an epoch object that cannot be read as a lease.
// It matches ErrCorruptLease.
type corruptLeaseError struct {
	Bucket string
	Key    string
	Reason string

	etag string // of the object, so ForceRelease can replace it
}

func (e *corruptLeaseError) Error() string {
	return fmt.Sprintf("s3lock: s3://%s/%s is not a valid lease object: %s; "+
		"if nothing else writes this key, remove it or force-release its epoch", e.Bucket, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorruptLease) true.
func (e *corruptLeaseError) Is(target error) bool { return target == ErrCorruptLease }

// opError wraps a failed S3 request with the operation, bucket and key, and a
// hint for the user. It matches the sentinel of its class (ErrUnavailable,
// ErrAccessDenied, ErrNoSuchBucket) and unwraps to the SDK's error, so
// errors.As still finds smithy.APIError.
type opError struct {
	Op     string // S3 operation, e.g. "PutObject"
	Bucket string
	Key    string
	Kind   error // the sentinel of the failure's class, or nil
	Err    error
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("s3lock: ")
	b.WriteString(e.Op)
	b.WriteString(" s3://")
	b.WriteString(e.Bucket)
	if e.Key != "" {
		b.WriteString("/")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(describeCause(e.Err))
	if h := e.hint(); h != "" {
		b.WriteString(" (")
		b.WriteString(h)
		b.WriteString(")")
	}
	return b.String()
}

func (e *opError) hint() string {
	switch {
	case classify(e.Err) == failCredentials:
		return "the AWS SDK found no usable credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with a role"
	case unknownAccessKey(e.Err):
		return "the store does not know this access key: check the credentials the client uses " +
			"(AWS_ACCESS_KEY_ID, the profile, or the configured access key) and that they belong to this store"
	case badSignature(e.Err):
		return "the store refused the request's signature: the secret key is not the access key's; check the " +
			"secret key the client uses (AWS_SECRET_ACCESS_KEY, the profile, or the configured secret key)"
	case badSessionToken(e.Err):
		return "the session token has expired or is not valid: renew the credentials (a new role session, " +
			"aws sso login) or unset AWS_SESSION_TOKEN if the keys need none"
	case errors.Is(e.Kind, ErrAccessDenied):
		return "check that the credentials may " + permissionFor(e.Op) + " in this bucket"
	case errors.Is(e.Kind, ErrNoSuchBucket):
		return "create the bucket or correct its name"
	case errors.Is(e.Kind, ErrUnavailable) && unreachable(e.Err):
		return "the store is unreachable: check the endpoint, the region and the network"
	case errors.Is(e.Kind, ErrUnavailable):
		return "the store may be overloaded or unreachable; retry later"
	case e.Op == "ListObjectsV2" && classify(e.Err) == failNotFound:
		return "the endpoint answered 404 to a bucket listing: check that it is an S3 endpoint (path-style " +
			"addressing for most S3-compatible stores) and that the bucket exists"
	case errors.Is(e.Kind, ErrConditionalWritesUnsupported):
		return "the store does not implement a request s3lock needs; it cannot hold locks on this store"
	case errors.Is(e.Kind, ErrNameCollision):
		return "an object exists at the lock's name or at a parent path of it, so the store cannot put the " +
			"lock's objects there: rename the lock, or remove that object"
	}
	return ""
}

// unreachable reports whether err is a failure to connect at all (refused,
// no route, unknown host) rather than a store that answered badly.
func unreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if (errors.As(err, &opErr) && opErr.Op == "dial") || errors.As(err, &dnsErr) {
		return true
	}
	// A directory bucket's CreateSession that could not connect: the SDK
	// reports it as text only.
	_, status, asked := sessionAnswer(err)
	return asked && status == 0 && strings.Contains(sdkError(err).Error(), "dial tcp")
}

// Unwrap returns the class sentinel and the underlying error.
func (e *opError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

func permissionFor(op string) string {
	switch op {
	case "ListObjectsV2":
		return "s3:ListBucket"
	case "GetObject", "HeadObject":
		return "s3:GetObject"
	case "PutObject":
		return "s3:PutObject (and s3:GetObject for conditional writes)"
	case "DeleteObject", "DeleteObjects":
		return "s3:DeleteObject"
	}
	return "perform " + op
}
