package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ resource.Resource                   = (*leaseResource)(nil)
	_ resource.ResourceWithConfigure      = (*leaseResource)(nil)
	_ resource.ResourceWithImportState    = (*leaseResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*leaseResource)(nil)
	_ resource.ResourceWithValidateConfig = (*leaseResource)(nil)
)

// NewLeaseResource returns the s3lock_lease resource.
func NewLeaseResource() resource.Resource { return &leaseResource{} }

// leaseResource is a lease held for as long as the resource exists.
type leaseResource struct {
	factory *clientFactory
}

// leaseResourceModelV0 is the state of s3lock_lease.
type leaseResourceModelV0 struct {
	ID            types.String   `tfsdk:"id"`
	Bucket        types.String   `tfsdk:"bucket"`
	Name          types.String   `tfsdk:"name"`
	Names         types.List     `tfsdk:"names"`
	LeaseDuration types.String   `tfsdk:"lease_duration"`
	MaxHold       types.String   `tfsdk:"max_hold"`
	RenewBefore   types.String   `tfsdk:"renew_before"`
	Metadata      types.Map      `tfsdk:"metadata"`
	Order         types.String   `tfsdk:"order"`
	Mode          types.String   `tfsdk:"mode"`
	Slots         types.Int64    `tfsdk:"slots"`
	Slot          types.Int64    `tfsdk:"slot"`
	Epoch         types.Int64    `tfsdk:"epoch"`
	Key           types.String   `tfsdk:"key"`
	Leases        types.List     `tfsdk:"leases"`
	Holder        types.String   `tfsdk:"holder"`
	AcquiredAt    types.String   `tfsdk:"acquired_at"`
	ExpiresAt     types.String   `tfsdk:"expires_at"`
	HeldUntil     types.String   `tfsdk:"held_until_at_most"`
	Timeouts      timeouts.Value `tfsdk:"timeouts"`
}

func (r *leaseResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_lease"
}

