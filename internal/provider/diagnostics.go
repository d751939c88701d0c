package provider

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Every diagnostic the provider reports is built here, one constructor per
// situation, so that one situation has one wording. A diagnostic about a
// lock names the lock, its bucket and keys, the cause (the SDK's error) and
// what to do about it.

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

// runLeaseUnknown is a run-long lease whose state the run's guard could not
// report: it may have been lost.
func runLeaseUnknown(summary string, l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(summary, lockErrorDetail(l, err)+"\n\nThe lease may have been lost. "+notExclusive)
}

// inheritedNotCurrent is a lease inherited from `s3lock run` that is no
// longer the lock's current, held epoch.
func inheritedNotCurrent(l leaseRef, st s3lock.State) diag.Diagnostic {
	return leaseLost(diag.SeverityError, l, fmt.Errorf("this run runs under `s3lock run`, whose lease is epoch %d "+
		"(%s), but the lock is now at epoch %d (%s)", l.epoch, runenv.Epoch, st.Epoch, st.Phase()), "", "")
}

// inheritedSlotsMismatch is a lease inherited from `s3lock run` that holds
// another number of slots than the ephemeral lease asks for (want): the
// run's lease is used only as what the configuration asks for.
func inheritedSlotsMismatch(in inheritedLease, want int) diag.Diagnostic {
	source := fmt.Sprintf("This run runs under `s3lock run --slots %d`, which holds slot %d of it (%s, %s).",
		in.Slots, in.Slot, runenv.Slots, runenv.Slot)
	if in.Slots <= 1 {
		source = fmt.Sprintf("This run runs under `s3lock run`, which holds it as a mutex (%s=1).", runenv.Slots)
	}
	return slotsMismatch(in.ref(), in.Slots, want, source)
}

// inheritedSlotLost is a slot lease inherited from `s3lock run` (l.slot > 0)
// that is no longer held; err says why (a *s3lock.LeaseLostError).
func inheritedSlotLost(l leaseRef, err error) diag.Diagnostic {
	return leaseLost(diag.SeverityError, l, fmt.Errorf("this run runs under `s3lock run`, whose lease is slot %d "+
		"at epoch %d (%s, %s), and it is no longer held: %w", l.slot, l.epoch, runenv.Slot, runenv.Epoch, err), "", "")
}

// inheritedCheckFailed is a lease inherited from `s3lock run` that could not
// be checked.
func inheritedCheckFailed(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Could not check the lease of s3lock run", lockErrorDetail(l, err))
}

// runSlotsMismatch is an ephemeral lease that asks for want slots of a lock
// the run holds already (another block of the run took it) with another
// number of slots: the run's blocks share its one lease.
func runSlotsMismatch(l leaseRef, held s3lock.Token, want int) diag.Diagnostic {
	return slotsMismatch(l, leaseSlots(held), want, fmt.Sprintf("This run holds it already (epoch %d), through "+
		"another ephemeral s3lock_lease block on the same lock, and the blocks of a run share its one lease.", held.Epoch))
}

// guardRemedy says what to do when the run's guard cannot be used.
const guardRemedy = "The run's guard process (the provider binary itself, logging next to its socket) holds the " +
	"lease for the whole run. If it cannot run here, hold the lock around the whole command with the CLI " +
	"(`s3lock run NAME -- terraform apply`: this lease then uses the CLI's), or give the lease " +
	"scope = \"phase\" (" + phaseCost + ")."

// phaseCost is what a lease per phase costs, for the diagnostics that
// offer one.
const phaseCost = "plan and apply then each take the lock on their own, and another run can take it between them"

