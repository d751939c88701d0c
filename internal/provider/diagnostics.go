package provider

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// Every diagnostic the provider reports is made here, by one constructor
// per diagnostic, named for it, so that one situation has one wording and a
// call site says which diagnostic it raises: resp.Diagnostics.Append(
// leaseLost(...)), as terraform-provider-random's internal/diagnostics
// does. A constructor only words what it is given and makes no request;
// only acquisitionFailed chooses among diagnostics, by what an acquisition
// answered, and leaseLost between its two wordings, by the loss's reason
// (a lease's end at its cap is leaseAtMaxHold). A diagnostic about a lock names the lock, its bucket and keys,
// the cause (the SDK's error) and what to do about it. The wording they
// share (where a lock's objects are, what an error means and what to do
// about it, who holds a lock now, whom a wait waited for) is in
// diagnostics_text.go; the leases they name are leaseRefs (lease_common.go).

// ---- Leases and locks: a lease lost, a lock that could not be had, a wait.

// leaseLost is the one diagnostic of a lease that ended without this
// provider releasing it (errors.Is(cause, s3lock.ErrLeaseLost), or what the
// run's guard reported): which lease, why, who holds the lock now when known
// (current, from describeCurrent, may be ""), that the work done under it
// may not have been exclusive, and what happens next (next, may be ""). A
// lease that ended at its cap (endedAtCap) is worded as leaseAtMaxHold.
func leaseLost(severity diag.Severity, l leaseRef, cause error, current, next string) diag.Diagnostic {
	if endedAtCap(cause) {
		return leaseAtMaxHold(severity, l, cause, current, next)
	}
	detail := lockErrorDetail(l, cause) + current + "\n\n" + notExclusive
	if next != "" {
		detail += " " + next
	}
	return severityDiagnostic(severity, "Lease lost", detail)
}

// leaseAtMaxHold is leaseLost of a lease that reached its cap (max_hold,
// l.maxHold when known): it was not renewed past it, so the work under it
// must have stopped by then; raise max_hold if it needs longer.
func leaseAtMaxHold(severity diag.Severity, l leaseRef, cause error, current, next string) diag.Diagnostic {
	of := ""
	if l.maxHold > 0 {
		of = " of " + formatDuration(l.maxHold)
	}
	detail := lockErrorDetail(l, cause) + current + "\n\n" + fmt.Sprintf("The lease reached its max_hold%s: it is "+
		"not renewed past max_hold after its acquisition, and others may take the lock from then on, so the work "+
		"under it must have stopped by then. If the work needs longer, raise max_hold.", of)
	if next != "" {
		detail += " " + next
	}
	return severityDiagnostic(severity, "Lease reached its max_hold", detail)
}

// severityDiagnostic is a diagnostic of severity: a warning, else an error.
func severityDiagnostic(severity diag.Severity, summary, detail string) diag.Diagnostic {
	if severity == diag.SeverityWarning {
		return diag.NewWarningDiagnostic(summary, detail)
	}
	return diag.NewErrorDiagnostic(summary, detail)
}

// leaseReleasedElsewhere is the warning of a refresh that found the
// resource's lease released through its token by someone else (a pipeline
// step using the CLI, say): nothing was lost, but the resource no longer
// holds the lock.
func leaseReleasedElsewhere(l leaseRef, cause error) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Lease released elsewhere", lockErrorDetail(l, cause)+
		"\n\nIt was released through its token, outside this Terraform configuration. "+lostRemovedFromState)
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

// sharedWithSlots is a lease that asks for mode = "shared" of a slot lock
// (slots > 1): the SDK refuses WithShared with WithSlots, and a plan says
// so before anything is acquired.
func sharedWithSlots(slots int) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root(modeAttr), "mode = \"shared\" does not go with slots",
		fmt.Sprintf("mode = %q and slots = %d cannot go together: a lock is either one that admits several holders, "+
			"each holding one of its slots alone, or one that shared holders hold together. Set mode = %q (the "+
			"default) to hold one of the %d slots, or leave slots at 1 (the default) for a shared lease.",
			modeShared, slots, modeExclusive, slots))
}

