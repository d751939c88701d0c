package provider

import (
	"context"
	"errors"
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
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ ephemeral.EphemeralResource              = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithRenew     = (*leaseEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithClose     = (*leaseEphemeralResource)(nil)
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
	LeaseDuration types.String `tfsdk:"lease_duration"`
	WaitTimeout   types.String `tfsdk:"wait_timeout"`
	Metadata      types.Map    `tfsdk:"metadata"`
	Order         types.String `tfsdk:"order"`
	Scope         types.String `tfsdk:"scope"`
	Slots         types.Int64  `tfsdk:"slots"`
	Slot          types.Int64  `tfsdk:"slot"`
	Epoch         types.Int64  `tfsdk:"epoch"`
	Key           types.String `tfsdk:"key"`
	Holder        types.String `tfsdk:"holder"`
	AcquiredAt    types.String `tfsdk:"acquired_at"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
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
			"serialize-applies guide. Under `s3lock run` of the same lock, the lease is the CLI's. Where the " +
			"provider cannot hold the lease for the whole run (Windows, a provider under a debugger, " +
			"`S3LOCK_RUN_GUARD=off`), opening it fails and says why, unless `scope = \"phase\"` asks for a lease " +
			"per phase. With `slots` = n > 1 the lock admits n holders at once, and the run holds one of " +
			"its slots (`slot`).",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the lock.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the lock: a key path inside the bucket, such as `deploy/prod`.",
				Required:            true,
				Validators:          []validator.String{lockNameValidator{}},
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
				MarkdownDescription: "Epoch of the lease: the fencing token of this run (of its slot, with `slots` > 1).",
				Computed:            true,
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "Key of the lease's epoch object in the bucket (its slot's, with `slots` > 1).",
				Computed:            true,
			},
			"holder": schema.StringAttribute{
				MarkdownDescription: "Identity written into the lease (the provider's `holder`).",
				Computed:            true,
			},
			"acquired_at": schema.StringAttribute{
				MarkdownDescription: "When the lease was acquired (RFC 3339).",
				Computed:            true,
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the lease ends unless renewed (RFC 3339), as of its acquisition.",
				Computed:            true,
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

// Open acquires the lock: for the whole run (see ephemeral_lease_run.go)
// when Terraform started this process, else for this phase.
func (e *leaseEphemeralResource) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var cfg leaseEphemeralModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bucket, name := cfg.Bucket.ValueString(), cfg.Name.ValueString()
	lock := leaseRef{bucket: bucket, name: name}
	set := e.settings(ctx, cfg, lock, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	client, ok := e.factory.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	cfg.LeaseDuration = types.StringValue(formatDuration(set.dur))
	cfg.WaitTimeout = types.StringValue(formatDuration(set.wait))
	cfg.Order = types.StringValue(string(set.order))
	cfg.Scope = types.StringValue(set.scope)
	cfg.Slots = types.Int64Value(int64(set.slots))
	in, ok, err := inheritedFrom(os.Getenv, bucket, name)
	if err != nil {
		resp.Diagnostics.Append(inheritedMalformed(lock, err))
		return
	}
	if ok {
		if in.Slots != set.slots {
			resp.Diagnostics.Append(inheritedSlotsMismatch(in, set.slots))
			return
		}
		st, ok := checkInherited(ctx, client, in, &resp.Diagnostics)
		if !ok {
			return
		}
		resp.Diagnostics.Append(storeInherited(ctx, resp.Private, in)...)
		e.result(ctx, resp, cfg, openedLease{epoch: in.Epoch, slot: in.Slot, key: st.Key, holder: st.Holder,
			acquired: st.AcquiredAt, expires: st.ExpiresAt})
		return
	}
	// Per phase, the lease renews itself in this provider process for as
	// long as the phase lasts (every third of lease_duration, retrying
	// failures until it would lapse); Terraform's Renew calls only check on
	// it. For the whole run, the run's guard renews it.
	// The order matters only here, where the run queues: the whole run's
	// later phases find the lease held by the run's guard.
	opts := []s3lock.AcquireOption{s3lock.WithLeaseFor(set.dur), s3lock.WithOrder(set.order), s3lock.Slots(set.slots)}
	if set.meta != nil {
		opts = append(opts, s3lock.WithMetadata(set.meta))
	}
	if set.scope == scopeRun {
		held, ok := e.openForRun(ctx, client, lock, set, func() (*s3lock.Lease, lockWait, error) {
			return acquireLease(ctx, e.factory, client, name, set.wait, append(opts, s3lock.WithoutAutoRenew())...)
		}, &resp.Diagnostics)
		if !ok {
			return
		}
		resp.Diagnostics.Append(storeToken(ctx, resp.Private, held.Token)...)
		resp.Diagnostics.Append(markRunLease(ctx, resp.Private)...)
		e.result(ctx, resp, cfg, openedLease{epoch: held.Token.Epoch, slot: held.Token.Slot, key: held.Key,
			holder: held.Holder, acquired: held.AcquiredAt, expires: held.ExpiresAt})
		return
	}
	lease, waited, err := acquireLease(ctx, e.factory, client, name, set.wait, opts...)
	if err != nil {
		resp.Diagnostics.Append(acquisitionFailed(lock, err, waitTimeoutAttr))
		return
	}
	token := lease.Token()
	if waited.waited() {
		resp.Diagnostics.Append(lockWaited(tokenRef(token), waited, false))
	}
	tflog.Info(ctx, "acquired lock for this phase", map[string]any{"bucket": bucket, "lock": name, "slot": token.Slot,
		"epoch": lease.Epoch(), "key": token.Key()})
	resp.Diagnostics.Append(storeToken(ctx, resp.Private, token)...)
	e.factory.leases.add(lease)
	e.result(ctx, resp, cfg, openedLease{epoch: lease.Epoch(), slot: token.Slot, key: token.Key(),
		holder: lease.Holder(), acquired: lease.AcquiredAt(), expires: lease.ExpiresAt()})
}

// waitTimeoutAttr is the attribute that bounds the ephemeral lease's wait,
// for the diagnostics that say how to raise it.
const waitTimeoutAttr = "wait_timeout"

// openSettings are the settings of an Open, defaults applied.
type openSettings struct {
	dur, wait time.Duration
	meta      map[string]string
	order     s3lock.Order
	scope     string
	slots     int
}

// openedLease is the lease an Open got, for its result.
type openedLease struct {
	epoch             uint64
	slot              int
	key, holder       string
	acquired, expires time.Time
}

// settings reads Open's lease_duration, wait_timeout, order, scope (with
// their defaults) and metadata.
func (e *leaseEphemeralResource) settings(ctx context.Context, cfg leaseEphemeralModelV0, lock leaseRef, diags *diag.Diagnostics) openSettings {
	var set openSettings
	var err error
	if set.dur, err = parseDuration("lease_duration", cfg.LeaseDuration, mustDuration(defaultEphemeralLeaseDuration)); err != nil {
		diags.Append(durationNotParsed(path.Root("lease_duration"), lock, err))
	}
	if set.wait, err = parseDuration("wait_timeout", cfg.WaitTimeout, mustDuration(defaultWaitTimeout)); err != nil {
		diags.Append(durationNotParsed(path.Root("wait_timeout"), lock, err))
	}
	if set.order, err = parseOrder(cfg.Order); err != nil {
		diags.Append(invalidOrder(path.Root("order"), err))
	}
	set.scope = scopeRun
	if v := cfg.Scope; !v.IsNull() && !v.IsUnknown() {
		set.scope = v.ValueString()
	}
	set.slots = slotsOf(cfg.Slots)
	var d diag.Diagnostics
	set.meta, d = metadataFrom(ctx, cfg.Metadata)
	diags.Append(d...)
	return set
}

// result sets Open's result: the configuration with the lease's computed
// attributes, and when Terraform should renew it.
func (e *leaseEphemeralResource) result(ctx context.Context, resp *ephemeral.OpenResponse, cfg leaseEphemeralModelV0, l openedLease) {
	cfg.Slot = types.Int64Value(int64(l.slot))
	cfg.Epoch = types.Int64Value(int64(l.epoch))
	cfg.Key = types.StringValue(l.key)
	cfg.Holder = types.StringValue(l.holder)
	cfg.AcquiredAt = timeValue(l.acquired)
	cfg.ExpiresAt = timeValue(l.expires)
	resp.Diagnostics.Append(resp.Result.Set(ctx, cfg)...)
	resp.RenewAt = renewAt(e.factory.now(), l.expires)
}

// Renew is called by Terraform at RenewAt while the run lasts. The lease
// renews itself (in this process per phase, in the run's guard for the whole
// run, in s3lock run when inherited), so Renew reports whether it is still
// held; only a per-phase lease this process does not hold (opened by another
// instance of the provider) is renewed here.
func (e *leaseEphemeralResource) Renew(ctx context.Context, req ephemeral.RenewRequest, resp *ephemeral.RenewResponse) {
	if in, ok := loadInherited(ctx, req.Private); ok {
		e.checkInheritedLease(ctx, in, &resp.Diagnostics, func(st s3lock.State) {
			resp.RenewAt = renewAt(e.factory.now(), st.ExpiresAt)
		})
		return
	}
	token, ok := e.token(ctx, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if isRunLease(ctx, req.Private) {
		if held, ok := e.checkRunLease(ctx, *token, renewFailed, &resp.Diagnostics); ok {
			resp.RenewAt = renewAt(e.factory.now(), held.ExpiresAt)
		}
		return
	}
	if lease, ok := e.factory.leases.get(*token); ok {
		if err := lease.Err(); err != nil {
			resp.Diagnostics.Append(leaseLost(diag.SeverityError, tokenRef(*token), err, "", ""))
			return
		}
		resp.RenewAt = renewAt(e.factory.now(), lease.ExpiresAt())
		return
	}
	lease, ok := e.resume(ctx, *token, renewFailed, &resp.Diagnostics)
	if !ok {
		return
	}
	err := lease.Renew(ctx)
	lease.Detach()
	if err != nil {
		resp.Diagnostics.Append(lockFailed(renewFailed, tokenRef(*token), err, ""))
		return
	}
	tflog.Debug(ctx, "renewed lease", map[string]any{"bucket": token.Bucket, "lock": token.Name, "epoch": token.Epoch})
	resp.RenewAt = renewAt(e.factory.now(), lease.ExpiresAt())
}

// Close ends a phase: per phase it releases the lock; for the whole run it
// only checks the lease (the run's guard releases it as terraform exits). A
// lease lost during the run is an error: the run relied on it.
func (e *leaseEphemeralResource) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	if in, ok := loadInherited(ctx, req.Private); ok {
		// s3lock run releases it when its command ends.
		e.checkInheritedLease(ctx, in, &resp.Diagnostics, func(s3lock.State) {})
		return
	}
	token, ok := e.token(ctx, req.Private, &resp.Diagnostics)
	if !ok {
		return
	}
	if isRunLease(ctx, req.Private) {
		// The lease belongs to the run: its guard releases it when
		// terraform exits, so that the next phase (the apply after the
		// plan) runs under the same epoch.
		if _, ok := e.checkRunLease(ctx, *token, checkFailed, &resp.Diagnostics); ok {
			tflog.Debug(ctx, "phase done; the lease stays held until the run ends", map[string]any{
				"bucket": token.Bucket, "lock": token.Name, "epoch": token.Epoch,
			})
		}
		return
	}
	lease, live := e.factory.leases.get(*token)
	if !live {
		if lease, ok = e.resume(ctx, *token, releaseFailed, &resp.Diagnostics); !ok {
			return
		}
	}
	err := lease.Release(ctx)
	if err == nil || errors.Is(err, s3lock.ErrLeaseLost) {
		e.factory.leases.remove(*token)
	}
	if err != nil {
		resp.Diagnostics.Append(lockFailed(releaseFailed, tokenRef(*token), err, ""))
		return
	}
	tflog.Info(ctx, "released lock at the end of the run", map[string]any{"bucket": token.Bucket, "lock": token.Name, "epoch": token.Epoch})
}

// resume takes over, for one call, a per-phase lease that another instance
// of the provider opened; summary says what failed when it cannot.
func (e *leaseEphemeralResource) resume(ctx context.Context, token s3lock.Token, summary string, diags *diag.Diagnostics) (*s3lock.Lease, bool) {
	client, ok := e.factory.client(ctx, token.Bucket, diags)
	if !ok {
		return nil, false
	}
	lease, err := client.Resume(ctx, token, s3lock.WithoutAutoRenew())
	if err != nil {
		diags.Append(lockFailed(summary, tokenRef(token), err, ""))
		return nil, false
	}
	return lease, true
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

// checkInheritedLease checks, for Renew and Close, that the lease inherited
// from s3lock run is still the lock's current one, and calls ok with the
// lease's state if so.
func (e *leaseEphemeralResource) checkInheritedLease(ctx context.Context, in inheritedLease, diags *diag.Diagnostics, ok func(s3lock.State)) {
	client, good := e.factory.client(ctx, in.Bucket, diags)
	if !good {
		return
	}
	if st, good := checkInherited(ctx, client, in, diags); good {
		ok(st)
	}
}
