package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Every diagnostic the provider reports is built in the diagnostics files,
// one constructor per situation, so that one situation has one wording; they
// only word what they are given and make no request. A diagnostic about a
// lock names the lock, its bucket and keys, the cause (the SDK's error) and
// what to do about it. By subject: this file, a lease lost or a lock that
// could not be had; diagnostics_run.go, a Terraform run's lease (the run
// guard, `s3lock run`'s lease); diagnostics_resource.go, the resource and
// the data sources; diagnostics_action.go, the actions; diagnostics_config.go,
// the provider's configuration and attribute validators; diagnostics_hints.go,
// the details they share (where a lock's objects are, what an error means
// and what to do about it, who holds a lock now).

// leaseRef names a lease, or a lock when epoch is 0, for diagnostics. slot
// is the slot a lease of a slot lock holds (its epoch is the slot's); 0 for
// a mutex's lease.
type leaseRef struct {
	bucket, name string
	epoch        uint64
	slot         int
}

// tokenRef is the leaseRef of a token.
func tokenRef(t s3lock.Token) leaseRef {
	return leaseRef{bucket: t.Bucket, name: t.Name, epoch: t.Epoch, slot: t.Slot}
}

// token is the s3lock.Token that names l's epoch (its slot's, for a slot
// lease) whoever holds it: without a Nonce, and without the lock's number
// of slots, which the SDK reads from the lock's marker. With it, the SDK
// resumes (adopts), looks up or force-releases the epoch, and names its
// object (Token.Key). The SDK refuses it from a client of another bucket.
func (l leaseRef) token() s3lock.Token {
	return s3lock.Token{Bucket: l.bucket, Name: l.name, Slot: l.slot, Epoch: l.epoch}
}

// notExclusive is the one wording of what a lost lease means for the work
// done under it.
const notExclusive = "Work done under the lease after it was lost may not have been exclusive: check what it " +
	"changed before relying on it."

// leaseLost is the one diagnostic of a lease that ended without this
// provider releasing it (errors.Is(cause, s3lock.ErrLeaseLost), or what the
// run's guard reported): which lease, why, who holds the lock now when known
// (current, from describeCurrent, may be ""), that the work done under it
// may not have been exclusive, and what happens next (next, may be "").
func leaseLost(severity diag.Severity, l leaseRef, cause error, current, next string) diag.Diagnostic {
	detail := lockErrorDetail(l, cause) + current + "\n\n" + notExclusive
	if next != "" {
		detail += " " + next
	}
	if severity == diag.SeverityWarning {
		return diag.NewWarningDiagnostic("Lease lost", detail)
	}
	return diag.NewErrorDiagnostic("Lease lost", detail)
}

// leaseReleasedElsewhere is the warning of a refresh that found the
// resource's lease released through its token by someone else (a pipeline
// step using the CLI, say): nothing was lost, but the resource no longer
// holds the lock.
func leaseReleasedElsewhere(l leaseRef, cause error) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Lease released elsewhere", lockErrorDetail(l, cause)+
		"\n\nIt was released through its token, outside this Terraform configuration. "+lostRemovedFromState)
}

// What happens next to a lost lease, for leaseLost.
const (
	lostRemovedFromState = "Terraform removes it from state; the next apply acquires the lock again with a new epoch."
	lostBeforeRenewal    = "It could not be renewed: the next refresh removes it from state and the next apply " +
		"acquires the lock again."
	lostBeforeRelease = "There was nothing left to release."
)

// superseded is an acquisition with order = "newest" that stood down because
// a newer run queued for the lock with order = "newest" too: it left the line
// without taking the lock, so nothing that waited for the lock ran.
func superseded(l leaseRef, err *s3lock.SupersededError) diag.Diagnostic {
	by := "another run (its holder identity could not be read)"
	if err.By != "" {
		by = fmt.Sprintf("%q", err.By)
	}
	return diag.NewErrorDiagnostic("Superseded by a newer run", lockErrorDetail(l, err)+fmt.Sprintf("\n\n"+
		"A newer run, %s, queued for the lock with order = \"newest\" while this run waited for it, so this "+
		"run stood down: it left the line without taking the lock, and nothing that depends on the lock was "+
		"changed. The newer run takes its place in line. This is what order = \"newest\" is for (of the runs "+
		"waiting, only the newest applies, as for deploys of successive commits); use order = \"fifo\" if "+
		"every run must apply in turn.", by))
}

// slotsMismatch is a lease whose slots differ from the number of holders its
// lock admits (s3lock.ErrSlotsMismatch): admits is that number (1: the lock
// is a mutex), want the lease's slots, and source a sentence that says how
// the provider knows ("Its marker ... records that."). Waiting does not
// help, so the lease fails at once; the remedy is the configuration.
func slotsMismatch(l leaseRef, admits, want int, source string) diag.Diagnostic {
	holders := fmt.Sprintf("admits %d holders", admits)
	if admits <= 1 {
		holders = "admits one holder (it is a mutex)"
	}
	asked := fmt.Sprintf("this lease asks for slots = %d", want)
	if want <= 1 {
		asked = "this lease asks for a mutex (slots = 1, the default)"
	}
	detail := fmt.Sprintf("Lock %q in bucket %q %s, but %s. %s\n\nEvery holder of a lock must ask for the same "+
		"number of slots (Terraform, the s3lock CLI's --slots and the SDK alike): set slots = %d, or use another "+
		"lock name.", l.name, l.bucket, holders, asked, source, admits)
	if admits > 1 {
		detail += " An operator changes the number of holders a lock admits by force-releasing its marker's " +
			"epoch (the lock's epoch in the s3lock_lease data source) with the s3lock_force_release action or " +
			"`s3lock force-release`, once none of its slots is held."
	}
	return diag.NewAttributeErrorDiagnostic(path.Root("slots"), "Lock admits another number of holders", detail)
}