// sharedRunForExclusive is an ephemeral lease that asks for an exclusive
// lease of a lock whose lease this run holds shared (source says how:
// under `s3lock run`, or through another block of the run). A shared lease
// does not cover a writer, and taking an exclusive one would wait for the
// run's own share; the remedy is the configuration.
func sharedRunForExclusive(l leaseRef, source string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root(modeAttr), "Lock held shared by this run",
		fmt.Sprintf("%s: this lease asks for an exclusive lease (mode = %q, the default), but %s, and a shared "+
			"lease does not cover a writer: others may hold the lock shared beside it. Taking an exclusive "+
			"lease now would wait for the run's own share until the wait runs out.\n\nSet mode = %q on this lease "+
			"if it only reads what the lock guards, or have the run hold the lock exclusively (an exclusive lease "+
			"covers shared ones).", lockWhere(l), modeExclusive, source, modeShared))
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

// notRead, notRenewed and notReleased work on a lease's token (a Resume or
// Lookup of it): a token whose epoch turns out to be a slot lock's marker
// is a *s3lock.SlotsError, with a diagnostic of its own (slotsMismatch), as
// an acquisition's is.
func notRead(l leaseRef, err error) diag.Diagnostic {
	return tokenOpFailed(readFailed, l, err)
}

func notRenewed(l leaseRef, err error) diag.Diagnostic {
	return tokenOpFailed(renewFailed, l, err)
}

func notReleased(l leaseRef, err error) diag.Diagnostic {
	return tokenOpFailed(releaseFailed, l, err)
}

func tokenOpFailed(summary string, l leaseRef, err error) diag.Diagnostic {
	var mismatch *s3lock.SlotsError
	if errors.As(err, &mismatch) {
		return markerSays(l, mismatch)
	}
	return diag.NewErrorDiagnostic(summary, lockErrorDetail(l, err))
}

// markerSays is slotsMismatch as a slot lock's marker records it.
func markerSays(l leaseRef, m *s3lock.SlotsError) diag.Diagnostic {
	switch {
	case m.Slots == 0:
		return diag.NewAttributeErrorDiagnostic(path.Root("slots"), "Lock has shared holders",
			fmt.Sprintf("Lock %q in bucket %q has shared and exclusive holders (mode = \"shared\" and \"exclusive\"; its epoch "+
				"s3://%s/%s says so), but this lease asks for slots = %d. A lock is either a slot lock or one with shared "+
				"holders: use another lock name for the slot lock.", l.name, l.bucket, m.Bucket, m.Key, m.Want))
	case m.Shared:
		return diag.NewAttributeErrorDiagnostic(path.Root(modeAttr), "Lock is a slot lock",
			fmt.Sprintf("Lock %q in bucket %q admits %d holders (a slot lock: its marker s3://%s/%s says so), but this "+
				"lease asks for mode = \"shared\". A slot lock has no shared holders: take a slot with slots = %d (and mode "+
				"= \"exclusive\"), or use another lock name.", l.name, l.bucket, m.Slots, m.Bucket, m.Key, m.Slots))
	}
	return slotsMismatch(l, m.Slots, m.Want, fmt.Sprintf("Its marker, s3://%s/%s, records that.", m.Bucket, m.Key))
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
		return diag.NewErrorDiagnostic(acquireFailed, fmt.Sprintf("%s: %v\n\n%s", lockWhere(l), err, heldHint(held, waitAttr)))
	case errors.As(err, &mismatch):
		return markerSays(l, mismatch)
	case errors.Is(err, s3lock.ErrLeaseLost):
		return leaseLost(diag.SeverityError, l, err, "", "")
	}
	return notAcquired(l, err)
}

// setAcquisitionFailed is acquisitionFailed of a lock set that could not be
// taken (lockset.Acquire's error: all or none, so nothing is held; it says
// what was taken and released): about the lock the error names (the one
// still held, superseded or of another number of slots), else the set's
// first.
func setAcquisitionFailed(bucket string, names []string, err error, waitAttr string) diag.Diagnostic {
	l := leaseRef{bucket: bucket, name: names[0]}
	var held *s3lock.HeldError
	var se *s3lock.SupersededError
	var mismatch *s3lock.SlotsError
	switch {
	case errors.As(err, &held):
		l.name = held.Name
	case errors.As(err, &se):
		l.name = se.Name
	case errors.As(err, &mismatch):
		l.name = mismatch.Name
	}
	return acquisitionFailed(l, err, waitAttr)
}