// wholeRunUnavailable is an ephemeral lease that asks for the whole run
// (scope = "run", the default) where the provider cannot hold one: it fails
// rather than silently holding one lease per phase. cause says why
// (runguard's reasons); the remedy depends on it.
func wholeRunUnavailable(l leaseRef, cause error) diag.Diagnostic {
	var remedy string
	switch {
	case errors.Is(cause, runguard.ErrNotTerraform):
		remedy = "Run terraform (or tofu) as usual: it starts the provider, and the provider follows its run. " +
			"A debugger or a test harness that serves the provider itself cannot be followed: there, give the " +
			"lease scope = \"phase\"."
	case errors.Is(cause, runguard.ErrTurnedOff):
		remedy = "Remove " + runguard.TurnOffEnv + " from terraform's environment, or give the lease scope = \"phase\" " +
			"if a lease per phase is what you want."
	case errors.Is(cause, runguard.ErrUnsupported) && (runtime.GOOS == "linux" || runtime.GOOS == "darwin"):
		remedy = "This system hides what the provider reads to follow the terraform process (on Linux: /proc). " +
			"Hold the lock around the whole command with the CLI instead, `s3lock run NAME -- terraform apply` " +
			"(this lease then uses the CLI's lease), or give the lease scope = \"phase\"."
	case errors.Is(cause, runguard.ErrUnsupported):
		remedy = "Run terraform on Linux or macOS (on Windows: in WSL), or hold the lock around the whole command " +
			"with the CLI, which runs on Windows too: `s3lock run NAME -- terraform apply` (this lease then uses the " +
			"CLI's lease), or give the lease scope = \"phase\"."
	case errors.Is(cause, runguard.ErrDirUnusable):
		remedy = "Make that directory yours with mode 0700, or point XDG_RUNTIME_DIR or TMPDIR (in terraform's " +
			"environment) at a directory of your own; or give the lease scope = \"phase\"."
	default:
		remedy = "Hold the lock around the whole command with the CLI instead, `s3lock run NAME -- terraform apply` " +
			"(this lease then uses the CLI's lease), or give the lease scope = \"phase\"."
	}
	return diag.NewErrorDiagnostic("Cannot hold lock for the whole run",
		fmt.Sprintf("Lock %q in bucket %q: this ephemeral s3lock_lease asks for the whole run (scope = \"run\", "+
			"the default), so that no other run can take the lock between this run's plan and its apply, but "+
			"the provider cannot hold a lease for the whole run here: %v.\n\n%s With scope = \"phase\", %s.",
			l.name, l.bucket, cause, remedy, phaseCost))
}

// runLeaseLapsesAfterRun warns that a whole-run lease cannot be released
// when terraform exits, because the guard ends with it (why): it lapses.
func runLeaseLapsesAfterRun(l leaseRef, dur time.Duration, why string) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Lock cannot be released reliably when this run ends",
		fmt.Sprintf("Lock %q in bucket %q (epoch %d) is held for the whole run, but %s. When that init process "+
			"exits, the kernel ends every other process of the container at once, the provider's run guard "+
			"included, which then cannot be relied on to release the lease: it lapses up to lease_duration (%s) "+
			"after the run ends, and the next run waits until then. To release it at once, run terraform under a process that "+
			"outlives it: `s3lock run NAME -- terraform apply` as the entrypoint (this lease then uses the CLI's "+
			"lease), or a shell that waits a moment after terraform, "+
			"`sh -c 'terraform apply -auto-approve; s=$?; sleep 2; exit $s'` (docker run --init does not help: its "+
			"init exits with terraform). Or shorten lease_duration.",
			l.name, l.bucket, l.epoch, why, formatDuration(dur)))
}

// guardUnreachable is a run's guard that did not answer.
func guardUnreachable(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Could not reach the run's lock guard", lockErrorDetail(l, err)+"\n\n"+guardRemedy)
}

// guardRefused is a lease acquired for the run that the run's guard did not
// take; releaseErr says why it could not be released either (nil: it was).
func guardRefused(l leaseRef, err, releaseErr error) diag.Diagnostic {
	detail := lockErrorDetail(l, fmt.Errorf("handing the lease to the run's guard: %w", err))
	if releaseErr != nil {
		detail += fmt.Sprintf("\n\nThe lease could not be released either (%v); it lapses after its lease_duration.", releaseErr)
	}
	return diag.NewErrorDiagnostic("Could not hold lock for the run", detail+"\n\n"+guardRemedy)
}

// leaseTooShortForRun is a lease_duration below what the run's guard needs.
func leaseTooShortForRun(l leaseRef, dur, minimum time.Duration) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("lease_duration"), "Lease too short for a whole run",
		fmt.Sprintf("Lock %q in bucket %q: lease_duration %s is shorter than %s. The lease is held for the whole "+
			"Terraform run by the run's guard process, which takes it over from the phase that acquired it "+
			"(reading it back costs some of it, as the store's clock may lag); set lease_duration to %s or more "+
			"(or ask for a lease per phase with scope = \"phase\": "+phaseCost+").",
			l.name, l.bucket, formatDuration(dur), formatDuration(minimum), formatDuration(minimum)))
}

