package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ action.Action               = (*forceReleaseAction)(nil)
	_ action.ActionWithConfigure  = (*forceReleaseAction)(nil)
	_ action.ActionWithModifyPlan = (*forceReleaseAction)(nil)
)

// NewForceReleaseAction returns the s3lock_force_release action (Terraform
// 1.14 and later).
func NewForceReleaseAction() action.Action { return &forceReleaseAction{} }

// forceReleaseAction is an operator's unlock of one epoch of a lock, or of
// one slot of a slot lock: the SDK's ForceRelease of the epoch's token (with
// its slot), which acts on that epoch's object only.
type forceReleaseAction struct {
	factory *clientFactory
}

// forceReleaseModelV0 is the configuration of s3lock_force_release.
type forceReleaseModelV0 struct {
	Bucket types.String `tfsdk:"bucket"`
	Name   types.String `tfsdk:"name"`
	Epoch  types.Int64  `tfsdk:"epoch"`
	Slot   types.Int64  `tfsdk:"slot"`
}

func (a *forceReleaseAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_force_release"
}

func (a *forceReleaseAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Force-releases one epoch of a lock, whoever holds it, so that the next acquirer " +
			"need not wait for the lease to lapse: an operator's unlock, for a holder that is gone for good. " +
			"Only the epoch given is touched (a compare-and-swap on its object), so a newer lease is never " +
			"released by mistake; an epoch that does not exist is refused, and one that is already released is " +
			"left as it is. The lease records the provider's `holder` as the one who released it. Its holder " +
			"finds out at its next renewal and may until then believe it holds the lock, which is what the " +
			"epoch as fencing token is for. Invoke it with `terraform apply -invoke=action.s3lock_force_release.<name>`.",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the lock.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the lock, such as `deploy/prod`.",
				Required:            true,
				Validators:          []validator.String{lockNameValidator{}},
			},
			"epoch": schema.Int64Attribute{
				MarkdownDescription: "The epoch to release: the lock's current epoch, as the `s3lock_lease` data " +
					"source or `s3lock status` shows it. No other epoch is touched.",
				Required:   true,
				Validators: []validator.Int64{int64validator.Between(1, int64(s3lock.MaxEpoch))},
			},
			"slot": schema.Int64Attribute{
				MarkdownDescription: "For a slot lock (one that admits several holders): the slot whose epoch to " +
					"release, as `s3lock status` shows each held slot with its epoch. Without it, `epoch` is an " +
					"epoch of the lock itself; a slot lock's own epoch is its marker, and releasing that makes it a " +
					"plain lock again (the next acquirer chooses how many holders it admits); it is refused, and nothing " +
					"changes, while any of its slots is held: release those first.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.Between(1, s3lock.MaxSlots)},
			},
		},
	}
}

func (a *forceReleaseAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_force_release action")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	a.factory = f
}

// ModifyPlan refuses, when Terraform plans to invoke the action, arguments
// that are null (Terraform does not, for actions).
func (a *forceReleaseAction) ModifyPlan(ctx context.Context, req action.ModifyPlanRequest, resp *action.ModifyPlanResponse) {
	var cfg forceReleaseModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(cfg.nulls()...)
	}
}

// nulls reports the required arguments that are null.
func (m forceReleaseModelV0) nulls() diag.Diagnostics {
	return nullArguments("s3lock_force_release", map[string]attr.Value{"bucket": m.Bucket, "name": m.Name, "epoch": m.Epoch})
}