// lockWaited is the warning that names, in Terraform's own output, whom an
// acquisition waited for: while it waits, Terraform shows only "Still
// opening..." or "Still creating...", and a provider can add nothing to
// that line. got is the lease it took (its epoch, and slot). wholeRun, for
// an ephemeral lease held for the whole run, says what Terraform's
// "Closing..." of that lease after the plan means: not a release.
func lockWaited(got leaseRef, w lockWait, wholeRun bool) diag.Diagnostic {
	at := fmt.Sprintf("at epoch %d", got.epoch)
	switch {
	case got.slot > 0:
		at = fmt.Sprintf("in slot %d %s", got.slot, at)
	case got.share != "":
		at = fmt.Sprintf("shared, %s", at)
	}
	detail := fmt.Sprintf("Lock %q in bucket %q: this run waited %s for it. %s It holds the lock now, %s (s3://%s/%s).",
		got.name, got.bucket, tookFor(w.took), waitStory(w), at, got.bucket, got.token().Key())
	if wholeRun {
		detail += " " + runLeaseKept
	}
	return diag.NewWarningDiagnostic(fmt.Sprintf("Waited for lock %q", got.name), detail)
}

// ---- A Terraform run's lease: the run guard that holds it across the
// phases, a lease inherited from `s3lock run`, what a run cannot have.

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

// inheritedSlotLost is a slot lease (l.slot > 0) or a share (l.share set)
// inherited from `s3lock run` that is no longer held; err says why (a
// *s3lock.LeaseLostError).
func inheritedSlotLost(l leaseRef, err error) diag.Diagnostic {
	if l.share != "" {
		return leaseLost(diag.SeverityError, l, fmt.Errorf("this run runs under `s3lock run`, whose lease is a share "+
			"of shared epoch %d (%s, %s), and it is no longer held: %w", l.epoch, runenv.Epoch, runenv.Key, err), "", "")
	}
	return leaseLost(diag.SeverityError, l, fmt.Errorf("this run runs under `s3lock run`, whose lease is slot %d "+
		"at epoch %d (%s, %s), and it is no longer held: %w", l.slot, l.epoch, runenv.Slot, runenv.Epoch, err), "", "")
}

// inheritedShared is sharedRunForExclusive of a lock that the enclosing
// `s3lock run` holds shared (l, its share).
func inheritedShared(l leaseRef) diag.Diagnostic {
	return sharedRunForExclusive(l, fmt.Sprintf("this run runs under `s3lock run`, which holds it shared (%s is "+
		"its share's key)", runenv.Key))
}

// inheritedMalformed is an environment of `s3lock run` that names the lock
// (or does not say which) but cannot be read: err names the variable.
func inheritedMalformed(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Cannot use the lease of s3lock run", fmt.Sprintf("This run runs under `s3lock run` "+
		"(%s is set), but its environment is malformed: %v.\n\n%s. The provider does not take the lock anew: under "+
		"`s3lock run`'s own lease that would wait for itself. Check that nothing between `s3lock run` and terraform "+
		"rewrites the S3LOCK_ variables, or unset them to take the lock independently of `s3lock run`.",
		runenv.Epoch, err, lockWhere(l)))
}

// inheritedCheckFailed is a lease inherited from `s3lock run` that could not
// be checked.
func inheritedCheckFailed(l leaseRef, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Could not check the lease of s3lock run", lockErrorDetail(l, err))
}

// inheritedSetPartly is an ephemeral lease of a lock set under `s3lock run`
// whose lease holds some of the set's locks (held) and not the others
// (missing): taking those while the run holds these could wait forever.
func inheritedSetPartly(bucket string, held, missing []string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("names"), "Lock set partly held by s3lock run", fmt.Sprintf(
		"This run runs under `s3lock run`, which holds %s in bucket %q but not %s. The provider uses the "+
			"run's leases only for a set whose every lock the run holds: taking the others now, while the run "+
			"holds its own, would take them out of the one order every lock set keeps (the names sorted), and "+
			"could wait forever for a job that holds one of them and waits for a lock the run holds.\n\n"+
			"Run terraform under `s3lock run` of all of these locks (`s3lock run %s -- terraform ...`), or "+
			"take in this configuration only the locks the run holds.",
		quotedList(held), bucket, quotedList(missing), strings.Join(append(slices.Clone(held), missing...), " ")))
}

