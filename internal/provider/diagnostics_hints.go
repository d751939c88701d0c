package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Details the diagnostics share: where a lock's objects are, what an error
// means and what to do about it, who holds a lock now.

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
	case errors.As(err, &held) && held.Slots > 1:
		return heldHint(held.Slots, "")
	case errors.Is(err, s3lock.ErrHeld):
		return heldHint(1, "")
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