// importRefused is an import of an epoch that cannot be adopted; current
// says who holds the lock now (describeCurrent).
func importRefused(l leaseRef, err error, current string) diag.Diagnostic {
	detail := lockErrorDetail(l, err)
	var marker *s3lock.SlotsError
	switch {
	case errors.Is(err, s3lock.ErrLeaseLost):
		format := importIDFormat
		if l.slot > 0 {
			format = importSlotIDFormat
		}
		detail += fmt.Sprintf("\n\nOnly the current epoch, while it is held, can be imported (ID format %q).%s",
			format, current)
	case errors.Is(err, s3lock.ErrSlotsMismatch) && l.slot > 0:
		detail += fmt.Sprintf("\n\nThe import ID names slot %d of lock %q, which has no such slot.%s The lease of a "+
			"lock that admits one holder is imported by %q; that of one slot of a lock that admits several, by %q.",
			l.slot, l.name, current, importIDFormat, importSlotIDFormat)
	case errors.As(err, &marker):
		// The SDK's error speaks to an acquirer; an import is not one.
		detail = fmt.Sprintf("%s: epoch %d is the marker of a lock that admits %d holders, each holding one of its "+
			"slots, not a lease.%s Import the lease of one slot by %q, e.g. \"%s\" for epoch 7 of slot 2; the "+
			"s3lock_lease data source lists the held slots in holders.", lockWhere(l), l.epoch, marker.Slots, current,
			importSlotIDFormat, leaseID(l.bucket, l.name, 2, 7))
	}
	return diag.NewErrorDiagnostic("Cannot import lease", detail)
}

// invalidImportID is an import ID that does not parse.
func invalidImportID(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid import ID", fmt.Sprintf("%v.\n\nThe import ID of an s3lock_lease is %q, "+
		"e.g. \"my-locks/deploy/prod/42\": the bucket comes before the first slash and the epoch after the "+
		"last one; the lock name (which may contain slashes) is in between. The lease of one slot of a lock that "+
		"admits several holders (slots) is %q, e.g. \"my-locks/ci/runners/lock-slots/2/7\" for epoch 7 of "+
		"slot 2, as in the key of its epoch object.", err, importIDFormat, importSlotIDFormat))
}

// invalidImportIdentity is an import block identity that does not name a
// lease.
func invalidImportIdentity(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid import identity", fmt.Sprintf("%s.\n\nThe identity of an s3lock_lease "+
		"is the lease's bucket, lock name and epoch, e.g. identity = { bucket = \"my-locks\", name = \"deploy/prod\", "+
		"epoch = 42 } (the import ID %q in parts), and, for the lease of one slot of a lock that admits several "+
		"holders, its slot: identity = { bucket = \"my-locks\", name = \"ci/runners\", slot = 2, epoch = 7 }.",
		strings.TrimPrefix(err.Error(), "s3lock: "), importIDFormat))
}

// unreadableToken is a lease token in private state that does not parse.
func unreadableToken(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unreadable lease token", "The lease token kept in the resource's private state "+
		"cannot be read: "+err.Error()+". Remove the resource from state (terraform state rm) and import the lease again.")
}

// missingToken is an ephemeral lease whose private data Terraform did not
// pass back.
func missingToken() diag.Diagnostic {
	return diag.NewErrorDiagnostic("Missing lease token", "Terraform did not pass back the lease token that Open "+
		"stored, so the lease cannot be renewed or released; it will lapse after its lease_duration. "+
		"This is a bug in the provider or in Terraform, please report it.")
}

// durationNotParsed is a duration that reached an operation without its
// validator (a bug): err names the attribute.
func durationNotParsed(attr path.Path, l leaseRef, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(attr, "Invalid duration", lockErrorDetail(l, err))
}

// renewBeforeTooLong is a renew_before that every plan would find due.
func renewBeforeTooLong(raw string, window, dur time.Duration, lock string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("renew_before"), "renew_before too long",
		fmt.Sprintf("renew_before = %q is not shorter than the time a renewed lease is trusted (%s of the "+
			"lease_duration %s)%s: every plan would propose a renewal. Choose a renew_before shorter than %s.",
			raw, formatDuration(window), formatDuration(dur), lock, formatDuration(window)))
}