// runSetPartlyHeld is an ephemeral lease of a lock set some of whose locks
// (held) this run holds already through another block, and not the others
// (missing): a run's blocks share its leases, so the set would be taken in
// two parts, not all or none in its order.
func runSetPartlyHeld(bucket string, held, missing []string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root("names"), "Lock set partly held by this run", fmt.Sprintf(
		"This run holds %s in bucket %q already, through another ephemeral s3lock_lease block (of this or "+
			"another provider configuration), but not %s. "+
			"The blocks of a run share its leases, and a lock set is taken all or none in one order: taking the "+
			"others now, beside the run's own, could wait forever for a job that holds one of them and waits for "+
			"a lock this run holds.\n\nTake all of these locks in one block (`names`), or make every block that "+
			"takes some of them take the same set, or order the blocks with depends_on, the larger set first.",
		quotedList(held), bucket, quotedList(missing)))
}

// runSlotsMismatch is an ephemeral lease that asks for want slots of a lock
// the run holds already (another block of the run took it) with another
// number of slots: the run's blocks share its one lease.
func runSlotsMismatch(l leaseRef, held s3lock.Token, want int) diag.Diagnostic {
	return slotsMismatch(l, leaseSlots(held), want, fmt.Sprintf("This run holds it already (epoch %d), through "+
		"another ephemeral s3lock_lease block on the same lock, and the blocks of a run share its one lease.", held.Epoch))
}

// runHoldsShared is sharedRunForExclusive of a lock that this run holds
// shared through another block (held).
func runHoldsShared(held leaseRef) diag.Diagnostic {
	return sharedRunForExclusive(held, fmt.Sprintf("this run holds it shared already (shared epoch %d), through "+
		"another ephemeral s3lock_lease block on the same lock with mode = %q, and the blocks of a run share its "+
		"one lease", held.epoch, modeShared))
}

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

// ---- The s3lock_lease resource (import, its token, its durations) and the
// data sources.

// importRefused is an import of an epoch that cannot be adopted; current
// says who holds the lock now (describeCurrent).
func importRefused(l leaseRef, err error, current string) diag.Diagnostic {
	detail := lockErrorDetail(l, err)
	var marker *s3lock.SlotsError
	switch {
	case errors.Is(err, s3lock.ErrLeaseLost):
		format := importIDFormat
		switch {
		case l.share != "":
			format = importSharedIDFormat
		case l.slot > 0:
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
			importSlotIDFormat, leaseRef{bucket: l.bucket, name: l.name, slot: 2, epoch: 7}.id())
	}
	return diag.NewErrorDiagnostic("Cannot import lease", detail)
}

// maxHoldNotLonger is a max_hold that does not outlast lease_duration (raw
// values as written; lease the default when it is not): a lease is held at
// least one lease_duration, so the SDK refuses such a cap (WithMaxHold).
func maxHoldNotLonger(maxHold, lease, lock string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(path.Root(maxHoldAttr), "max_hold not longer than lease_duration",
		fmt.Sprintf("max_hold = %q must be longer than lease_duration = %q%s: a lease is held at least one "+
			"lease_duration, so a shorter cap could never be kept. Raise max_hold or shorten lease_duration.",
			maxHold, lease, lock))
}

// invalidImportID is an import ID that does not parse.
func invalidImportID(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid import ID", fmt.Sprintf("%v.\n\nThe import ID of an s3lock_lease is %q, "+
		"e.g. \"my-locks/deploy/prod/42\": the bucket comes before the first slash and the epoch after the "+
		"last one; the lock name (which may contain slashes) is in between. The lease of one slot of a lock that "+
		"admits several holders (slots) is %q, e.g. \"my-locks/ci/runners/lock-slots/2/7\" for epoch 7 of "+
		"slot 2, as in the key of its epoch object. A shared lease (mode = \"shared\") is %q, e.g. "+
		"\"my-locks/deploy/prod/lock-shared/42/0123456789abcdef\" for the share 0123456789abcdef of shared epoch 42, "+
		"as in the key of its share.", err, importIDFormat, importSlotIDFormat, importSharedIDFormat))
}

