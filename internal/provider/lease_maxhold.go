package provider

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The provider's face of a lease's cap on its tenure (s3lock.WithMaxHold,
// PROTOCOL.md §6, "A cap on tenure"): the max_hold argument and the
// held_until_at_most result of the lease resource and the ephemeral lease,
// and how a lease lost at its cap is told. What the cap does is the SDK's:
// the provider passes it on and reads it back (State.HeldUntilAtMost).

// maxHoldAttr is the argument that caps a lease's tenure.
const maxHoldAttr = "max_hold"

// maxHoldDescription is the MarkdownDescription of max_hold; more adds what
// is particular to the resource, the ephemeral resource or the state store.
func maxHoldDescription(more string) string {
	return fmt.Sprintf("The longest the lease is held: it is not renewed past `max_hold` after it was acquired, "+
		"however long the work under it takes, so that work that hangs cannot keep the lock for ever. A duration "+
		"longer than `lease_duration`, such as `\"4h\"` (at most %s, a year). When the cap comes, the lease is lost as any "+
		"lost lease is, with an error that says it reached its `max_hold`. Unset (the default): no cap. Everyone who reads the lock sees the "+
		"cap (`held_until_at_most`, the `s3lock_lease` data source, `s3lock status`).%s", formatDuration(maxMaxHold), more)
}

// heldUntilAtMostDescription is the MarkdownDescription of
// held_until_at_most; whose says whose cap it is.
func heldUntilAtMostDescription(whose string) string {
	return "When " + whose + " is held until at most (RFC 3339, the acquirer's clock): its acquisition plus its " +
		"`max_hold`, past which it is not renewed. Null when it has no cap."
}

// maxHoldValidator checks max_hold's form and range; maxHoldNotLonger, that
// it outlasts lease_duration.
var maxHoldValidator = durationValidator{min: s3lock.MinLeaseDuration, max: maxMaxHold}

// maxHoldOptions are the options of an acquisition capped at d (0: none).
func maxHoldOptions(d time.Duration) []s3lock.Option {
	if d == 0 {
		return nil
	}
	return []s3lock.Option{s3lock.WithMaxHold(d)}
}

// checkMaxHold refuses, at plan time, a max_hold that does not outlast
// lease_duration (its default defaultLease when null), as the SDK would
// at the acquisition (WithMaxHold); nil while either is unknown, or not a
// duration (its validator says so). lock is describeLock's.
func checkMaxHold(maxHold, leaseDuration types.String, defaultLease, lock string) diag.Diagnostic {
	if maxHold.IsNull() || maxHold.IsUnknown() || leaseDuration.IsUnknown() {
		return nil
	}
	rawLease := defaultLease
	if !leaseDuration.IsNull() {
		rawLease = leaseDuration.ValueString()
	}
	limit, err1 := time.ParseDuration(maxHold.ValueString())
	dur, err2 := time.ParseDuration(rawLease)
	if errors.Join(err1, err2) != nil || limit > dur {
		return nil
	}
	return maxHoldNotLonger(maxHold.ValueString(), rawLease, lock)
}

// maxHoldOf is the cap of a lease as its state shows it: how long after its
// acquisition it is held at most; 0 without a cap.
func maxHoldOf(st s3lock.State) time.Duration {
	if st.HeldUntilAtMost.IsZero() {
		return 0
	}
	return st.HeldUntilAtMost.Sub(st.AcquiredAt)
}

// endedAtCap reports whether a lease ended at its cap: cause is a
// *s3lock.LeaseLostError whose Reason is s3lock.LostMaxHold, or the run's
// guard said so (runLoss).
func endedAtCap(cause error) bool {
	var lost *s3lock.LeaseLostError
	var run *runLost
	return errors.As(cause, &lost) && lost.Reason == s3lock.LostMaxHold ||
		errors.As(cause, &run) && run.reason == s3lock.LostMaxHold
}

// runLost is why the run's guard reports a lease lost: its words, and the
// SDK's reason for it.
type runLost struct {
	text   string
	reason s3lock.LossReason
}

func (e *runLost) Error() string { return e.text }

// runLoss is the cause of a run lease the guard reports lost.
func runLoss(held *runguard.Lease) error {
	return &runLost{text: held.Lost, reason: held.LostReason}
}

// runRef is the leaseRef of a lease the run's guard holds, with its cap.
func runRef(held *runguard.Lease) leaseRef {
	ref := tokenRef(held.Token)
	if !held.HeldUntilAtMost.IsZero() {
		ref.maxHold = held.HeldUntilAtMost.Sub(held.AcquiredAt)
	}
	return ref
}