// listFailed is a listing of the locks under a prefix that failed.
func listFailed(bucket, prefix string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Could not list locks",
		fmt.Sprintf("Locks under prefix %q in bucket %q (s3://%s/%s*): %v%s", prefix, bucket, bucket, prefix, err,
			hintSuffix(bucket, prefix+"*", err)))
}

// unreadableWaiter is a ticket in a lock's line that is not a ticket: it is
// listed without a holder.
func unreadableWaiter(bucket, name string, w s3lock.Waiter) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Unreadable waiter",
		fmt.Sprintf("Lock %q in bucket %q: the waiter at position %d (s3://%s/%s) is listed without a holder: %v",
			name, bucket, w.Position, bucket, w.Key, w.Err))
}

// unreadableLock is a listed lock whose newest epoch object is not a lease.
func unreadableLock(bucket string, st s3lock.State) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Unreadable lock",
		fmt.Sprintf("Lock %q in bucket %q is listed as not held: %v", st.Name, bucket, st.Err))
}

// Actions.

// actionArgumentNull is a required argument of an action that is null when
// the action is invoked, such as a variable nobody set: Terraform passes it
// on without complaint.
func actionArgumentNull(action, attr string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root(attr), "Missing "+attr, fmt.Sprintf("The %s action needs %s, "+
		"but it is null. If it comes from a variable, set the variable when invoking the action, e.g. "+
		"terraform apply -invoke=action.%s.NAME -var NAME=VALUE.", action, attr, action))
}

// forceReleaseFailed is an s3lock_force_release action whose release of
// epoch l.epoch (of slot l.slot, when l.slot > 0) failed; current says who
// holds the lock now (describeCurrent, may be "").
func forceReleaseFailed(l leaseRef, err error, current string) diag.Diagnostic {
	what := fmt.Sprintf("epoch %d", l.epoch)
	if l.slot > 0 {
		what = fmt.Sprintf("epoch %d in its slot %d", l.epoch, l.slot)
	}
	detail := lockErrorDetail(l, err)
	if errors.Is(err, s3lock.ErrHeld) && l.slot == 0 {
		// The SDK refuses to release the marker of a slot lock while any of
		// its slots is held: that is all there is to say, not "someone else
		// holds the lock".
		return diag.NewErrorDiagnostic("Could not force-release lease", fmt.Sprintf("%s: %v\n\nEpoch %d is the "+
			"marker of a lock that admits several holders: it is released only once none of its slots is held, so "+
			"nothing was changed.%s Release the held slots first (this action with slot, once per held slot; the "+
			"s3lock_lease data source lists them in holders), or wait until their holders release them.",
			lockWhere(l), err, l.epoch, current))
	}
	if errors.Is(err, s3lock.ErrNoSuchEpoch) {
		detail += fmt.Sprintf("\n\nThe action releases the one epoch it is given and no other, and lock %q has no "+
			"%s: nothing was changed.%s Read the lock's current epochs with the s3lock_lease data source or "+
			"`s3lock status %s`.", l.name, what, current, l.name)
	}
	return diag.NewErrorDiagnostic("Could not force-release lease", detail)
}

// storeCheckFailed is an s3lock_verify action whose checks did not all pass.
func storeCheckFailed(rep s3lock.Report) diag.Diagnostic {
	var b strings.Builder
	failed, conditional, denied := 0, false, false
	for _, c := range rep.Checks {
		if c.Status == s3lock.CheckOK {
			continue
		}
		failed++
		conditional = conditional || c.Status == s3lock.CheckFailed
		denied = denied || c.Status == s3lock.CheckDenied
		fmt.Fprintf(&b, "\n  - %s", checkLine(c))
	}
	detail := fmt.Sprintf("Bucket %q (probes under s3://%s/%s): %d of %d checks did not pass:%s",
		rep.Bucket, rep.Bucket, rep.ProbePrefix, failed, len(rep.Checks), b.String())
	if conditional {
		detail += "\n\nThis store does not enforce S3 conditional writes (If-None-Match, If-Match), so s3lock cannot " +
			"provide mutual exclusion on it: use a store that does (AWS S3, MinIO, versitygw, ...)."
	}
	if denied {
		detail += fmt.Sprintf("\n\nThe provider's credentials lack a permission that s3lock needs: allow s3:ListBucket "+
			"on bucket %q and s3:GetObject, s3:PutObject and s3:DeleteObject on the keys under the lock prefix "+
			"(s3://%s/%s* for the probes).", rep.Bucket, rep.Bucket, rep.ProbePrefix)
	}
	return diag.NewErrorDiagnostic("Store check failed", detail)
}