// Summaries of an operation on a lock that failed, one per operation.
const (
	acquireFailed  = "Could not acquire lock"
	readFailed     = "Could not read lease"
	renewFailed    = "Could not renew lease"
	releaseFailed  = "Could not release lease"
	checkFailed    = "Could not check lease"
	lockReadFailed = "Could not read lock"
)

// notAcquired, notRead, notRenewed, notReleased and lockNotRead are an
// operation on a lock that failed for another reason than those with a
// diagnostic of their own (a lost lease is leaseLost; an acquisition's
// other outcomes, acquisitionFailed's): which lock, the error, and what to
// do about it.
func notAcquired(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(acquireFailed, lockErrorDetail(l, err))
}

func notRead(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(readFailed, lockErrorDetail(l, err))
}

func notRenewed(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(renewFailed, lockErrorDetail(l, err))
}

func notReleased(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(releaseFailed, lockErrorDetail(l, err))
}

func lockNotRead(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(lockReadFailed, lockErrorDetail(l, err))
}

// acquisitionFailed is the diagnostic of an acquisition that failed, by
// what the SDK answered: superseded (a *s3lock.SupersededError), a lock
// still held when the wait ran out (a *s3lock.HeldError: who holds it, and
// which setting, waitAttr, raises the wait: `timeouts.create` for the
// resource, `wait_timeout` for the ephemeral resource), slotsMismatch (a
// *s3lock.SlotsError), leaseLost, or notAcquired.
func acquisitionFailed(l leaseRef, err error, waitAttr string) diag.Diagnostic {
	var held *s3lock.HeldError
	var se *s3lock.SupersededError
	var mismatch *s3lock.SlotsError
	switch {
	case errors.As(err, &se):
		return superseded(l, se)
	case errors.As(err, &held):
		return diag.NewErrorDiagnostic(acquireFailed, fmt.Sprintf("%s: %v\n\n%s", lockWhere(l), err, heldHint(held.Slots, waitAttr)))
	case errors.As(err, &mismatch):
		return slotsMismatch(l, mismatch.Slots, mismatch.Want,
			fmt.Sprintf("Its marker, s3://%s/%s, records that.", mismatch.Bucket, mismatch.Key))
	case errors.Is(err, s3lock.ErrLeaseLost):
		return leaseLost(diag.SeverityError, l, err, "", "")
	}
	return notAcquired(l, err)
}

// heldHint says what to do about a lock (of slots slots) that others hold or
// queued for first; waitAttr names the setting that raises the wait, ""
// when no wait was asked for.
func heldHint(slots int, waitAttr string) string {
	wait := ""
	if waitAttr != "" {
		wait = " (raise " + waitAttr + ")"
	}
	if slots > 1 {
		return fmt.Sprintf("All %d slots of the lock are held by others, or (with order = \"fifo\" or \"newest\") "+
			"others queued for a slot first. Wait for a slot to free%s, or, if a holder is gone for good, "+
			"force-release its slot's epoch (the s3lock_force_release action with slot, or `s3lock force-release "+
			"--slot`).", slots, wait)
	}
	return "Someone else holds the lock, or (with order = \"fifo\" or \"newest\") others queued for it first. " +
		"Wait for them" + wait + ", or, if the holder is gone for good, force-release its epoch with the s3lock CLI."
}

// lockWaited is the warning that names, in Terraform's own output, whom an
// acquisition waited for: while it waits, Terraform shows only "Still
// opening..." or "Still creating...", and a provider can add nothing to
// that line. got is the lease it took (its epoch, and slot). wholeRun, for
// an ephemeral lease held for the whole run, says what Terraform's
// "Closing..." of that lease after the plan means: not a release.
func lockWaited(got leaseRef, w lockWait, wholeRun bool) diag.Diagnostic {
	at := fmt.Sprintf("at epoch %d", got.epoch)
	if got.slot > 0 {
		at = fmt.Sprintf("in slot %d %s", got.slot, at)
	}
	detail := fmt.Sprintf("Lock %q in bucket %q: this run waited %s for it. %s It holds the lock now, %s (s3://%s/%s).",
		got.name, got.bucket, tookFor(w.took), waitStory(w), at, got.bucket, got.token().Key())
	if wholeRun {
		detail += " " + runLeaseKept
	}
	return diag.NewWarningDiagnostic(fmt.Sprintf("Waited for lock %q", got.name), detail)
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
	if held.Slots > 1 {
		text = fmt.Sprintf("all %d of its slots were held, the one to run out first, slot %d, by %q (epoch %d, since %s)",
			held.Slots, held.Slot, held.Holder, held.Epoch, formatTime(held.AcquiredAt))
	}
	if held.Ahead > 0 {
		text += fmt.Sprintf(", and %s ahead of this one in line", runsAhead(held.Ahead))
	}
	return fmt.Sprintf("%d/%d", held.Slot, held.Epoch), text
}

// stateOperation is, for a state's lock (whose lease carries Terraform's
// lock info), "; Terraform's lock info: who ..., operation ..."; "" for
// other locks.
func stateOperation(held *s3lock.HeldError) string {
	var info []string
	for _, k := range []struct{ name, key string }{{"who", tfstate.MetaWho}, {"operation", tfstate.MetaOperation}} {
		if v := held.Metadata[k.key]; v != "" {
			info = append(info, fmt.Sprintf("%s %q", k.name, v))
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
