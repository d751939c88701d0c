package provider

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// The wording the diagnostics (diagnostics.go) share: what a lost lease
// means and what happens next to it, where a lock's objects are, what an
// error means and what to do about it, who holds a lock now, whom a wait
// waited for, where a state is.

// notExclusive is the one wording of what a lost lease means for the work
// done under it.
const notExclusive = "Work done under the lease after it was lost may not have been exclusive: check what it " +
	"changed before relying on it."

// What happens next to a lost lease, for leaseLost.
const (
	lostRemovedFromState = "Terraform removes it from state; the next apply acquires the lock again with a new epoch."
	lostBeforeRenewal    = "It could not be renewed: the next refresh removes it from state and the next apply " +
		"acquires the lock again."
	lostBeforeRelease = "There was nothing left to release."
	lostFromSet       = "A lock set is held all or none: if the set's other leases are still held, the next plan " +
		"replaces the resource, releasing them and taking the set again with new epochs; else Terraform removes " +
		"it from state and the next apply takes the set again."
)

// heldHint says what to do about a lock that others hold or queued for
// first, by what held says of them (nil: the lock was held, no more is
// known): all slots of a slot lock held, shared holders, a writer that
// waits for them; waitAttr names the setting that raises the wait, "" when
// no wait was asked for.
func heldHint(held *s3lock.HeldError, waitAttr string) string {
	wait := ""
	if waitAttr != "" {
		wait = " (raise " + waitAttr + ")"
	}
	switch {
	case held != nil && slotOfKey(held.Key) > 0:
		return fmt.Sprintf("All slots of the lock are held by others, or (with order = \"fifo\" or \"newest\") "+
			"others queued for a slot first. Wait for a slot to free%s, or, if a holder is gone for good, "+
			"force-release its slot's epoch (the s3lock_force_release action with slot, or `s3lock force-release "+
			"--slot`).", wait)
	case held != nil && held.Shared:
		return "Shared holders (mode = \"shared\": plans, reports) hold the lock, and an exclusive lease waits " +
			"until every one of them is released or has lapsed; no new shared holder joins them meanwhile. Wait " +
			"for them" + wait + ", or, if a holder is gone for good, force-release its share (its key) with the " +
			"s3lock CLI."
	case held != nil && held.Pending:
		return "A writer (an exclusive lease) waits for the lock's shared holders, and a shared lease waits " +
			"behind it, so that new readers cannot starve it. Wait for the writer to be served and done" + wait +
			", or, if it is gone for good, force-release its epoch with the s3lock CLI."
	}
	return "Someone else holds the lock, or (with order = \"fifo\" or \"newest\") others queued for it first. " +
		"Wait for them" + wait + ", or, if the holder is gone for good, force-release its epoch with the s3lock CLI."
}

// runLeaseKept says what Terraform's "Closing..." of an ephemeral lease held
// for the whole run means.
const runLeaseKept = "The run keeps the lease until terraform exits: the \"Closing...\" that Terraform shows " +
	"for it when the plan ends only ends the plan's use of it; the apply runs under the same epoch."

// tookFor words how long a wait took, to the second.
func tookFor(d time.Duration) string {
	if d = d.Round(time.Second); d <= 0 {
		return "less than a second"
	}
	return formatDuration(d)
}

// waitStory says, as sentences, whom a wait waited for: the holder when it
// began, with this run's place in line, and the last one when another.
func waitStory(w lockWait) string {
	first, story := heldBy(w.first)
	story = "When it asked, " + story + "."
	if w.last != nil {
		if last, then := heldBy(w.last); last != first {
			story += " Then " + then + "."
		}
	}
	return story
}

