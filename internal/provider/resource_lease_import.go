package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The import of s3lock_lease: by an import ID, or by an identity (see
// resource_lease_identity.go). The ID is also the resource's id.

// The import ID formats: the lease's bucket, lock name and epoch; for the
// lease of one slot of a lock that admits several holders (slots), the slot
// before the epoch, as in the key of the slot's epoch object
// (s3lock.Token.Key); for a shared lease, the shared epoch and the share id
// after it, as in the key of the share (s3lock.Token.Key). IDs in the first
// format name what they always named.
const (
	importIDFormat       = "<bucket>/<name>/<epoch>"
	importSlotIDFormat   = "<bucket>/<name>/" + slotIDSegment + "/<slot>/<epoch>"
	importSharedIDFormat = "<bucket>/<name>/" + sharedIDSegment + "/<epoch>/<share>"
)

// sharedIDSegment is the path segment before the shared epoch in the key of
// a share (s3lock.Token.Key) and in the import ID of a shared lease. No lock
// name contains it (s3lock reserves it), so an ID with it names a share.
const sharedIDSegment = "lock-shared"

// slotIDSegment is the path segment before the slot in the key of a slot's
// epoch object (s3lock.Token.Key) and in the import ID of a slot lease. No lock
// name contains it (s3lock reserves it), so an ID with it names a slot.
const slotIDSegment = "lock-slots"

// slotOfKey returns the slot whose epoch object key is, for a key of the
// form `<name>/lock-slots/<slot>/lock-<epoch>.json` (s3lock.Token.Key), and
// 0 for a lock's own epoch: the Key of a *s3lock.HeldError names the slot it
// describes when every slot of a slot lock is held.
func slotOfKey(key string) int {
	dir := key[:max(strings.LastIndex(key, "/"), 0)]
	i := strings.LastIndex(dir, "/"+slotIDSegment+"/")
	if i <= 0 {
		return 0
	}
	slot, err := strconv.Atoi(dir[i+len(slotIDSegment)+2:])
	if err != nil || slot < 1 || slot > s3lock.MaxSlots {
		return 0
	}
	return slot
}

// ImportState adopts the lock's current lease (of the slot, for a slot
// lease) by its import ID, or by the same parts as an identity, e.g. one
// acquired by an earlier pipeline step, and refuses any epoch that is not
// the current, held one.
func (r *leaseResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	target, diags := importTarget(ctx, req)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	client, ok := r.factory.client(ctx, target.bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	lease, err := client.Resume(ctx, target.token(), s3lock.WithoutAutoRenew())
	if err != nil {
		current := ""
		if errors.Is(err, s3lock.ErrLeaseLost) || errors.Is(err, s3lock.ErrSlotsMismatch) {
			st, curErr := client.Current(ctx, target.name)
			current = describeCurrent(target.bucket, st, curErr)
		}
		resp.Diagnostics.Append(importRefused(target, err, current))
		return
	}
	token := lease.Detach()
	set := func(attr string, v any) {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attr), v)...)
	}
	set("id", types.StringValue(target.id()))
	set("bucket", types.StringValue(target.bucket))
	set("name", types.StringValue(target.name))
	set("lease_duration", types.StringValue(formatDuration(lease.State().LeaseDuration)))
	set("metadata", metadataValue(lease.State().Metadata))
	// How the lease was waited for is not recorded in it; order only matters
	// while waiting, so the import gets the default.
	set("order", types.StringValue(string(defaultOrder)))
	set(modeAttr, types.StringValue(modeName(token.Share != "")))
	set("slots", types.Int64Value(int64(max(token.Slots, 1))))
	set("slot", types.Int64Value(int64(token.Slot)))
	set("epoch", types.Int64Value(int64(target.epoch)))
	set("key", types.StringValue(token.Key()))
	set("holder", types.StringValue(lease.State().Holder))
	set("acquired_at", timeValue(lease.State().AcquiredAt))
	set("expires_at", timeValue(lease.State().ExpiresAt))
	set("held_until_at_most", timeValue(lease.State().HeldUntilAtMost))
	if d := maxHoldOf(lease.State()); d > 0 {
		set(maxHoldAttr, types.StringValue(formatDuration(d)))
	}
	resp.Diagnostics.Append(setLeaseIdentity(ctx, resp.Identity, target)...)
	resp.Diagnostics.Append(storeToken(ctx, resp.Private, token)...)
}

// id is the resource's id and import ID of the lease l: importIDFormat,
// importSlotIDFormat when l.slot > 0, importSharedIDFormat when l.share is
// set.
func (l leaseRef) id() string {
	switch {
	case l.share != "":
		return fmt.Sprintf("%s/%s/%s/%d/%s", l.bucket, l.name, sharedIDSegment, l.epoch, l.share)
	case l.slot > 0:
		return fmt.Sprintf("%s/%s/%s/%d/%d", l.bucket, l.name, slotIDSegment, l.slot, l.epoch)
	}
	return fmt.Sprintf("%s/%s/%d", l.bucket, l.name, l.epoch)
}

// importIDFormats names the import ID formats, for the diagnostic of an ID
// in none of them.
const importIDFormats = importIDFormat + ", " + importSlotIDFormat + " or " + importSharedIDFormat

// parseLeaseID splits an import ID: the bucket ends at the first slash, the
// epoch starts after the last one, and the lock name is in between, unless
// it ends in `/lock-slots/<slot>`, which names the slot; an ID with
// `/lock-shared/<epoch>/<share>` at its end names a share (the SDK checks
// the share id when the import resumes the lease).
func parseLeaseID(raw string) (leaseRef, error) {
	id, share := raw, ""
	if i := strings.LastIndex(id, "/"+sharedIDSegment+"/"); i > 0 {
		tail := id[i+len(sharedIDSegment)+2:]
		j := strings.LastIndex(tail, "/")
		if j <= 0 || j == len(tail)-1 {
			return leaseRef{}, fmt.Errorf("import ID %q of a shared lease does not have the form %s", raw, importSharedIDFormat)
		}
		id, share = id[:i]+"/"+tail[:j], tail[j+1:]
	}
	first, last := strings.Index(id, "/"), strings.LastIndex(id, "/")
	if first <= 0 || last <= first+1 || last == len(id)-1 {
		return leaseRef{}, fmt.Errorf("import ID %q has none of the forms %s", raw, importIDFormats)
	}
	l := leaseRef{bucket: id[:first], name: id[first+1 : last], share: share}
	digits := id[last+1:]
	epoch, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || epoch == 0 || epoch > s3lock.MaxEpoch {
		return leaseRef{}, fmt.Errorf("import ID %q: epoch %q is not a number between 1 and %d", raw, digits, s3lock.MaxEpoch)
	}
	l.epoch = epoch
	if i := strings.LastIndex(l.name, "/"+slotIDSegment+"/"); i > 0 {
		digits := l.name[i+len(slotIDSegment)+2:]
		slot, err := strconv.ParseUint(digits, 10, 8)
		if err != nil || slot < 1 || slot > s3lock.MaxSlots {
			return leaseRef{}, fmt.Errorf("import ID %q: slot %q is not a number between 1 and %d", raw, digits, s3lock.MaxSlots)
		}
		l.name, l.slot = l.name[:i], int(slot)
	}
	if err := s3lock.ValidateConfig(l.bucket); err != nil {
		return leaseRef{}, fmt.Errorf("import ID %q: %w", raw, err)
	}
	if err := s3lock.ValidateName(l.name); err != nil {
		return leaseRef{}, fmt.Errorf("import ID %q: %w", raw, err)
	}
	return l, nil
}