// invalidImportIdentity is an import block identity that does not name a
// lease.
func invalidImportIdentity(err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid import identity", fmt.Sprintf("%s.\n\nThe identity of an s3lock_lease "+
		"is the lease's bucket, lock name and epoch, e.g. identity = { bucket = \"my-locks\", name = \"deploy/prod\", "+
		"epoch = 42 } (the import ID %q in parts), and, for the lease of one slot of a lock that admits several "+
		"holders, its slot: identity = { bucket = \"my-locks\", name = \"ci/runners\", slot = 2, epoch = 7 }; for a "+
		"shared lease, its share: identity = { bucket = \"my-locks\", name = \"deploy/prod\", epoch = 42, share = "+
		"\"0123456789abcdef\" }.", strings.TrimPrefix(err.Error(), "s3lock: "), importIDFormat))
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

// ---- The actions (force-release, verify).

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
func storeCheckFailed(rep storecheck.Report) diag.Diagnostic {
	if rep.NoSuchBucket {
		return diag.NewErrorDiagnostic("Store check failed", fmt.Sprintf("Bucket %q does not exist (NoSuchBucket), so "+
			"no check could run: create it or correct the bucket's name.", rep.Bucket))
	}
	var b strings.Builder
	failed, denied := 0, false
	var hints, unchecked []string
	for _, c := range rep.Checks {
		switch c.Status {
		case storecheck.StatusOK:
			continue
		case storecheck.StatusNotChecked:
			// Not a failure of its own: an earlier one kept it from running.
			unchecked = append(unchecked, c.Name)
			continue
		}
		failed++
		denied = denied || c.Status == storecheck.StatusDenied
		if h := hintFor(rep.Bucket, rep.ProbePrefix+"*", c.Err); c.Status == storecheck.StatusFailed && h != "" && !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
		fmt.Fprintf(&b, "\n  - %s", checkLine(c))
	}
	detail := fmt.Sprintf("Bucket %q (probes under s3://%s/%s): %d of %d checks did not pass:%s",
		rep.Bucket, rep.Bucket, rep.ProbePrefix, failed, len(rep.Checks), b.String())
	if len(unchecked) > 0 {
		detail += fmt.Sprintf("\n\n%d could not run after them: %s.", len(unchecked), strings.Join(unchecked, ", "))
	}
	for _, h := range hints {
		detail += "\n\n" + h
	}
	if denied {
		detail += fmt.Sprintf("\n\nThe provider's credentials lack a permission that s3lock needs: allow s3:ListBucket "+
			"on bucket %q and s3:GetObject, s3:PutObject and s3:DeleteObject on the keys under the lock prefix "+
			"(s3://%s/%s* for the probes).", rep.Bucket, rep.Bucket, rep.ProbePrefix)
	}
	return diag.NewErrorDiagnostic("Store check failed", detail)
}

// storeCheckInterrupted is an s3lock_verify action that did not finish.
func storeCheckInterrupted(bucket string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Store check interrupted", fmt.Sprintf("The checks of bucket %q did not finish: "+
		"%v. Invoke the action again.", bucket, err))
}

// ---- The state store s3lock_s3 (state_store.go): each names the workspace,
// the state's S3 key, its lock, the cause and what to do.

// stateFailed is a state operation that failed on the store.
func stateFailed(summary string, s *tfstate.Store, ws string, err error) diag.Diagnostic {
	objects := s.Key(tfstate.DefaultWorkspace)
	if ws != "" {
		objects = s.Key(ws)
	}
	return diag.NewErrorDiagnostic(summary, fmt.Sprintf("%s: %v", stateWhere(s, ws), err)+hintSuffix(s.Bucket(), objects, err))
}