// heldBy says what a wait observer reported: who held the lock (a
// *s3lock.HeldError), with how many were ahead in its line, or who held the
// S3 backend's lock file of a state (a *tfstate.LockFileHeldError); who
// tells holders apart (the slot and epoch, or the lock file's ID).
func heldBy(err error) (who, text string) {
	var held *s3lock.HeldError
	var file *tfstate.LockFileHeldError
	switch {
	case errors.As(err, &file):
		return file.Info.ID, "the S3 backend's lock file was held by a run without s3lock: " + file.Info.Holder()
	case !errors.As(err, &held):
		return err.Error(), fmt.Sprintf("the lock was held (%v)", err)
	case held.Queued:
		return "queued", fmt.Sprintf("the lock was free, but %s queued for it first", runsAhead(held.Ahead))
	}
	by := fmt.Sprintf("%q", held.Holder)
	if held.Holder == "" {
		by = "a holder whose identity could not be read"
	}
	text = fmt.Sprintf("it was held by %s (epoch %d, since %s%s)", by, held.Epoch, formatTime(held.AcquiredAt),
		stateOperation(held))
	slot := slotOfKey(held.Key)
	switch {
	case slot > 0:
		text = fmt.Sprintf("all of its slots were held, the one to run out first, slot %d, by %q (epoch %d, since %s)",
			slot, held.Holder, held.Epoch, formatTime(held.AcquiredAt))
	case held.Shared:
		text = "it was " + sharedHolders(held.Waiting, held.Holder)
	case held.Pending:
		text = fmt.Sprintf("a writer, %s, waited for its shared holders (epoch %d, since %s), and this one waited "+
			"behind it", by, held.Epoch, formatTime(held.AcquiredAt))
	}
	if held.Ahead > 0 {
		text += fmt.Sprintf(", and %s ahead of this one in line", runsAhead(held.Ahead))
	}
	return fmt.Sprintf("%d/%d", slot, held.Epoch), text
}

// stateOperation is, for a state's lock (whose lease carries Terraform's
// lock info), "; Terraform's lock info: who ..., operation ..."; "" for
// other locks.
func stateOperation(held *s3lock.HeldError) string {
	var info []string
	for _, f := range []struct{ name, v string }{{"who", tfstate.TerraformWho(held)}, {"operation", tfstate.TerraformOperation(held)}} {
		if f.v != "" {
			info = append(info, fmt.Sprintf("%s %q", f.name, f.v))
		}
	}
	if len(info) == 0 {
		return ""
	}
	return "; Terraform's lock info: " + strings.Join(info, ", ")
}

// runsAhead says "1 other run was" or "n other runs were".
func runsAhead(n int) string {
	if n == 1 {
		return "1 other run was"
	}
	return fmt.Sprintf("%d other runs were", n)
}

// guardRemedy says what to do when the run's guard cannot be used.
const guardRemedy = "The run's guard process (the provider binary itself, logging next to its socket) holds the " +
	"lease for the whole run. If it cannot run here, hold the lock around the whole command with the CLI " +
	"(`s3lock run NAME -- terraform apply`: this lease then uses the CLI's), or give the lease " +
	"scope = \"phase\" (" + phaseCost + ")."

// phaseCost is what a lease per phase costs, for the diagnostics that
// offer one.
const phaseCost = "plan and apply then each take the lock on their own, and another run can take it between them"

// checkLine is one check of a Report for people: `put (s3:PutObject): denied:
// Access Denied`.
func checkLine(c storecheck.Check) string {
	line := c.Name
	if c.Permission != "" {
		line += " (" + c.Permission + ")"
	}
	line += ": " + string(c.Status)
	if c.Detail != "" {
		line += ": " + c.Detail
	}
	return line
}

// stateWhere names a workspace's state and its lock.
func stateWhere(s *tfstate.Store, ws string) string {
	if ws == "" {
		return fmt.Sprintf("The states in bucket %q", s.Bucket())
	}
	return fmt.Sprintf("The state of workspace %q (s3://%s/%s; its lock: s3://%s/%s/*)", ws, s.Bucket(), s.Key(ws),
		s.Bucket(), s.LockName(ws))
}