func (r *leaseResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	tb := timeouts.Block(ctx, timeouts.Opts{
		Create: true,
		CreateDescription: fmt.Sprintf("How long `terraform apply` waits for the lock when someone else holds it, "+
			"e.g. `\"30m\"` (between %s and %s); `\"0s\"` fails at once. Default `\"5m\"`.",
			formatDuration(minWaitTimeout), formatDuration(maxWaitTimeout)),
	})
	if b, ok := tb.(schema.SingleNestedBlock); ok {
		b.MarkdownDescription = "How long operations may take."
		// The framework only checks that create parses: a negative wait
		// would try once as "0s" does, silently.
		if create, ok := b.Attributes["create"].(schema.StringAttribute); ok {
			create.Validators = append(create.Validators, waitTimeoutValidator)
			b.Attributes["create"] = create
		}
		tb = b
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A lease on an s3lock lock, held for as long as the resource exists: `apply` " +
			"acquires it (waiting while someone else holds it), `destroy` releases it. Use it to hold a lock " +
			"across several Terraform runs or pipeline steps.\n\n" +
			"Nothing renews the lease between Terraform runs, so `lease_duration` must outlast the gap " +
			"between the runs that rely on it. A plan made within `renew_before` of `expires_at` proposes an " +
			"in-place renewal. If the lease is lost meanwhile (it lapsed, or an operator force-released it), " +
			"the next refresh removes it from state with a warning and the next apply acquires the lock again, " +
			"with a new `epoch`.\n\n" +
			"Changing `lease_duration`, `max_hold`, `metadata`, `mode` or `slots` replaces the lease: it is released and acquired " +
			"again with a new epoch. Changing `order`, `renew_before` or `timeouts` only changes state.\n\n" +
			"With `slots` = n > 1 the lock admits n holders at once, and the lease holds one of its slots " +
			"(`slot`); `epoch` is then that slot's fencing token. With `mode = \"shared\"` the lease shares the lock " +
			"with other shared leases (for runs that only read what it guards), and an exclusive lease waits for " +
			"them all.\n\n" +
			"The lease's token, which renews and releases it, is kept in the resource's private state, " +
			"which Terraform writes into the state file: protect the state as you protect the lock's " +
			"objects. The token is no secret beyond them: its nonce is in the lease's object too, " +
			"readable by anyone with `s3:GetObject` on the lock's keys. What guards a lease is who may " +
			"write those keys (`s3:PutObject`).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "Identifier of the lease, `" + importIDFormat + "`; `" + importSlotIDFormat +
					"` for the lease of a slot; `" + importSharedIDFormat + "` for a shared lease (the import ID formats).",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the lock. Changing it replaces the lease.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the lock: a key path inside the bucket, such as `deploy/prod`. " +
					"Its epochs are the objects `<name>/lock-<epoch>.json`. Changing it replaces the lease. Set " +
					"exactly one of `name` and `names`.",
				Optional:      true,
				Validators:    nameValidators(),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			namesAttr: schema.ListAttribute{
				MarkdownDescription: namesDescription("`timeouts.create`", " Changing the set of names replaces the "+
					"lease; writing them in another order does not. The set's leases are renewed together (a plan "+
					"within `renew_before` of `expires_at`, the earliest of them, renews them all) and released "+
					"together. If one of them is lost, the next refresh warns, and the next plan replaces the "+
					"resource (when the others are still held: it releases them and takes the set again) or "+
					"acquires it anew. `id`, the identity, `epoch` and `key` are the first lease's; a lock set "+
					"cannot be imported (import each lock's lease as a resource with `name`)."),
				ElementType:   types.StringType,
				Optional:      true,
				Validators:    []validator.List{lockSetValidator{}},
				PlanModifiers: []planmodifier.List{replaceIfSetChanged()},
			},
			"lease_duration": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long the lease stays valid after it is acquired or renewed, "+
					"as a duration such as `\"30m\"` or `\"2h\"` (between %s and %s). Default `%q`. Changing it "+
					"replaces the lease.", formatDuration(s3lock.MinLeaseDuration),
					formatDuration(s3lock.MaxLeaseDuration), defaultResourceLeaseDuration),
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(defaultResourceLeaseDuration),
				Validators: []validator.String{
					durationValidator{min: s3lock.MinLeaseDuration, max: s3lock.MaxLeaseDuration},
				},
				PlanModifiers: []planmodifier.String{replaceIfDurationChanged()},
			},
			maxHoldAttr: schema.StringAttribute{
				MarkdownDescription: maxHoldDescription(" A renewal (a plan within `renew_before` of " +
					"`expires_at`) never extends the lease past the cap, where it lapses; once it has passed, the next refresh " +
					"says that the lease reached its `max_hold`, removes it from state, and the next apply " +
					"acquires the lock again, with a new `epoch` and a new cap. Changing it replaces the lease."),
				Optional:      true,
				Validators:    []validator.String{maxHoldValidator},
				PlanModifiers: []planmodifier.String{replaceIfDurationChanged()},
			},
			"renew_before": schema.StringAttribute{
				MarkdownDescription: "When a plan should renew the lease: a plan made when `expires_at` is less " +
					"than this far away proposes an in-place update that renews the lease (like the tls " +
					"provider's early renewal). A duration such as `\"15m\"`, shorter than `lease_duration`. " +
					"When unset, Terraform never renews the lease; once it lapses, the next plan acquires " +
					"the lock again.",
				Optional: true,
				Validators: []validator.String{
					durationValidator{min: minRenewBefore, max: s3lock.MaxLeaseDuration},
				},
			},
			"metadata": schema.MapAttribute{
				MarkdownDescription: "Strings stored in the lease for everyone who reads the lock, e.g. the " +
					"pipeline run or the change being applied (at most 16 KiB in all). Changing it replaces " +
					"the lease.",
				ElementType: types.StringType,
				Optional:    true,
				Validators: []validator.Map{
					mapvalidator.KeysAre(stringvalidator.LengthAtLeast(1)),
				},
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"order": schema.StringAttribute{
				MarkdownDescription: orderDescription("`timeouts.create`", " It only matters while `apply` waits "+
					"for the lock, so changing it is an update in place that leaves the lease alone (it applies to "+
					"the next acquisition, such as a replacement)."),
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(string(defaultOrder)),
				Validators: []validator.String{orderValidator()},
			},
			modeAttr: schema.StringAttribute{
				MarkdownDescription: modeDescription("`timeouts.create`", " Changing it replaces the lease. An "+
					"imported lease gets the mode it was acquired with."),
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(modeExclusive),
				Validators:    modeValidators(),
				PlanModifiers: []planmodifier.String{replaceIfModeChanged()},
			},
			"slots": schema.Int64Attribute{
				MarkdownDescription: slotsDescription("`timeouts.create`", " Changing it replaces the lease. "+
					"An imported lease gets the number of holders its lock admits."),
				Optional:      true,
				Computed:      true,
				Default:       int64default.StaticInt64(defaultSlots),
				Validators:    slotsValidators(),
				PlanModifiers: []planmodifier.Int64{replaceIfSlotsChanged()},
			},
			"slot": schema.Int64Attribute{
				MarkdownDescription: slotDescription,
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"epoch": schema.Int64Attribute{
				MarkdownDescription: "Epoch of the lease: the fencing token. Every acquisition of the lock (of the " +
					"lease's slot, with `slots` > 1) gets a higher one; pass it to what the lock protects so that it " +
					"can refuse writes from an older holder.",
				Computed:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "Key of the lease's epoch object in the bucket, `<name>/lock-<epoch>.json`; " +
					"`<name>/lock-slots/<slot>/lock-<epoch>.json` for the lease of a slot; for a shared lease, its " +
					"share's object, `<name>/lock-shared/<epoch>/<share>.json`.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"leases": schema.ListAttribute{
				MarkdownDescription: leasesDescription + leasesLostDescription,
				ElementType:         leaseSetElemType,
				Computed:            true,
				PlanModifiers:       []planmodifier.List{listplanmodifier.UseStateForUnknown()},
			},
			"holder": schema.StringAttribute{
				MarkdownDescription: "Identity written into the lease: the provider's `holder`, or, for an " +
					"imported lease, whoever acquired it.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"acquired_at": schema.StringAttribute{
				MarkdownDescription: "When the lease was acquired (RFC 3339, the acquirer's clock).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the lease ends unless it is renewed (RFC 3339). It is a safety margin " +
					"earlier than the moment anyone else could take the lock.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"held_until_at_most": schema.StringAttribute{
				MarkdownDescription: heldUntilAtMostDescription("the lease") + " With `names`, the earliest of " +
					"the set's caps.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{"timeouts": tb},
	}
}

func (r *leaseResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_lease resource")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	r.factory = f
}

// ValidateConfig refuses a max_hold that does not outlast lease_duration,
// a shared lease of a slot lock, and a renew_before that every plan would
// find due.
func (r *leaseResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg leaseResourceModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d := checkMaxHold(cfg.MaxHold, cfg.LeaseDuration, defaultResourceLeaseDuration, describeLock(cfg.Bucket, cfg.Name)); d != nil {
		resp.Diagnostics.Append(d)
	}
	if d := checkSharedSlots(cfg.Mode, cfg.Slots); d != nil {
		resp.Diagnostics.Append(d)
	}
	if cfg.RenewBefore.IsNull() || cfg.RenewBefore.IsUnknown() || cfg.LeaseDuration.IsUnknown() {
		return
	}
	before, err1 := time.ParseDuration(cfg.RenewBefore.ValueString())
	dur, err2 := parseDuration("lease_duration", cfg.LeaseDuration, mustDuration(defaultResourceLeaseDuration))
	if err1 != nil || err2 != nil {
		return // the attribute validators report it
	}
	// expires_at is lease_duration minus the SDK's safety margin after a
	// renewal: a renew_before that reaches back that far is always due.
	if window := dur - s3lock.SafetyMargin(dur); before >= window {
		resp.Diagnostics.Append(renewBeforeTooLong(cfg.RenewBefore.ValueString(), window, dur, describeLock(cfg.Bucket, cfg.Name)))
	}
}

// ModifyPlan proposes a renewal (an in-place update) when the plan is made
// within renew_before of expires_at, by marking expires_at unknown.
func (r *leaseResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return // create or destroy
	}
	var state, plan leaseResourceModelV0
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !resp.Diagnostics.HasError() && setLost(ctx, state) {
		replaceLostSet(ctx, resp)
		return
	}
	if resp.Diagnostics.HasError() || plan.RenewBefore.IsNull() || plan.RenewBefore.IsUnknown() {
		return
	}
	before, err := time.ParseDuration(plan.RenewBefore.ValueString())
	if err != nil {
		return // reported by the validator
	}
	expires, err := time.Parse(time.RFC3339, state.ExpiresAt.ValueString())
	if err != nil {
		tflog.Warn(ctx, "expires_at in state is not a time; proposing a renewal", map[string]any{"expires_at": state.ExpiresAt.ValueString()})
		expires = time.Time{}
	}
	now := time.Now()
	if r.factory != nil {
		now = r.factory.now()
	}
	if now.Before(expires.Add(-before)) {
		return
	}
	tflog.Info(ctx, "lease is within renew_before of its expiry; proposing a renewal", map[string]any{
		"bucket": state.Bucket.ValueString(), "lock": state.Name.ValueString(), "epoch": state.Epoch.ValueInt64(),
		"expires_at": state.ExpiresAt.ValueString(), "renew_before": plan.RenewBefore.ValueString(),
	})
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("expires_at"), types.StringUnknown())...)
}