// checkLine is one check of a Report for people: `put (s3:PutObject): denied:
// Access Denied`.
func checkLine(c s3lock.Check) string {
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

// storeCheckInterrupted is an s3lock_verify action that did not finish.
func storeCheckInterrupted(bucket string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Store check interrupted", fmt.Sprintf("The checks of bucket %q did not finish: "+
		"%v. Invoke the action again.", bucket, err))
}

// The provider's own configuration.

// errNotConfigured is reported when an operation runs before Configure.
var errNotConfigured = errors.New("the s3lock provider has not been configured; this is a bug in the provider, please report it")

// notConfigured is an operation that ran before Configure.
func notConfigured() diag.Diagnostic {
	return diag.NewErrorDiagnostic("Provider not configured", errNotConfigured.Error())
}

// unexpectedProviderData is provider data of the wrong type (factoryFrom).
func unexpectedProviderData(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Unexpected provider data", err.Error())
}

// invalidClientSettings is an s3lock client that could not be made for a
// bucket.
func invalidClientSettings(bucket string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid lock settings", fmt.Sprintf("The s3lock client for bucket %q cannot be "+
		"made: %v", bucket, err))
}

// settingUnknown is a provider setting not known when Terraform configures
// the provider.
func settingUnknown(p path.Path) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Provider setting not known yet",
		fmt.Sprintf("The s3lock provider cannot be configured while %s is unknown: it must be known when "+
			"Terraform plans. Set it from a variable or a value that does not depend on a resource.", p))
}

// noRegion is an AWS configuration without a region.
func noRegion() diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("region"), "No AWS region",
		"The s3lock provider needs a region to sign its requests: set region in the provider block, "+
			"or AWS_REGION in the environment. (With a custom endpoints.s3 it defaults to us-east-1.)")
}

// invalidAWSConfig is an AWS configuration that could not be loaded.
func invalidAWSConfig(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid AWS configuration",
		"The s3lock provider could not load its AWS configuration: "+err.Error())
}

// invalidAWSCredentials is credentials that STS did not confirm.
func invalidAWSCredentials(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid AWS credentials",
		"The s3lock provider could not confirm its credentials with STS GetCallerIdentity: "+err.Error()+
			"\n\nFor an S3-compatible store without STS, set skip_credentials_validation = true.")
}

// invalidObjectSettings is object settings (encryption, ACL) that awsclient
// or the SDK refused as a whole, such as a KMS key without encrypt, or
// SSE-C with encrypt. The error never contains the customer key.
func invalidObjectSettings(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid encryption or ACL settings", objectSettingsReason(err)+
		"\n\nIn the provider block, encrypt = true is SSE-S3, or SSE-KMS with kms_key_id; sse_customer_key "+
		"(or "+envSSECustomerKey+") is SSE-C and excludes both; acl is a canned ACL.")
}

// Attribute validators.

// invalidSetting is one provider setting that an awsclient or SDK rule
// refused: an object setting (an SSE-C key that is not the base64 of 32
// bytes, an unknown ACL; the error never contains the value) or a
// connection setting (an ARN, a session policy, a proxy URL, whose password
// the error hides, a no_proxy list).
func invalidSetting(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid "+p.String(), objectSettingsReason(err))
}

// objectSettingsReason is the rule an object setting broke, without the
// error's package prefix.
func objectSettingsReason(err error) string {
	msg := err.Error()
	for _, prefix := range []string{s3lock.ErrInvalidConfig.Error() + ": ", awsclient.ErrInvalidOptions.Error() + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg + "."
}

// invalidBucket is a bucket name s3lock.ValidateBucket refused.
func invalidBucket(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid bucket name", strings.TrimPrefix(err.Error(), "s3lock: "))
}

// invalidHolder is a holder identity s3lock.ValidateHolder refused.
func invalidHolder(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid holder", err.Error())
}

// invalidOrder is an order s3lock.ParseOrder refused.
func invalidOrder(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid order", strings.TrimPrefix(err.Error(), "s3lock: ")+
		". Pick \"newest\" for deploys of successive commits (an older commit must not deploy after a newer "+
		"one), \"fifo\" for changes that must apply in the order they were queued (migrations), \"none\" to "+
		"race for the lock as waiters without order do.")
}