// errNotConfigured is reported when an operation runs before Configure.
var errNotConfigured = errors.New("the s3lock provider has not been configured; this is a bug in the provider, please report it")

// objectSettingsReason is the rule an object setting broke, without the
// error's package prefix.
func objectSettingsReason(err error) string {
	msg := err.Error()
	for _, prefix := range []string{s3lock.ErrInvalidConfig.Error() + ": ", awsclient.ErrInvalidOptions.Error() + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg + "."
}

// epochObjects names the keys of a lock for diagnostics.
func epochObjects(bucket, name string) string {
	return fmt.Sprintf("s3://%s/%s/lock-*.json", bucket, name)
}

// lockErrorDetail explains a failed operation on a lock: which lock, which
// bucket and keys, the error, and what to do about it.
func lockErrorDetail(l leaseRef, err error) string {
	return fmt.Sprintf("%s: %v", lockWhere(l), err) + hintSuffix(l.bucket, l.name+"/*", err)
}

// lockWhere names a lock, its bucket and the key concerned: the lease's
// epoch object (its slot's, for a slot lease), or all the lock's epochs.
func lockWhere(l leaseRef) string {
	where, slot := epochObjects(l.bucket, l.name), ""
	if l.epoch > 0 {
		where = fmt.Sprintf("s3://%s/%s", l.bucket, l.token().Key())
	}
	if l.slot > 0 {
		slot = fmt.Sprintf(", slot %d", l.slot)
	}
	return fmt.Sprintf("Lock %q in bucket %q%s (%s)", l.name, l.bucket, slot, where)
}

// hintSuffix is hintFor as a paragraph to append, or "".
func hintSuffix(bucket, objects string, err error) string {
	if h := hintFor(bucket, objects, err); h != "" {
		return "\n\n" + h
	}
	return ""
}

// hintFor says what to do about err, beyond the hint the SDK's own error
// already gives; "" when there is nothing to add. objects names the keys
// concerned, e.g. "deploy/prod/*".
func hintFor(bucket, objects string, err error) string {
	var held *s3lock.HeldError
	switch {
	case errors.As(err, &held):
		return heldHint(held, "")
	case errors.Is(err, s3lock.ErrHeld):
		return heldHint(nil, "")
	case errors.Is(err, s3lock.ErrAccessDenied):
		return fmt.Sprintf("The error above says whether the store refused the credentials (no credentials, an "+
			"unknown access key, a wrong secret key, an expired session token) or a permission. Check the provider's "+
			"credentials (access_key and secret_key, profile, assume_role, or the AWS environment), and that they "+
			"allow s3:ListBucket on bucket %q and s3:GetObject, s3:PutObject and s3:DeleteObject on %s.", bucket, objects)
	case errors.Is(err, s3lock.ErrUnavailable):
		return "Check the provider's endpoints.s3, region and the network. Each request was retried " +
			"max_retries times before giving up."
	case errors.Is(err, s3lock.ErrConditionalWritesUnsupported):
		return "This store does not enforce S3 conditional writes (If-None-Match, If-Match), so s3lock cannot " +
			"provide mutual exclusion on it: use a store that does (AWS S3, MinIO, versitygw, ...)."
	case errors.Is(err, s3lock.ErrUnorderedListing):
		return "This store does not list keys in order, so s3lock could miss a lock's holder on it: use a general " +
			"purpose bucket, an S3 directory bucket (named BASE--ZONE--x-s3, whose listings s3lock reads whole), " +
			"or a store that passes s3lock verify."
	case errors.Is(err, s3lock.ErrCorruptLease):
		return "An object in the lock's key prefix is not an s3lock lease; remove it or use another lock name."
	case errors.Is(err, s3lock.ErrNameCollision):
		return "An object sits at the lock's name or at a parent path of it. Some stores cannot keep a lock's " +
			"objects there, or hide them from listings: name the lock apart from the objects it guards (for " +
			"example \"locks/deploy\" rather than \"deploy\"), or remove that object."
	}
	return ""
}

// describeCurrent says who holds the lock now, for a diagnostic about a lost
// lease, from what Client.Current returned (st, err); "" when the store
// could not tell.
func describeCurrent(bucket string, st s3lock.State, err error) string {
	if err != nil {
		return ""
	}
	if st.Slots > 1 {
		return describeHolders(bucket, st)
	}
	switch {
	case st.Pending:
		return fmt.Sprintf(" The lock is now %s; a writer, %q, waits for them at epoch %d (s3://%s/%s).",
			sharedHolders(len(st.Holders), firstHolder(st)), st.Holder, st.Epoch, bucket, st.Key)
	case st.Shared && st.Held:
		return fmt.Sprintf(" The lock is now %s.", sharedHolders(len(st.Holders), firstHolder(st)))
	}
	switch st.Phase() {
	case s3lock.PhaseFree:
		return " The lock has no epochs now."
	case s3lock.PhaseHeld:
		return fmt.Sprintf(" The lock is now held by %q at epoch %d (s3://%s/%s).", st.Holder, st.Epoch, bucket, st.Key)
	case s3lock.PhaseReleased:
		if st.ReleasedBy != "" {
			return fmt.Sprintf(" Its newest epoch, %d, was force-released by %q.", st.Epoch, st.ReleasedBy)
		}
		return fmt.Sprintf(" Its newest epoch, %d, was released.", st.Epoch)
	}
	return fmt.Sprintf(" Its newest epoch, %d, lapsed.", st.Epoch)
}

// describeHolders is describeCurrent of a slot lock: which of its slots are
// held, by whom, at which epoch.
func describeHolders(bucket string, st s3lock.State) string {
	if len(st.Holders) == 0 {
		return fmt.Sprintf(" The lock admits %d holders; none of its slots is held now.", st.Slots)
	}
	held := make([]string, len(st.Holders))
	for i, h := range st.Holders {
		held[i] = fmt.Sprintf("slot %d by %q at epoch %d (s3://%s/%s)", h.Slot, h.Holder, h.Epoch, bucket, h.Key)
	}
	are := "are"
	if len(st.Holders) == 1 {
		are = "is"
	}
	return fmt.Sprintf(" The lock admits %d holders; %d of its slots %s held now: %s.", st.Slots, len(st.Holders), are,
		strings.Join(held, ", "))
}

// sharedHolders says "held by n shared holders, e.g. "x"" (one: "held by
// one shared holder, "x""); example is one of them, "" when not known.
func sharedHolders(n int, example string) string {
	switch {
	case n == 1 && example != "":
		return fmt.Sprintf("held by one shared holder, %q", example)
	case n == 1:
		return "held by one shared holder"
	case example != "":
		return fmt.Sprintf("held by %d shared holders, e.g. %q", n, example)
	}
	return fmt.Sprintf("held by %d shared holders", n)
}

// firstHolder is the holder of a shared lock's first share, "" without one.
func firstHolder(st s3lock.State) string {
	if len(st.Holders) == 0 {
		return ""
	}
	return st.Holders[0].Holder
}

// describeLock describes the lock an attribute belongs to, from its bucket
// and name when known: ` (lock "x" in bucket "y")`, or "".
func describeLock(bucket, name types.String) string {
	known := func(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }
	switch {
	case known(bucket) && known(name):
		return fmt.Sprintf(" (lock %q in bucket %q)", name.ValueString(), bucket.ValueString())
	case known(bucket):
		return fmt.Sprintf(" (bucket %q)", bucket.ValueString())
	case known(name):
		return fmt.Sprintf(" (lock %q)", name.ValueString())
	}
	return ""
}

// quotedList writes names quoted, separated by commas.
func quotedList(names []string) string {
	q := make([]string, 0, len(names))
	for _, n := range names {
		q = append(q, strconv.Quote(n))
	}
	return strings.Join(q, ", ")
}