// stateLockFailed is a lock that could not be had. A held lock shows what
// Terraform's own locks show (ID, operation, who, since when), and the
// lease's epoch and how long it has left.
func stateLockFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	if errors.Is(err, errInterrupted) {
		return diag.NewErrorDiagnostic("Interrupted while waiting for the state lock", fmt.Sprintf("%s: the wait "+
			"for another run's lock was %v; nothing was locked, and this run left the lock's line.", stateWhere(s, ws), err))
	}
	var held *s3lock.HeldError
	if !errors.As(err, &held) { // (a state's lock is a mutex: never a slot lock's *HeldError)
		return stateFailed("Cannot lock the state", s, ws, err)
	}
	if held.Queued {
		return diag.NewErrorDiagnostic("Workspace Already Locked", fmt.Sprintf("%s is free, but %d other run(s) queued "+
			"for it first (order = \"fifo\" or \"newest\") and were still waiting when wait_timeout ran out. Raise "+
			"wait_timeout in the state_store block (Terraform's -lock-timeout does not apply to state stores), or retry later.", stateWhere(s, ws), held.Ahead))
	}
	left := "it lapses in at most " + formatDuration(held.ExpiresIn.Round(time.Second)) + " unless its holder renews it"
	id := tfstate.HeldLockID(held)
	by := "another run"
	switch {
	case held.Shared:
		by = fmt.Sprintf("%d plan(s), which share it (an operation that writes the state waits for every plan); this is one of them", max(held.Waiting, 1))
	case held.Pending:
		by = "another run, which waits for the plans that hold it before it (no new plan joins meanwhile)"
	}
	return diag.NewErrorDiagnostic("Workspace Already Locked", fmt.Sprintf("%s is locked by %s.\n\n"+
		"Lock Info:\n  ID:        %s\n  Operation: %s\n  Who:       %s\n  Holder:    %s\n  Created:   %s\n  Epoch:     %d (%s)\n\n"+
		"Wait for it: raise wait_timeout in the state_store block (Terraform's -lock-timeout does not apply to state "+
		"stores). A holder that died "+
		"needs nothing: its lease lapses by itself. To end a live run's lock now (it can no longer write the state "+
		"afterwards): terraform force-unlock %s",
		stateWhere(s, ws), by, id, tfstate.TerraformOperation(held), tfstate.TerraformWho(held),
		held.Holder, formatTime(held.AcquiredAt), held.Epoch, left, id))
}

// stateUnlockFailed is an unlock, or a force-unlock, that failed.
func stateUnlockFailed(s *tfstate.Store, ws, id string, err error) diag.Diagnostic {
	var nc *tfstate.NotCurrentError
	var se *tfstate.SharedEpochError
	switch {
	case errors.As(err, &nc):
		return diag.NewErrorDiagnostic("Lock ID is not the state's current lock", fmt.Sprintf("%s: %v. "+
			"Run terraform force-unlock with the ID that Terraform showed for the current lock.", stateWhere(s, ws), err))
	case errors.As(err, &se):
		return diag.NewErrorDiagnostic("Lock ID is that of plans that share the lock", fmt.Sprintf("%s: %v. "+
			"Each plan's lock has an ID of its own, EPOCH.SHARE.", stateWhere(s, ws), err))
	case errors.Is(err, s3lock.ErrLeaseLost):
		return diag.NewErrorDiagnostic("The state lock was lost during the run", fmt.Sprintf("%s: lock ID %s ended before "+
			"this run unlocked it: %v\n\nIt lapsed (the provider could not renew it in time) or was force-unlocked. "+
			"Every state write of this run after that was refused, so the state holds no write of it from then on; "+
			"if Terraform reported a failed write, it saved that state in errored.tfstate. Check the state "+
			"(terraform plan) before acting on it.", stateWhere(s, ws), id, err))
	}
	return stateFailed("Cannot unlock the state", s, ws, err)
}