func (r *leaseResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan leaseResourceModelV0
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bucket, name := plan.Bucket.ValueString(), plan.Name.ValueString()
	names := setNames(ctx, plan.Names, &resp.Diagnostics)
	if names != nil {
		name = names[0] // the lock the settings' diagnostics name
	}
	lock := leaseRef{bucket: bucket, name: name}
	acq := r.acquisition(ctx, plan, lock, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	client, ok := r.factory.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	if names != nil {
		// The set's leases renew themselves while it waits for its later
		// locks; createSet detaches them once it holds them all.
		r.createSet(ctx, client, &plan, names, acq, resp)
		return
	}
	lease, waited, err := acquireLease(ctx, r.factory, client, name, acq.wait, append(acq.opts, s3lock.WithoutAutoRenew())...)
	if err != nil {
		resp.Diagnostics.Append(acquisitionFailed(lock, err, "timeouts.create"))
		return
	}
	// The lease outlives this process: stop its background work and keep
	// the token that lets later runs resume it.
	token := lease.Detach()
	if waited.waited() {
		resp.Diagnostics.Append(lockWaited(tokenRef(token), waited, false))
	}
	tflog.Info(ctx, "acquired lock", map[string]any{"bucket": bucket, "lock": name, "slot": token.Slot,
		"epoch": lease.Token().Epoch, "key": token.Key()})

	ref := tokenRef(token)
	plan.ID = types.StringValue(ref.id())
	plan.Slots = types.Int64Value(int64(max(token.Slots, 1)))
	plan.Slot = types.Int64Value(int64(token.Slot))
	plan.Epoch = types.Int64Value(int64(lease.Token().Epoch))
	plan.Key = types.StringValue(token.Key())
	plan.Leases = leasesValue([]s3lock.Token{token})
	plan.Holder = types.StringValue(lease.State().Holder)
	plan.AcquiredAt = timeValue(lease.State().AcquiredAt)
	plan.ExpiresAt = timeValue(lease.State().ExpiresAt)
	plan.HeldUntil = timeValue(lease.State().HeldUntilAtMost)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
	resp.Diagnostics.Append(setLeaseIdentity(ctx, resp.Identity, ref)...)
	resp.Diagnostics.Append(storeToken(ctx, resp.Private, token)...)
}

// acquisition is how Create acquires: how long it waits, with which
// options (automatic renewal aside).
type acquisition struct {
	wait time.Duration
	opts []s3lock.Option
}

// acquisition reads Create's timeouts.create, lease_duration, max_hold,
// order, mode, slots and metadata.
func (r *leaseResource) acquisition(ctx context.Context, plan leaseResourceModelV0, lock leaseRef, diags *diag.Diagnostics) acquisition {
	wait, d := plan.Timeouts.Create(ctx, defaultCreateTimeout)
	diags.Append(d...)
	meta, d := metadataFrom(ctx, plan.Metadata)
	diags.Append(d...)
	dur, err := parseDuration("lease_duration", plan.LeaseDuration, mustDuration(defaultResourceLeaseDuration))
	if err != nil {
		diags.Append(durationNotParsed(path.Root("lease_duration"), lock, err))
	}
	maxHold, err := parseDuration(maxHoldAttr, plan.MaxHold, 0)
	if err != nil {
		diags.Append(durationNotParsed(path.Root(maxHoldAttr), lock, err))
	}
	order, err := parseOrder(plan.Order)
	if err != nil {
		diags.Append(invalidOrder(path.Root("order"), err))
	}
	opts := []s3lock.Option{s3lock.WithLeaseDuration(dur), s3lock.WithOrder(order), s3lock.WithSlots(slotsOf(plan.Slots))}
	opts = append(opts, maxHoldOptions(maxHold)...)
	opts = append(opts, modeOptions(sharedOf(plan.Mode))...)
	if meta != nil {
		opts = append(opts, s3lock.WithMetadata(meta))
	}
	return acquisition{wait: wait, opts: opts}
}

// Read checks that the lease is still held by this resource (same epoch,
// same nonce, neither released nor lapsed), without writing anything; if
// not, it warns and removes the resource from state, so that the next apply
// acquires the lock again.
func (r *leaseResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state leaseResourceModelV0
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ref := stateRef(state)
	// State written before the resource had an identity gets it here.
	resp.Diagnostics.Append(setLeaseIdentity(ctx, resp.Identity, ref)...)
	client, token, ok := r.open(ctx, state, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if !state.Names.IsNull() {
		r.readSet(ctx, client, state, req.Private, resp)
		return
	}
	rctx, cancel := readContext(ctx)
	defer cancel()
	st, err := lookupLease(rctx, client, token, ref)
	err = readFailure(rctx, err)
	if leaseReleased(err) {
		resp.Diagnostics.Append(leaseReleasedElsewhere(ref, err))
		resp.State.RemoveResource(ctx)
		return
	}
	if errors.Is(err, s3lock.ErrLeaseLost) {
		st, curErr := client.Current(rctx, ref.name)
		resp.Diagnostics.Append(leaseLost(diag.SeverityWarning, ref, err, describeCurrent(ref.bucket, st, curErr), lostRemovedFromState))
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.Append(notRead(ref, err))
		return
	}
	state.Holder = types.StringValue(st.Holder)
	state.HeldUntil = timeValue(st.HeldUntilAtMost)
	if state.Order.IsNull() {
		// State written before order existed: it waited without order, but
		// order only matters while waiting, so it gets the default that
		// the configuration has unless it says otherwise (no plan diff).
		state.Order = types.StringValue(string(defaultOrder))
	}
	if state.Slots.IsNull() || state.Slot.IsNull() {
		// State written before slots existed: a mutex's lease.
		state.Slots, state.Slot = types.Int64Value(defaultSlots), types.Int64Value(0)
	}
	if state.Mode.IsNull() {
		// State written before shared leases: an exclusive lease.
		state.Mode = types.StringValue(modeExclusive)
	}
	if renewedSince(st.TrustedUntil, state.ExpiresAt) {
		state.ExpiresAt = timeValue(st.TrustedUntil)
	}
	if state.Leases.IsNull() {
		// State written before lock sets: the one lease.
		state.Leases = leasesValue([]s3lock.Token{ref.token()})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// lookupLease reads the lease of the state without disturbing its holder
// (it writes nothing): who holds it, until when it is trusted
// (TrustedUntil) and its cap (HeldUntilAtMost). It looks
// up the lease's token; without one (state written by hand, or by a
// provider that did not keep tokens) the token of the state's epoch (of its
// slot, for the lease of a slot), which accepts whoever holds that epoch, as
// an import does.
func lookupLease(ctx context.Context, c *s3lock.Client, token *s3lock.Token, l leaseRef) (s3lock.State, error) {
	t := l.token()
	if token != nil {
		t = *token
	}
	return c.Lookup(ctx, t)
}

// renewedSince reports whether until, the time the lease is trusted until as
// read now, shows that it was renewed since expires_at was stored: another
// process renewed it with its token (a later pipeline step). The estimate
// read now (State.TrustedUntil) is never later than the holder's own
// deadline, which expires_at records when this resource acquired or renewed
// the lease; expires_at is stored to the second (RFC 3339, the fraction
// dropped), so the two are compared to the second, and a lease nobody
// renewed keeps its expires_at. (An imported lease's expires_at is itself
// such an estimate, so it may move by a second, still to a time the lease
// is trusted.) A stored value that is not a time is replaced.
func renewedSince(until time.Time, stored types.String) bool {
	if until.IsZero() {
		return false // the store did not say what time it is: keep what we know
	}
	prev, err := time.Parse(time.RFC3339, stored.ValueString())
	return err != nil || until.Truncate(time.Second).After(prev)
}

// Update renews the lease when the plan asks for it (expires_at unknown);
// other in-place changes (order, renew_before, timeouts) only change state.
func (r *leaseResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state leaseResourceModelV0
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ref := stateRef(state)
	resp.Diagnostics.Append(setLeaseIdentity(ctx, resp.Identity, ref)...)
	if !plan.ExpiresAt.IsUnknown() {
		resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		return
	}
	client, token, ok := r.open(ctx, state, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if !state.Names.IsNull() {
		if r.updateSet(ctx, client, &plan, req.Private, &resp.Diagnostics) {
			resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		}
		return
	}
	lease, err := resumeLease(ctx, client, token, ref)
	if err == nil {
		err = lease.Renew(ctx)
		lease.Detach()
	}
	switch {
	case errors.Is(err, s3lock.ErrLeaseLost):
		resp.Diagnostics.Append(leaseLost(diag.SeverityError, ref, err, "", lostBeforeRenewal))
		return
	case err != nil:
		resp.Diagnostics.Append(notRenewed(ref, err))
		return
	}
	tflog.Info(ctx, "renewed lease", map[string]any{"bucket": ref.bucket, "lock": ref.name, "slot": ref.slot, "epoch": ref.epoch})
	plan.ExpiresAt = timeValue(lease.State().ExpiresAt)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

// Delete releases the lease. A lease that is already over is not an error:
// there is nothing left to release.
func (r *leaseResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state leaseResourceModelV0
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ref := stateRef(state)
	client, token, ok := r.open(ctx, state, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if !state.Names.IsNull() {
		r.deleteSet(ctx, client, req.Private, &resp.Diagnostics)
		return
	}
	releaseLease(ctx, client, token, ref, &resp.Diagnostics)
}

// releaseLease releases the lease of a token (of ref without one), for
// Delete. A lease already over is not an error: nothing is left to release.
func releaseLease(ctx context.Context, client *s3lock.Client, token *s3lock.Token, ref leaseRef, diags *diag.Diagnostics) {
	lease, err := resumeLease(ctx, client, token, ref)
	if err == nil {
		err = lease.Release(ctx)
	}
	fields := map[string]any{"bucket": ref.bucket, "lock": ref.name, "slot": ref.slot, "epoch": ref.epoch}
	var lost *s3lock.LeaseLostError
	switch {
	case err == nil:
		tflog.Info(ctx, "released lease", fields)
	case leaseReleased(err):
		// Released with its token by someone else (a pipeline step using
		// the CLI, say): nothing left to do, nothing was lost.
		tflog.Info(ctx, "lease was already released, nothing lost", fields)
	case errors.As(err, &lost):
		diags.Append(leaseLost(diag.SeverityWarning, ref, err, "", lostBeforeRelease))
	case errors.Is(err, s3lock.ErrLeaseLost):
		diags.Append(leaseLost(diag.SeverityError, ref, err, "", ""))
	default:
		diags.Append(notReleased(ref, err))
	}
}

// stateRef names the lease of a state: of a lock set's, the first lease
// (epoch is the first lease's). A shared lease's share is in its id.
func stateRef(state leaseResourceModelV0) leaseRef {
	name := state.Name.ValueString()
	if state.Name.IsNull() && len(state.Leases.Elements()) > 0 {
		if first, ok := state.Leases.Elements()[0].(types.Object); ok {
			if n, ok := first.Attributes()["name"].(types.String); ok {
				name = n.ValueString()
			}
		}
	}
	share := ""
	if id, err := parseLeaseID(state.ID.ValueString()); err == nil {
		share = id.share
	}
	return leaseRef{bucket: state.Bucket.ValueString(), name: name, epoch: uint64(state.Epoch.ValueInt64()),
		slot: int(state.Slot.ValueInt64()), share: share, maxHold: stateMaxHold(state)}
}

// stateMaxHold is the cap of a state's lease (max_hold); 0 without one, or
// when it does not parse (its validator says so).
func stateMaxHold(state leaseResourceModelV0) time.Duration {
	d, _ := parseDuration(maxHoldAttr, state.MaxHold, 0)
	return d
}

// capRef is ref with the cap of a state's lease, for the diagnostics.
func capRef(ref leaseRef, state leaseResourceModelV0) leaseRef {
	ref.maxHold = stateMaxHold(state)
	return ref
}

// open returns the client for the state's bucket and the lease token kept in
// private state (nil when there is none): how Read, Update and Delete start.
// ok is false when a diagnostic says why not.
func (r *leaseResource) open(ctx context.Context, state leaseResourceModelV0, p privateGetter, diags *diag.Diagnostics) (*s3lock.Client, *s3lock.Token, bool) {
	token, d := loadToken(ctx, p)
	diags.Append(d...)
	if diags.HasError() {
		return nil, nil, false
	}
	client, ok := r.factory.client(ctx, state.Bucket.ValueString(), diags)
	return client, token, ok
}

// mustDuration parses a duration constant.
func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("bad duration constant %q: %v", s, err))
	}
	return d
}

// replaceIfDurationChanged makes a change of lease_duration replace the
// lease only when the duration itself changes: rewriting "1h" as "60m" (or
// writing the imported "1h" differently) is an in-place update of the string.
func replaceIfDurationChanged() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(
		func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
			a, err1 := time.ParseDuration(req.StateValue.ValueString())
			b, err2 := time.ParseDuration(req.PlanValue.ValueString())
			resp.RequiresReplace = errors.Join(err1, err2) != nil || a != b
		},
		"Changing the duration replaces the lease.",
		"Changing the duration replaces the lease.",
	)
}

// replaceIfSlotsChanged makes a change of slots replace the lease, except
// in state written before slots existed (null there), whose lease is a
// mutex's: its default, 1, changes nothing.
func replaceIfSlotsChanged() planmodifier.Int64 {
	return int64planmodifier.RequiresReplaceIf(
		func(_ context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
			before := req.StateValue
			if before.IsNull() {
				before = types.Int64Value(defaultSlots)
			}
			resp.RequiresReplace = !before.Equal(req.PlanValue)
		},
		"Changing the number of holders the lock admits replaces the lease.",
		"Changing the number of holders the lock admits replaces the lease.",
	)
}

// replaceIfModeChanged makes a change of mode replace the lease, except in
// state written before shared leases (null there), whose lease is an
// exclusive one: its default, exclusive, changes nothing.
func replaceIfModeChanged() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(
		func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
			before := req.StateValue
			if before.IsNull() {
				before = types.StringValue(modeExclusive)
			}
			resp.RequiresReplace = !before.Equal(req.PlanValue)
		},
		"Changing whether the lease is shared replaces the lease.",
		"Changing whether the lease is shared replaces the lease.",
	)
}
