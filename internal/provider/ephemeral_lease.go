package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ ephemeral.EphemeralResource                   = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithConfigure      = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithRenew          = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithClose          = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithValidateConfig = (*leaseEphemeralResource)(nil)
)

// NewLeaseEphemeralResource returns the s3lock_lease ephemeral resource.
func NewLeaseEphemeralResource() ephemeral.EphemeralResource { return &leaseEphemeralResource{} }

// leaseEphemeralResource is a lease held for exactly one Terraform run.
type leaseEphemeralResource struct {
	factory *clientFactory
}

// leaseEphemeralModelV0 is the configuration and result of the ephemeral
// s3lock_lease.
type leaseEphemeralModelV0 struct {
	Bucket        types.String `tfsdk:"bucket"`
	Name          types.String `tfsdk:"name"`
	Names         types.List   `tfsdk:"names"`
	LeaseDuration types.String `tfsdk:"lease_duration"`
	MaxHold       types.String `tfsdk:"max_hold"`
	WaitTimeout   types.String `tfsdk:"wait_timeout"`
	Metadata      types.Map    `tfsdk:"metadata"`
	Order         types.String `tfsdk:"order"`
	Scope         types.String `tfsdk:"scope"`
	Mode          types.String `tfsdk:"mode"`
	Slots         types.Int64  `tfsdk:"slots"`
	Slot          types.Int64  `tfsdk:"slot"`
	Epoch         types.Int64  `tfsdk:"epoch"`
	Key           types.String `tfsdk:"key"`
	Leases        types.List   `tfsdk:"leases"`
	Holder        types.String `tfsdk:"holder"`
	AcquiredAt    types.String `tfsdk:"acquired_at"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
	HeldUntil     types.String `tfsdk:"held_until_at_most"`
}

func (e *leaseEphemeralResource) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_lease"
}

func (e *leaseEphemeralResource) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A lease on an s3lock lock, held for exactly one Terraform run: from the first " +
			"time the run opens it (acquiring the lock, waiting up to `wait_timeout` while someone else holds it) " +
			"to the moment `terraform` exits — across the plan and the apply of `terraform apply`, one epoch, " +
			"renewed all along, also while an interactive apply waits for \"yes\". It is released as soon as " +
			"the run ends: success, failure, Ctrl-C, a plan-only run, a declined approval. If `terraform` is " +
			"killed (SIGKILL), the lease lapses after `lease_duration` instead. If the lease is lost during the " +
			"run (the store unreachable for longer than `lease_duration`, or an operator force-released it), " +
			"the provider interrupts the run as Ctrl-C does, so it starts no further changes, and says why. " +
			"A run that waited for the lock says in a warning whom it waited for, how long and its place in " +
			"line. The `Closing...` Terraform prints for the lease when the plan ends is not a release: the " +
			"run keeps the lease, under the same epoch, until `terraform` exits.\n\n" +
			"Make the resources that must run under the lock depend on it with " +
			"`depends_on = [ephemeral.s3lock_lease.<name>]`. A saved plan applied by another command " +
			"(`plan -out` in one job, `apply PLANFILE` in another) cannot share the lease: see the " +
			"serialize-applies guide. Under `s3lock run` of the same lock (alone or in a lock set), the lease is the CLI's. Where the " +
			"provider cannot hold the lease for the whole run (Windows, a provider under a debugger, " +
			"`S3LOCK_RUN_GUARD=off`), opening it fails and says why, unless `scope = \"phase\"` asks for a lease " +
			"per phase. With `slots` = n > 1 the lock admits n holders at once, and the run holds one of " +
			"its slots (`slot`). With `mode = \"shared\"` the run shares the lock with other shared leases (for " +
			"a plan, say, that must not overlap an apply), and an exclusive lease waits for them all.",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the lock.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the lock: a key path inside the bucket, such as `deploy/prod`. " +
					"Set exactly one of `name` and `names`.",
				Optional:   true,
				Validators: nameValidators(),
			},
			namesAttr: schema.ListAttribute{
				MarkdownDescription: namesDescription("`wait_timeout`", " Under `s3lock run` of a lock set that "+
					"holds every lock of `names`, the leases are the CLI's; under one that holds only some of them, "+
					"opening the lease fails and says why (taking the others while the run holds its own could wait "+
					"forever). With `scope = \"run\"` (the default), two blocks of one run that take the same set "+
					"share the run's leases; a block whose set shares only some locks with another block's fails."),
				ElementType: types.StringType,
				Optional:    true,
				Validators:  []validator.List{lockSetValidator{}},
			},
			"lease_duration": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long the lease stays valid unless renewed, as a duration such "+
					"as `\"90s\"` (between %s and %s). The provider renews it every third of this while the run "+
					"lasts, retrying failures, so this is how long others wait when a run dies without releasing "+
					"it, and how long the store may be unreachable before the lease is lost. Default `%q`.",
					formatDuration(s3lock.MinLeaseDuration), formatDuration(s3lock.MaxLeaseDuration), defaultEphemeralLeaseDuration),
				Optional: true,
				Computed: true,
				Validators: []validator.String{
					durationValidator{min: s3lock.MinLeaseDuration, max: s3lock.MaxLeaseDuration},
				},
			},
			maxHoldAttr: schema.StringAttribute{
				MarkdownDescription: maxHoldDescription(" The provider releases the lock at the cap, so that the " +
					"next run need not wait for it to lapse. With `scope = \"run\"` it interrupts the run at the cap " +
					"as at any lost lease (it starts no further changes) and says that the cap was reached; when two blocks of one run take the same lock, the first block's `max_hold` counts. " +
					"Under `s3lock run` of the same lock, the lease is the CLI's, and so is its cap (`--max-hold`)."),
				Optional:   true,
				Validators: []validator.String{maxHoldValidator},
			},
			"wait_timeout": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long to wait for the lock while someone else holds it, as a "+
					"duration such as `\"10m\"`; `\"0s\"` fails at once. Default `%q`.", defaultWaitTimeout),
				Optional: true,
				Computed: true,
				Validators: []validator.String{
					durationValidator{min: minWaitTimeout, max: maxWaitTimeout, allowZero: true},
				},
			},
			"metadata": schema.MapAttribute{
				MarkdownDescription: "Strings stored in the lease for everyone who reads the lock (at most 16 KiB in all).",
				ElementType:         types.StringType,
				Optional:            true,
				Validators:          []validator.Map{mapvalidator.KeysAre(stringvalidator.LengthAtLeast(1))},
			},
			"order": schema.StringAttribute{
				MarkdownDescription: orderDescription("`wait_timeout`", " A run that holds the lease for the "+
					"whole run queues once, when it first opens the lease (where each phase takes the lock on its "+
					"own, each phase queues). When two blocks of one run take the same lock, the first block's "+
					"order counts; under `s3lock run` of the same lock, the CLI has queued already."),
				Optional:   true,
				Computed:   true,
				Validators: []validator.String{orderValidator()},
			},
			"scope": schema.StringAttribute{
				MarkdownDescription: scopeDescription,
				Optional:            true,
				Computed:            true,
				Validators:          []validator.String{stringvalidator.OneOf(scopeRun, scopePhase)},
			},
			modeAttr: schema.StringAttribute{
				MarkdownDescription: modeDescription("`wait_timeout`", " Under `s3lock run` of the same lock, the "+
					"lease is the CLI's: a run that holds the lock exclusively covers a shared lease, but a run that "+
					"holds it shared does not cover an exclusive lease, which then fails and says why. The same holds "+
					"when two blocks of one run take the same lock: they share the run's one lease, the first "+
					"block's, and a block that asks for an exclusive lease of a lock the run holds shared fails."),
				Optional:   true,
				Computed:   true,
				Validators: modeValidators(),
			},
			"slots": schema.Int64Attribute{
				MarkdownDescription: slotsDescription("`wait_timeout`", " Under `s3lock run --slots n` of the "+
					"same lock, the lease is the CLI's slot, and `slots` must be n. When two blocks of one run take "+
					"the same lock, they share the run's one lease, and must ask for the same `slots`."),
				Optional:   true,
				Computed:   true,
				Validators: slotsValidators(),
			},
			"slot": schema.Int64Attribute{
				MarkdownDescription: slotDescription,
				Computed:            true,
			},
			"epoch": schema.Int64Attribute{
				MarkdownDescription: "Epoch of the lease: the fencing token of this run (of its slot, with `slots` > 1; " +
					"the shared epoch, which every shared holder of it has, with `mode = \"shared\"`).",
				Computed: true,
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "Key of the lease's epoch object in the bucket (its slot's, with `slots` > 1; its " +
					"share's, `<name>/lock-shared/<epoch>/<share>.json`, with `mode = \"shared\"`).",
				Computed: true,
			},
			"leases": schema.ListAttribute{
				MarkdownDescription: leasesDescription,
				ElementType:         leaseSetElemType,
				Computed:            true,
			},
			"holder": schema.StringAttribute{
				MarkdownDescription: "Identity written into the lease (the provider's `holder`).",
				Computed:            true,
			},
			"acquired_at": schema.StringAttribute{
				MarkdownDescription: "When the lease was acquired (RFC 3339); with `names`, when the set's last " +
					"lease was (from then on the run holds the whole set).",
				Computed: true,
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the lease ends unless renewed (RFC 3339), as of its acquisition; with " +
					"`names`, the earliest of the set's leases (a set ends when any of its leases ends).",
				Computed: true,
			},
			"held_until_at_most": schema.StringAttribute{
				MarkdownDescription: heldUntilAtMostDescription("the lease") + " With `names`, the earliest of the " +
					"set's caps.",
				Computed: true,
			},
		},
	}
}

