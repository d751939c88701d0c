package provider

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The s3lock_lease resource of a lock set (`names`): the set is taken all
// or none (lockset.Acquire), and its leases, one per lock, are then kept,
// renewed and released as the lease of one lock is, each by its token (kept
// together in private state). epoch, key and id are the first lease's (in
// the set's order); leases lists them all. A lost lease of the set is the
// set lost: when all are over the refresh removes the resource from state,
// as for one lock; when some are still held, the refresh marks the lost
// ones in leases (epoch 0) and the plan replaces the resource, which
// releases the others and takes the set again.

// privateTokensKey is the private-state key under which the tokens of a
// lock set's leases are kept, as a JSON list of strings in the set's order.
const privateTokensKey = "lease_tokens"

// lostEpoch marks, in the leases of a set's state, a lease that was lost.
const lostEpoch = 0

// storeTokens saves the tokens that resume a set's leases.
func storeTokens(ctx context.Context, p privateSetter, tokens []s3lock.Token) diag.Diagnostics {
	raw := make([]string, 0, len(tokens))
	for _, t := range tokens {
		raw = append(raw, t.String())
	}
	b, _ := json.Marshal(raw) // strings: it cannot fail
	return p.SetKey(ctx, privateTokensKey, b)
}

// loadTokens reads the tokens saved by storeTokens; a set's state without
// them (written by hand) cannot be used.
func loadTokens(ctx context.Context, p privateGetter, diags *diag.Diagnostics) ([]s3lock.Token, bool) {
	raw, d := p.GetKey(ctx, privateTokensKey)
	diags.Append(d...)
	var strs []string
	if diags.HasError() || len(raw) == 0 || json.Unmarshal(raw, &strs) != nil || len(strs) == 0 {
		diags.Append(missingToken())
		return nil, false
	}
	tokens := make([]s3lock.Token, 0, len(strs))
	for _, s := range strs {
		t, err := s3lock.ParseToken(s)
		if err != nil {
			diags.Append(unreadableToken(err))
			return nil, false
		}
		tokens = append(tokens, t)
	}
	return tokens, true
}

// createSet takes the lock set names for Create and fills plan with its
// leases: the set waits up to acq.wait for each lock, its leases renew
// themselves while it waits, and it is detached once held (the leases
// outlive this process).
func (r *leaseResource) createSet(ctx context.Context, client *s3lock.Client, plan *leaseResourceModelV0, names []string, acq acquisition, resp *resource.CreateResponse) {
	bucket := plan.Bucket.ValueString()
	set, waited, err := acquireSet(ctx, r.factory, client, names, acq.wait, acq.opts...)
	if err != nil {
		resp.Diagnostics.Append(setAcquisitionFailed(bucket, names, err, "timeouts.create"))
		return
	}
	first := set.Leases()[0].State()
	acquired, expires, capAt := first.AcquiredAt, first.ExpiresAt, time.Time{}
	for _, l := range set.Leases() {
		st := l.State()
		acquired, expires = latest(acquired, st.AcquiredAt), earliest(expires, st.ExpiresAt)
		capAt = earliest(capAt, st.HeldUntilAtMost)
	}
	tokens := set.Detach()
	if waited.waited() {
		resp.Diagnostics.Append(lockWaited(tokenRef(waitedIn(tokens, waited)), waited, false))
	}
	plan.ID = types.StringValue(tokenRef(tokens[0]).id())
	plan.Slots, plan.Slot = types.Int64Value(defaultSlots), types.Int64Value(0)
	plan.Epoch = types.Int64Value(int64(tokens[0].Epoch))
	plan.Key = types.StringValue(tokens[0].Key())
	plan.Leases = leasesValue(tokens)
	plan.Holder = types.StringValue(first.Holder)
	plan.AcquiredAt, plan.ExpiresAt = timeValue(acquired), timeValue(expires)
	plan.HeldUntil = timeValue(capAt)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
	resp.Diagnostics.Append(setLeaseIdentity(ctx, resp.Identity, tokenRef(tokens[0]))...)
	resp.Diagnostics.Append(storeTokens(ctx, resp.Private, tokens)...)
}