// Invoke says what it finds at the lock, releases the epoch with the SDK and
// says what it did, as progress messages.
func (a *forceReleaseAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var cfg forceReleaseModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(cfg.nulls()...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	slot := int(cfg.Slot.ValueInt64()) // 0: the lock itself
	l := leaseRef{bucket: cfg.Bucket.ValueString(), name: cfg.Name.ValueString(), epoch: uint64(cfg.Epoch.ValueInt64()), slot: slot}
	client, ok := a.factory.client(ctx, l.bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	before, newer := beforeForceRelease(ctx, client, l, slot)
	progress(resp, before)
	if err := client.ForceRelease(ctx, l.token()); err != nil {
		st, curErr := client.Current(ctx, l.name)
		resp.Diagnostics.Append(forceReleaseFailed(l, err, describeCurrent(l.bucket, st, curErr)))
		return
	}
	tflog.Warn(ctx, "force-released lease", map[string]any{"bucket": l.bucket, "lock": l.name, "slot": slot, "epoch": l.epoch})
	what := fmt.Sprintf("Epoch %d of lock %q", l.epoch, l.name)
	if slot > 0 {
		what = fmt.Sprintf("Epoch %d of slot %d of lock %q", l.epoch, slot, l.name)
	}
	if newer > 0 {
		progress(resp, fmt.Sprintf("%s is released; the newer epoch, %d, was left alone.", what, newer))
		return
	}
	progress(resp, what+" is released: the next acquirer takes it without waiting for the lease to lapse.")
}

// beforeForceRelease says what the lease to release is, as the SDK reads the
// lock without writing, and what the release will do; newer is the newest
// epoch of the lock (of the slot) when that is newer than l's, else 0. A lock
// that cannot be read is released all the same: its newest epoch object may
// be the unreadable one an operator wants gone.
func beforeForceRelease(ctx context.Context, c *s3lock.Client, l leaseRef, slot int) (msg string, newer uint64) {
	lock := fmt.Sprintf("Lock %q in bucket %q", l.name, l.bucket)
	st, err := c.Current(ctx, l.name)
	switch {
	case err != nil:
		return fmt.Sprintf("%s could not be read (%v); releasing epoch %d.", lock, err, l.epoch), 0
	case slot > 0:
		return beforeSlotRelease(lock, st, l.epoch, slot)
	case st.Slots > 1 && st.Epoch == l.epoch && len(st.Holders) > 0:
		return fmt.Sprintf("%s admits %d holders, %d of its slots are held, and epoch %d is its marker, which is "+
			"released only once none of its slots is held.", lock, st.Slots, len(st.Holders), l.epoch), 0
	case st.Slots > 1 && st.Epoch == l.epoch:
		return fmt.Sprintf("%s admits %d holders, none of its slots is held, and epoch %d is its marker: releasing "+
			"it makes the lock a plain lock again.", lock, st.Slots, l.epoch), 0
	case st.Epoch == l.epoch && st.Phase() == s3lock.PhaseHeld:
		return fmt.Sprintf("%s: epoch %d is held by %q; releasing it.", lock, l.epoch, st.Holder), 0
	case st.Epoch == l.epoch:
		return fmt.Sprintf("%s: epoch %d is %s already; releasing it changes nothing for the lock.", lock, l.epoch, st.Phase()), 0
	case st.Epoch == 0:
		return fmt.Sprintf("%s has no epochs.", lock), 0
	case st.Epoch > l.epoch:
		return fmt.Sprintf("%s is at epoch %d (%s), not %d: releasing epoch %d only, epoch %d is left alone.",
			lock, st.Epoch, st.Phase(), l.epoch, l.epoch, st.Epoch), st.Epoch
	}
	return fmt.Sprintf("%s is at epoch %d (%s), not %d.", lock, st.Epoch, st.Phase(), l.epoch), 0
}

// beforeSlotRelease is beforeForceRelease for epoch of one slot of a slot
// lock, whose held slots st.Holders lists.
func beforeSlotRelease(lock string, st s3lock.State, epoch uint64, slot int) (msg string, newer uint64) {
	if st.Slots < 2 {
		return fmt.Sprintf("%s admits one holder and has no slots; releasing epoch %d of its slot %d.", lock, epoch, slot), 0
	}
	for _, h := range st.Holders {
		switch {
		case h.Slot != slot:
		case h.Epoch == epoch:
			return fmt.Sprintf("%s: epoch %d of slot %d is held by %q; releasing it.", lock, epoch, slot, h.Holder), 0
		case h.Epoch > epoch:
			return fmt.Sprintf("%s: slot %d is at epoch %d, held by %q, not %d: releasing epoch %d only, epoch %d is "+
				"left alone.", lock, slot, h.Epoch, h.Holder, epoch, epoch, h.Epoch), h.Epoch
		}
	}
	return fmt.Sprintf("%s: slot %d is not held at epoch %d; releasing that epoch.", lock, slot, epoch), 0
}

// nullArguments reports each of the required arguments args of the action
// that is null, in the order of their names.
func nullArguments(action string, args map[string]attr.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if args[name].IsNull() {
			diags.Append(actionArgumentNull(action, name))
		}
	}
	return diags
}

// progress sends a progress message to Terraform, which shows it while the
// action runs.
func progress(resp *action.InvokeResponse, msg string) {
	if resp.SendProgress != nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
}