// stateWriteFailed is a refused or failed state write.
func stateWriteFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	var stale *tfstate.StaleWriteError
	switch {
	case errors.As(err, &stale) && stale.Newer() > 0 || errors.Is(err, s3lock.ErrLeaseLost) || errors.Is(err, tfstate.ErrLeaseRanOut) ||
		errors.Is(err, tfstate.ErrAbandoned) || errors.Is(err, s3lock.ErrReleased):
		return diag.NewErrorDiagnostic("State write refused: this run no longer holds the state lock", fmt.Sprintf("%s: %v\n\n"+
			"This run's lock lapsed (a paused or suspended run, an unreachable store) or was force-unlocked, and another "+
			"run may have locked and written the state since. That state is kept: this run's write did not land, so "+
			"nothing of the other run is overwritten. Terraform saves this run's state in errored.tfstate: compare it "+
			"with the current state (terraform plan) and import or reconcile what this run created.",
			stateWhere(s, ws), err))
	case errors.As(err, &stale):
		return diag.NewErrorDiagnostic("State write refused: the state changed under this run", fmt.Sprintf("%s: %v\n\n"+
			"This run holds the state lock, but the state object is no longer what this run last read or wrote: "+
			"something that does not take the lock wrote or deleted it. The other write is kept. Terraform saves this "+
			"run's state in errored.tfstate: find out who wrote the state, then reconcile the two.", stateWhere(s, ws), err))
	}
	return stateFailed("Cannot write the state", s, ws, err)
}

// stateDeleteFailed is a workspace that was not deleted: locked by another
// run, or a failure of the store.
func stateDeleteFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	var held *s3lock.HeldError
	if errors.As(err, &held) {
		return diag.NewErrorDiagnostic("Workspace is locked: not deleted", fmt.Sprintf("%s is locked by another run "+
			"(lock ID %s, holder %q, operation %s), so it was not deleted. Delete it once that run is done; if the run "+
			"died, its lock lapses by itself.", stateWhere(s, ws), tfstate.HeldLockID(held), held.Holder,
			tfstate.TerraformOperation(held)))
	}
	return stateFailed("Cannot delete the workspace's state", s, ws, err)
}

// stateStoreSecretsOnDisk warns of secrets (their attribute names) written
// in the state_store block's provider block.
func stateStoreSecretsOnDisk(secrets []string) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Secrets in the state_store block are saved on disk", fmt.Sprintf("The "+
		"provider \"s3lock\" block in the state_store block sets %s. Terraform saves the state_store block as "+
		"written, these values included, in .terraform/terraform.tfstate and in every saved plan file (terraform "+
		"plan -out); marking them sensitive does not prevent that. Leave them out of the configuration: "+
		"credentials from the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "+
		"AWS_SESSION_TOKEN, a shared profile with profile, an assume_role block, the role of the machine or CI "+
		"job; web_identity_token_file for a web identity token), the SSE-C key from %s. Then run "+
		"terraform init -reconfigure, delete the plan files saved so far, and rotate the secrets that were on disk.",
		strings.Join(secrets, ", "), envSSECustomerKey))
}

// stateLockWaited is the warning of a state lock that was had after a wait:
// whom it waited for (the lock's holder, with Terraform's lock info, or the
// S3 backend's lock file) and how long.
func stateLockWaited(s *tfstate.Store, ws string, w lockWait) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Waited for the state lock", fmt.Sprintf("%s: this run waited %s for its lock. %s",
		stateWhere(s, ws), tookFor(w.took), waitStory(w)))
}

// ---- The provider's own configuration, and the attribute validators.

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

// invalidSetting is one provider setting that an awsclient or SDK rule
// refused: an object setting (an SSE-C key that is not the base64 of 32
// bytes, an unknown ACL; the error never contains the value) or a
// connection setting (an ARN, a session policy, a proxy URL, whose password
// the error hides, a no_proxy list).
func invalidSetting(p path.Path, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid "+p.String(), objectSettingsReason(err))
}

// invalidBucket is a bucket name s3lock.ValidateConfig refused.
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

// invalidLockSet is a lock set lockset.Check refused (no name, more than
// 64, a name twice, an invalid name).
func invalidLockSet(p path.Path, names []string, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(p, "Invalid lock set", fmt.Sprintf("%s = [%s] is no lock set: %s. "+
		"A lock set is 1 to 64 distinct lock names, each a key path inside the bucket (segments of letters, "+
		"digits and -_.=+@,:!~ separated by single slashes), e.g. [\"net/prod\", \"db/prod\"].",
		p, quotedList(names), strings.TrimPrefix(err.Error(), "s3lock: ")))
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