// readSet is Read of a lock set: it looks up each lease (writing nothing).
// All over: warnings, and the resource leaves state. Some over: warnings,
// and the lost ones are marked in leases, for the plan to replace the set.
func (r *leaseResource) readSet(ctx context.Context, client *s3lock.Client, state leaseResourceModelV0, p privateGetter, resp *resource.ReadResponse) {
	tokens, ok := loadTokens(ctx, p, &resp.Diagnostics)
	if !ok {
		return
	}
	rctx, cancel := readContext(ctx)
	defer cancel()
	marked := slices.Clone(tokens)
	var lost int
	until := time.Time{}
	for i, t := range tokens {
		st, err := lookupLease(rctx, client, &t, tokenRef(t))
		err = readFailure(rctx, err)
		switch {
		case leaseReleased(err):
			resp.Diagnostics.Append(leaseReleasedElsewhere(tokenRef(t), err))
		case errors.Is(err, s3lock.ErrLeaseLost):
			cur, curErr := client.Current(rctx, t.Name)
			resp.Diagnostics.Append(leaseLost(diag.SeverityWarning, capRef(tokenRef(t), state), err, describeCurrent(t.Bucket, cur, curErr), lostFromSet))
		case err != nil:
			resp.Diagnostics.Append(notRead(tokenRef(t), err))
			return
		default:
			until = earliest(until, st.TrustedUntil)
			continue
		}
		marked[i].Epoch = lostEpoch
		lost++
	}
	if lost == len(tokens) {
		resp.State.RemoveResource(ctx)
		return
	}
	state.Leases = leasesValue(marked)
	if lost == 0 && renewedSince(until, state.ExpiresAt) {
		state.ExpiresAt = timeValue(until)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// setLeaseModel is an element of leases.
type setLeaseModel struct {
	Name  string       `tfsdk:"name"`
	Epoch int64        `tfsdk:"epoch"`
	Key   types.String `tfsdk:"key"`
}

// setLost reports whether a set's state marks a lease of it lost (readSet).
func setLost(ctx context.Context, state leaseResourceModelV0) bool {
	var leases []setLeaseModel
	if state.Names.IsNull() || state.Leases.IsNull() || state.Leases.ElementsAs(ctx, &leases, false).HasError() {
		return false
	}
	return slices.ContainsFunc(leases, func(l setLeaseModel) bool { return l.Epoch == lostEpoch })
}

// replaceLostSet plans the replacement of a set a lease of which was lost:
// Delete releases the others, Create takes the set again.
func replaceLostSet(ctx context.Context, resp *resource.ModifyPlanResponse) {
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("leases"), types.ListUnknown(leaseSetElemType))...)
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("leases"))
}

// updateSet renews every lease of a set (Update when the plan renews).
func (r *leaseResource) updateSet(ctx context.Context, client *s3lock.Client, plan *leaseResourceModelV0, p privateGetter, diags *diag.Diagnostics) bool {
	tokens, ok := loadTokens(ctx, p, diags)
	if !ok {
		return false
	}
	var expires time.Time
	for _, t := range tokens {
		lease, err := client.Resume(ctx, t, s3lock.WithoutAutoRenew())
		if err == nil {
			err = lease.Renew(ctx)
			lease.Detach()
		}
		switch {
		case errors.Is(err, s3lock.ErrLeaseLost):
			diags.Append(leaseLost(diag.SeverityError, capRef(tokenRef(t), *plan), err, "", lostBeforeRenewal))
			return false
		case err != nil:
			diags.Append(notRenewed(tokenRef(t), err))
			return false
		}
		expires = earliest(expires, lease.State().ExpiresAt)
	}
	tflog.Info(ctx, "renewed lock set", map[string]any{"bucket": tokens[0].Bucket, "epochs": epochsOf(tokens)})
	plan.ExpiresAt = timeValue(expires)
	return true
}

// deleteSet releases every lease of a set, the last taken first, each as
// Delete releases the lease of one lock.
func (r *leaseResource) deleteSet(ctx context.Context, client *s3lock.Client, p privateGetter, diags *diag.Diagnostics) {
	tokens, ok := loadTokens(ctx, p, diags)
	if !ok {
		return
	}
	for _, t := range slices.Backward(tokens) {
		releaseLease(ctx, client, &t, tokenRef(t), diags)
	}
}

// replaceIfSetChanged makes a change of names replace the lease only when
// the set changes: the order the names are written in is not the set's.
func replaceIfSetChanged() planmodifier.List {
	return listplanmodifier.RequiresReplaceIf(
		func(ctx context.Context, req planmodifier.ListRequest, resp *listplanmodifier.RequiresReplaceIfFuncResponse) {
			before, k1 := knownNames(ctx, req.StateValue)
			after, k2 := knownNames(ctx, req.PlanValue)
			slices.Sort(before)
			slices.Sort(after)
			resp.RequiresReplace = !k1 || !k2 || !slices.Equal(before, after)
		},
		"Changing the locks of the set replaces the lease.",
		"Changing the locks of the set replaces the lease.",
	)
}

// earliest is the earlier of two times, the zero time being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// latest is the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
