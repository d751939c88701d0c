package provider

import (
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

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

// lockFailed is an operation on a lock that failed (summary says which,
// e.g. "Could not renew lease"); when the failure is that the lease was
// lost, it is leaseLost with next.
func lockFailed(summary string, l leaseRef, err error, next string) diag.Diagnostic {
	var se *s3lock.SupersededError
	if errors.As(err, &se) {
		return superseded(l, se)
	}
	var mismatch *s3lock.SlotsError
	if errors.As(err, &mismatch) {
		return slotsMismatch(l, mismatch.Slots, mismatch.Want,
			fmt.Sprintf("Its marker, s3://%s/%s, records that.", mismatch.Bucket, mismatch.Key))
	}
	if errors.Is(err, s3lock.ErrLeaseLost) {
		return leaseLost(diag.SeverityError, l, err, "", next)
	}
	return diag.NewErrorDiagnostic(summary, lockErrorDetail(l, err))
}

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

// Summaries of lockFailed, one per operation.
const (
	acquireFailed  = "Could not acquire lock"
	readFailed     = "Could not read lease"
	renewFailed    = "Could not renew lease"
	releaseFailed  = "Could not release lease"
	checkFailed    = "Could not check lease"
	lockReadFailed = "Could not read lock"
)