// invalidEndpoint is an endpoint that is not an http or https URL.
func invalidEndpoint(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid endpoint", err.Error()+".")
}

// invalidLockName is a lock name s3lock.ValidateName refused; where names
// the bucket (" for bucket \"b\"") when known.
func invalidLockName(p path.Path, name, where, reason string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid lock name",
		fmt.Sprintf("Lock name %q%s is invalid: %s. A lock name is a key path inside the bucket: segments of "+
			"letters, digits and -_.=+@,:!~ separated by single slashes, e.g. \"deploy/prod\".", name, where, reason))
}

// invalidPrefix is a prefix s3lock.ValidatePrefix refused.
func invalidPrefix(p path.Path, prefix, reason string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid prefix",
		fmt.Sprintf("Prefix %q is invalid: %s. A prefix is the beginning of a lock name, e.g. \"deploy/\", "+
			"or empty for every lock.", prefix, reason))
}

// notADuration is a duration attribute that does not parse; lock is
// lockContext's description of the lock.
func notADuration(p path.Path, raw, lock string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid duration",
		fmt.Sprintf("%s = %q%s is not a duration: write a number with a unit, such as \"90s\", \"5m\" or \"1h30m\" "+
			"(units: ms, s, m, h).", p, raw, lock))
}

// durationOutOfRange is a duration attribute outside [lo, hi]; zero says
// that "0s" is accepted too.
func durationOutOfRange(p path.Path, raw, lock string, lo, hi time.Duration, zero bool) diag.Diagnostic {
	orZero := ""
	if zero {
		orZero = ` (or "0s")`
	}
	return diag.NewAttributeErrorDiagnostic(p, "Duration out of range", fmt.Sprintf("%s = %q%s is outside the allowed range [%s, %s]%s.",
		p, raw, lock, formatDuration(lo), formatDuration(hi), orZero))
}

// Details shared by the diagnostics above.

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
	switch {
	case l.epoch > 0 && l.slot > 0:
		where = fmt.Sprintf("s3://%s/%s", l.bucket, s3lock.SlotKey(l.name, l.slot, l.epoch))
	case l.epoch > 0:
		where = fmt.Sprintf("s3://%s/%s", l.bucket, s3lock.Key(l.name, l.epoch))
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
	case errors.As(err, &held) && held.Slots > 1:
		return fmt.Sprintf("All %d slots of the lock are held by others, or (with order = \"fifo\" or \"newest\") "+
			"others queued for a slot first. Wait for a slot to free (raise the wait time: timeouts.create or "+
			"wait_timeout), or, if a holder is gone for good, force-release its slot's epoch (the "+
			"s3lock_force_release action with slot, or `s3lock force-release --slot`).", held.Slots)
	case errors.Is(err, s3lock.ErrHeld):
		return "Someone else holds the lock, or (with order = \"fifo\" or \"newest\") others queued for it first. " +
			"Wait for them (raise the wait time: timeouts.create or wait_timeout), or, if the holder is gone for " +
			"good, force-release its epoch with the s3lock CLI."
	case errors.Is(err, s3lock.ErrAccessDenied):
		return fmt.Sprintf("Check the provider's credentials (access_key and secret_key, profile, assume_role, or the "+
			"AWS environment) and that they allow s3:ListBucket on bucket %q and s3:GetObject, s3:PutObject and "+
			"s3:DeleteObject on %s.", bucket, objects)
	case errors.Is(err, s3lock.ErrUnavailable):
		return "Check the provider's endpoints.s3, region and the network. Each request was retried " +
			"max_retries times before giving up."
	case errors.Is(err, s3lock.ErrConditionalWritesUnsupported):
		return "This store does not enforce S3 conditional writes, so it cannot provide mutual exclusion."
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
// lease; "" when the store cannot tell.
func describeCurrent(ctx context.Context, c *s3lock.Client, name string) string {
	st, err := c.Current(ctx, name)
	if err != nil {
		return ""
	}
	if st.Slots > 1 {
		return describeHolders(c.Bucket(), st)
	}
	switch st.Phase() {
	case s3lock.PhaseFree:
		return " The lock has no epochs now."
	case s3lock.PhaseHeld:
		return fmt.Sprintf(" The lock is now held by %q at epoch %d (s3://%s/%s).", st.Holder, st.Epoch, c.Bucket(), st.Key)
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