func (e *leaseEphemeralResource) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_lease ephemeral resource")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	e.factory = f
}

// ValidateConfig refuses a max_hold that does not outlast lease_duration,
// and a shared lease of a slot lock.
func (e *leaseEphemeralResource) ValidateConfig(ctx context.Context, req ephemeral.ValidateConfigRequest, resp *ephemeral.ValidateConfigResponse) {
	var cfg leaseEphemeralModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d := checkMaxHold(cfg.MaxHold, cfg.LeaseDuration, defaultEphemeralLeaseDuration, describeLock(cfg.Bucket, cfg.Name)); d != nil {
		resp.Diagnostics.Append(d)
	}
	if d := checkSharedSlots(cfg.Mode, cfg.Slots); d != nil {
		resp.Diagnostics.Append(d)
	}
}

// Open reads the configuration and opens the lease in the one lifecycle
// that fits it (see leaseLife), which it records in the private data for
// Renew and Close.
func (e *leaseEphemeralResource) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var cfg leaseEphemeralModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	lock := leaseRef{bucket: cfg.Bucket.ValueString(), name: cfg.Name.ValueString()}
	names := setNames(ctx, cfg.Names, &resp.Diagnostics)
	if names != nil {
		lock.name = names[0] // the lock the settings' diagnostics name
	}
	set := e.settings(ctx, cfg, lock, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	client, ok := e.factory.client(ctx, lock.bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	var life leaseLife
	var got []openedLease
	if names != nil {
		life, got, ok = e.openSet(ctx, client, lock.bucket, names, set, &resp.Diagnostics)
	} else {
		var one openedLease
		life, one, ok = e.open(ctx, client, lock, set, &resp.Diagnostics)
		got = []openedLease{one}
	}
	if !ok {
		return
	}
	resp.Diagnostics.Append(storeLife(ctx, resp.Private, life)...)
	e.result(ctx, resp, set.applied(cfg), got)
}

// open chooses the lease's lifecycle, once: the lease of an enclosing
// `s3lock run` of the same lock when there is one, else a lease for the
// whole run (scope = "run", the default) or for this phase; and opens it.
func (e *leaseEphemeralResource) open(ctx context.Context, client *s3lock.Client, lock leaseRef, set openSettings, diags *diag.Diagnostics) (leaseLife, openedLease, bool) {
	in, ok, err := inheritedFrom(os.Getenv, lock.bucket, lock.name)
	switch {
	case err != nil:
		diags.Append(inheritedMalformed(lock, err))
		return nil, openedLease{}, false
	case ok:
		return e.openInherited(ctx, client, in, set, diags)
	case set.scope == scopeRun:
		return e.openRun(ctx, client, lock, set, diags)
	}
	return e.openPhase(ctx, client, lock, set, diags)
}

// Renew is called by Terraform at RenewAt while the run lasts. The lease
// renews itself (in this process per phase, in the run's guard for the whole
// run, in s3lock run when inherited), so Renew mostly reports whether it is
// still held: its lifecycle says.
func (e *leaseEphemeralResource) Renew(ctx context.Context, req ephemeral.RenewRequest, resp *ephemeral.RenewResponse) {
	life, ok := e.loadLife(ctx, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if at, ok := life.renew(ctx, &resp.Diagnostics); ok {
		resp.RenewAt = at
	}
}

// Close ends a phase's use of the lease: per phase it releases the lock; for
// the whole run, or inherited from s3lock run, it only checks the lease. A
// lease lost during the run is an error: the run relied on it.
func (e *leaseEphemeralResource) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	if life, ok := e.loadLife(ctx, req.Private, &resp.Diagnostics); ok {
		life.close(ctx, &resp.Diagnostics)
	}
}

// leaseLife is one lifecycle of the ephemeral lease, a type each: a lease
// inherited from `s3lock run` (inheritedLife), held for the whole run by the
// run's guard (runLife), or for one phase (phaseLife). Open chooses it once
// and records it in the private data (storeLife); Renew and Close get it
// back from there (loadLife) and ask it.
type leaseLife interface {
	// kind names the lifecycle in the private data.
	kind() string
	// store records in p what the lifecycle needs to find its lease again.
	store(ctx context.Context, p privateSetter) diag.Diagnostics
	// renew reports when Terraform should renew the lease next, if it is
	// still held.
	renew(ctx context.Context, diags *diag.Diagnostics) (time.Time, bool)
	// close ends the phase's use of the lease.
	close(ctx context.Context, diags *diag.Diagnostics)
}

// privateLifeKey is the private-data key whose value is the lease's
// lifecycle, one of the kinds below, as a JSON string (Terraform keeps only
// JSON in private data).
const privateLifeKey = "lifecycle"

// The kinds of leaseLife.
const (
	lifeInherited = "inherited"
	lifeRun       = "run"
	lifePhase     = "phase"
)

// storeLife records life in p: its kind and its own data.
func storeLife(ctx context.Context, p privateSetter, life leaseLife) diag.Diagnostics {
	kind, _ := json.Marshal(life.kind()) // a string: it cannot fail
	diags := p.SetKey(ctx, privateLifeKey, kind)
	diags.Append(life.store(ctx, p)...)
	return diags
}

// loadLife returns the lifecycle storeLife recorded in p.
func (e *leaseEphemeralResource) loadLife(ctx context.Context, p privateGetter, diags *diag.Diagnostics) (leaseLife, bool) {
	raw, d := p.GetKey(ctx, privateLifeKey)
	diags.Append(d...)
	if diags.HasError() {
		return nil, false
	}
	var kind string
	_ = json.Unmarshal(raw, &kind) // none, or not a string: no lifecycle
	if set, found, ok := e.loadSet(ctx, p, kind, diags); found {
		return set, ok
	}
	if kind == lifeInherited {
		if in, ok := loadInherited(ctx, p); ok {
			return inheritedLife{e: e, in: in}, true
		}
	}
	token, ok := e.token(ctx, p, diags)
	switch {
	case !ok:
		return nil, false
	case kind == lifeRun:
		return runLife{e: e, token: *token}, true
	case kind == lifePhase:
		return phaseLife{e: e, token: *token}, true
	}
	diags.Append(missingToken())
	return nil, false
}

// waitTimeoutAttr is the attribute that bounds the ephemeral lease's wait,
// for the diagnostics that say how to raise it.
const waitTimeoutAttr = "wait_timeout"

// openSettings are the settings of an Open, defaults applied.
type openSettings struct {
	dur, wait time.Duration
	maxHold   time.Duration // 0: no cap
	meta      map[string]string
	order     s3lock.Order
	scope     string
	slots     int
	shared    bool // mode = "shared"
}

// openedLease is a lease an Open got, for its result.
type openedLease struct {
	name              string
	epoch             uint64
	slot              int
	share             string // a shared lease's share id
	key, holder       string
	acquired, expires time.Time
	heldUntilAtMost   time.Time // the cap; zero without one
}

// applied is cfg with the settings' defaults filled in, for Open's result.
func (set openSettings) applied(cfg leaseEphemeralModelV0) leaseEphemeralModelV0 {
	cfg.LeaseDuration = types.StringValue(formatDuration(set.dur))
	cfg.WaitTimeout = types.StringValue(formatDuration(set.wait))
	cfg.Order = types.StringValue(string(set.order))
	cfg.Scope = types.StringValue(set.scope)
	cfg.Slots = types.Int64Value(int64(set.slots))
	cfg.Mode = types.StringValue(modeName(set.shared))
	return cfg
}

// acquireOptions are the options of an acquisition with these settings.
// The order matters only where the run queues: when it acquires the lock
// (a whole run's later phases find the lease held by the run's guard).
func (set openSettings) acquireOptions() []s3lock.Option {
	opts := []s3lock.Option{s3lock.WithLeaseDuration(set.dur), s3lock.WithOrder(set.order), s3lock.WithSlots(set.slots)}
	opts = append(opts, modeOptions(set.shared)...)
	if set.meta != nil {
		opts = append(opts, s3lock.WithMetadata(set.meta))
	}
	return append(opts, maxHoldOptions(set.maxHold)...)
}

// settings reads Open's lease_duration, wait_timeout, order, scope, mode,
// slots (with their defaults), max_hold and metadata.
func (e *leaseEphemeralResource) settings(ctx context.Context, cfg leaseEphemeralModelV0, lock leaseRef, diags *diag.Diagnostics) openSettings {
	var set openSettings
	var err error
	if set.dur, err = parseDuration("lease_duration", cfg.LeaseDuration, mustDuration(defaultEphemeralLeaseDuration)); err != nil {
		diags.Append(durationNotParsed(path.Root("lease_duration"), lock, err))
	}
	if set.wait, err = parseDuration("wait_timeout", cfg.WaitTimeout, mustDuration(defaultWaitTimeout)); err != nil {
		diags.Append(durationNotParsed(path.Root("wait_timeout"), lock, err))
	}
	if set.maxHold, err = parseDuration(maxHoldAttr, cfg.MaxHold, 0); err != nil {
		diags.Append(durationNotParsed(path.Root(maxHoldAttr), lock, err))
	}
	if set.order, err = parseOrder(cfg.Order); err != nil {
		diags.Append(invalidOrder(path.Root("order"), err))
	}
	set.scope = scopeRun
	if v := cfg.Scope; !v.IsNull() && !v.IsUnknown() {
		set.scope = v.ValueString()
	}
	set.slots = slotsOf(cfg.Slots)
	set.shared = sharedOf(cfg.Mode)
	var d diag.Diagnostics
	set.meta, d = metadataFrom(ctx, cfg.Metadata)
	diags.Append(d...)
	return set
}

// result sets Open's result: the configuration with the computed
// attributes of the leases got (one, or a set's in its order: the first
// gives epoch and key; the set is held from its last acquisition to its
// earliest expiry, and at most until its earliest cap), and when Terraform
// should renew them.
func (e *leaseEphemeralResource) result(ctx context.Context, resp *ephemeral.OpenResponse, cfg leaseEphemeralModelV0, got []openedLease) {
	first := got[0]
	acquired, expires, capAt := first.acquired, first.expires, time.Time{}
	tokens := make([]s3lock.Token, 0, len(got))
	for _, l := range got {
		if l.acquired.After(acquired) {
			acquired = l.acquired
		}
		if l.expires.Before(expires) {
			expires = l.expires
		}
		capAt = earliest(capAt, l.heldUntilAtMost)
		tokens = append(tokens, s3lock.Token{Bucket: cfg.Bucket.ValueString(), Name: l.name, Slot: l.slot, Epoch: l.epoch, Share: l.share})
	}
	cfg.Slot = types.Int64Value(int64(first.slot))
	cfg.Epoch = types.Int64Value(int64(first.epoch))
	cfg.Key = types.StringValue(first.key)
	cfg.Leases = leasesValue(tokens)
	cfg.Holder = types.StringValue(first.holder)
	cfg.AcquiredAt = timeValue(acquired)
	cfg.ExpiresAt = timeValue(expires)
	cfg.HeldUntil = timeValue(capAt)
	resp.Diagnostics.Append(resp.Result.Set(ctx, cfg)...)
	resp.RenewAt = renewAt(e.factory.now(), expires)
}

// token reads the lease token that Open stored in the private data.
func (e *leaseEphemeralResource) token(ctx context.Context, p privateGetter, diags *diag.Diagnostics) (*s3lock.Token, bool) {
	token, d := loadToken(ctx, p)
	diags.Append(d...)
	if diags.HasError() {
		return nil, false
	}
	if token == nil {
		diags.Append(missingToken())
		return nil, false
	}
	return token, true
}

// renewAt is when Terraform should renew a lease that expires at expires: a
// renewAtDivisor of the way there.
func renewAt(now, expires time.Time) time.Time {
	return now.Add(max(expires.Sub(now)/renewAtDivisor, 0))
}
