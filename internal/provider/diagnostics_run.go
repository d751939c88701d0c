package provider

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Diagnostics about a Terraform run's lease: the run guard that holds it
// across the phases, a lease inherited from `s3lock run`, and what a run
// cannot have.

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
