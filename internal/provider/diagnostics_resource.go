package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Diagnostics of the s3lock_lease resource (import, its token, its
// durations) and of the data sources.

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
