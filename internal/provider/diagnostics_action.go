package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Diagnostics of the actions (force-release, verify).

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
	failed, denied := 0, false
	var hints []string
	for _, c := range rep.Checks {
		if c.Status == s3lock.CheckOK {
			continue
		}
		failed++
		denied = denied || c.Status == s3lock.CheckDenied
		if h := hintFor(rep.Bucket, rep.ProbePrefix+"*", c.Err); c.Status == s3lock.CheckFailed && h != "" && !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
		fmt.Fprintf(&b, "\n  - %s", checkLine(c))
	}
	detail := fmt.Sprintf("Bucket %q (probes under s3://%s/%s): %d of %d checks did not pass:%s",
		rep.Bucket, rep.Bucket, rep.ProbePrefix, failed, len(rep.Checks), b.String())
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
