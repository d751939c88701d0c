package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ datasource.DataSource              = (*leaseDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*leaseDataSource)(nil)
)

// NewLeaseDataSource returns the s3lock_lease data source.
func NewLeaseDataSource() datasource.DataSource { return &leaseDataSource{} }

// leaseDataSource reads who holds one lock.
type leaseDataSource struct {
	factory *clientFactory
}

// leaseDataSourceModelV0 is the s3lock_lease data source.
type leaseDataSourceModelV0 struct {
	Bucket  types.String `tfsdk:"bucket"`
	Name    types.String `tfsdk:"name"`
	Waiters types.List   `tfsdk:"waiters"`
	lockStateModelV0
}

// waiterModelV0 is one waiter in the lock's line.
type waiterModelV0 struct {
	Position types.Int64  `tfsdk:"position"`
	Holder   types.String `tfsdk:"holder"`
	Order    types.String `tfsdk:"order"`
	JoinedAt types.String `tfsdk:"joined_at"`
	Key      types.String `tfsdk:"key"`
	Metadata types.Map    `tfsdk:"metadata"`
}

// waiterFrom converts an s3lock.Waiter.
func waiterFrom(w s3lock.Waiter) waiterModelV0 {
	return waiterModelV0{
		Position: types.Int64Value(int64(w.Position)),
		Holder:   stringOrNull(w.Holder),
		Order:    types.StringValue(string(w.Order)),
		JoinedAt: timeValue(w.JoinedAt),
		Key:      types.StringValue(w.Key),
		Metadata: metadataValue(w.Metadata),
	}
}

// waiterObject is the schema of one waiter; its Type is the element type of
// the waiters list.
func waiterObject() schema.NestedAttributeObject {
	return schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
		"position": schema.Int64Attribute{
			MarkdownDescription: "Place in the line: `1` is served next.",
			Computed:            true,
		},
		"holder": schema.StringAttribute{
			MarkdownDescription: "Who waits: the holder identity of the waiting run (the provider's `holder`, or " +
				"the CLI's or SDK's). Null if its ticket could not be read (a warning says why).",
			Computed: true,
		},
		"order": schema.StringAttribute{
			MarkdownDescription: "How it waits: `\"fifo\"`, or `\"newest\"` (it stands down when a newer " +
				"`\"newest\"` waiter queues).",
			Computed: true,
		},
		"joined_at": schema.StringAttribute{
			MarkdownDescription: "When it queued (RFC 3339, the waiter's clock).",
			Computed:            true,
		},
		"key": schema.StringAttribute{
			MarkdownDescription: "Key of its ticket in the bucket, `<name>/lock-line/<number>-<order>-<id>.json`.",
			Computed:            true,
		},
		"metadata": schema.MapAttribute{
			MarkdownDescription: "Metadata the waiter will attach to its lease, e.g. the run or commit it applies.",
			ElementType:         types.StringType,
			Computed:            true,
		},
	}}
}

// lockStateModelV0 is what s3lock.Client.Current says about a lock; shared by
// both data sources. For a slot lock (one that admits several holders), the
// lock's own attributes are its marker's and Holders lists its held slots;
// for a lock held shared, they are its shared epoch's (or, while a writer
// waits for the shared holders, the writer's: Pending) and Holders lists
// the shares.
type lockStateModelV0 struct {
	Held          types.Bool   `tfsdk:"held"`
	Released      types.Bool   `tfsdk:"released"`
	Epoch         types.Int64  `tfsdk:"epoch"`
	Key           types.String `tfsdk:"key"`
	Holder        types.String `tfsdk:"holder"`
	AcquiredAt    types.String `tfsdk:"acquired_at"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
	HeldUntil     types.String `tfsdk:"held_until_at_most"`
	ReleasedAt    types.String `tfsdk:"released_at"`
	ReleasedBy    types.String `tfsdk:"released_by"`
	LeaseDuration types.String `tfsdk:"lease_duration"`
	Metadata      types.Map    `tfsdk:"metadata"`
	Slots         types.Int64  `tfsdk:"slots"`
	Mode          types.String `tfsdk:"mode"`
	Pending       types.Bool   `tfsdk:"pending"`
	Holders       types.List   `tfsdk:"holders"`
}

// holderModelV0 is one held slot of a slot lock, or one share of a lock held
// shared (Slot 0).
type holderModelV0 struct {
	Slot          types.Int64  `tfsdk:"slot"`
	Epoch         types.Int64  `tfsdk:"epoch"`
	Key           types.String `tfsdk:"key"`
	Holder        types.String `tfsdk:"holder"`
	AcquiredAt    types.String `tfsdk:"acquired_at"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
	HeldUntil     types.String `tfsdk:"held_until_at_most"`
	LeaseDuration types.String `tfsdk:"lease_duration"`
	Metadata      types.Map    `tfsdk:"metadata"`
}

// holderFrom converts an entry of s3lock.State.Holders.
func holderFrom(h s3lock.State) holderModelV0 {
	return holderModelV0{
		Slot:          types.Int64Value(int64(h.Slot)),
		Epoch:         types.Int64Value(int64(h.Epoch)),
		Key:           types.StringValue(h.Key),
		Holder:        stringOrNull(h.Holder),
		AcquiredAt:    timeValue(h.AcquiredAt),
		ExpiresAt:     timeValue(h.ExpiresAt),
		HeldUntil:     timeValue(h.HeldUntilAtMost),
		LeaseDuration: types.StringValue(formatDuration(h.LeaseDuration)),
		Metadata:      metadataValue(h.Metadata),
	}
}

// holderObject is the schema of one held slot; its Type is the element type
// of the holders list.
func holderObject() schema.NestedAttributeObject {
	return schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
		"slot": schema.Int64Attribute{
			MarkdownDescription: "The slot, from `1` to `slots`; `0` for a shared holder.",
			Computed:            true,
		},
		"epoch": schema.Int64Attribute{
			MarkdownDescription: "Epoch of the slot's lease: the slot's fencing token (it grows with every holder " +
				"of the slot, not across slots). For a shared holder, the shared epoch, which all of them have.",
			Computed: true,
		},
		"key": schema.StringAttribute{
			MarkdownDescription: "Key of the lease's epoch object, `<name>/lock-slots/<slot>/lock-<epoch>.json`. " +
				"`<bucket>/<name>/lock-slots/<slot>/<epoch>` imports the lease into an `s3lock_lease` resource. For a " +
				"shared holder, its share's object, `<name>/lock-shared/<epoch>/<share>.json`, imported by " +
				"`<bucket>/<name>/lock-shared/<epoch>/<share>`.",
			Computed: true,
		},
		"holder": schema.StringAttribute{
			MarkdownDescription: "Who acquired the slot's lease (the share).",
			Computed:            true,
		},
		"acquired_at": schema.StringAttribute{
			MarkdownDescription: "When the slot's lease was acquired (RFC 3339, the holder's clock).",
			Computed:            true,
		},
		"expires_at": schema.StringAttribute{
			MarkdownDescription: "When the slot's lease lapses unless its holder renews it (RFC 3339, derived " +
				"from the store's clock).",
			Computed: true,
		},
		"held_until_at_most": schema.StringAttribute{
			MarkdownDescription: heldUntilAtMostDescription("the slot's lease"),
			Computed:            true,
		},
		"lease_duration": schema.StringAttribute{
			MarkdownDescription: "Duration of the slot's lease, e.g. `\"1h\"`.",
			Computed:            true,
		},
		"metadata": schema.MapAttribute{
			MarkdownDescription: "Metadata its holder attached to the slot's lease.",
			ElementType:         types.StringType,
			Computed:            true,
		},
	}}
}

// lockStateFrom converts an s3lock.State. A lock that never existed reads as
// not held, not released, epoch 0, slots 1, not pending, everything else
// null or empty. A slot lock has no lease_duration of its own (its marker
// never lapses), nor has a shared epoch (it has no holder of its own).
func lockStateFrom(ctx context.Context, s s3lock.State) (lockStateModelV0, diag.Diagnostics) {
	m := lockStateModelV0{
		Held:          types.BoolValue(s.Held),
		Released:      types.BoolValue(s.Released),
		Epoch:         types.Int64Value(int64(s.Epoch)),
		Key:           stringOrNull(s.Key),
		Holder:        stringOrNull(s.Holder),
		AcquiredAt:    timeValue(s.AcquiredAt),
		ExpiresAt:     timeValue(s.ExpiresAt),
		HeldUntil:     timeValue(s.HeldUntilAtMost),
		ReleasedAt:    timeValue(s.ReleasedAt),
		ReleasedBy:    stringOrNull(s.ReleasedBy),
		LeaseDuration: types.StringNull(),
		Metadata:      metadataValue(s.Metadata),
		Slots:         types.Int64Value(int64(max(s.Slots, defaultSlots))),
		Mode:          lockModeValue(s),
		Pending:       types.BoolValue(s.Pending),
	}
	if s.Epoch > 0 && s.Slots <= 1 && !s.Shared {
		m.LeaseDuration = types.StringValue(formatDuration(s.LeaseDuration))
	}
	holders := make([]holderModelV0, len(s.Holders))
	for i, h := range s.Holders {
		holders[i] = holderFrom(h)
	}
	var diags diag.Diagnostics
	m.Holders, diags = types.ListValueFrom(ctx, holderObject().Type(), holders)
	return m, diags
}

// lockStateAttributes are the schema attributes of lockStateModelV0.
func lockStateAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"held": schema.BoolAttribute{
			MarkdownDescription: "Whether the lock's newest lease is held now: neither released nor lapsed, " +
				"as judged by the store's clock. For a lock that admits several holders: whether any of its " +
				"slots is held; for a lock held shared: whether any shared holder holds it.",
			Computed: true,
		},
		"released": schema.BoolAttribute{
			MarkdownDescription: "Whether the newest lease was released (by its holder, or force-released). " +
				"A lease that lapsed is neither held nor released.",
			Computed: true,
		},
		"epoch": schema.Int64Attribute{
			MarkdownDescription: "The lock's newest epoch (the fencing token of its newest lease); `0` if the lock " +
				"never existed. For a lock that admits several holders, the epoch of its marker (the epoch that " +
				"made it such a lock, which an operator force-releases to change its `slots`); each holder's " +
				"epoch is in `holders`. For a lock held shared, its shared epoch, which every shared holder has.",
			Computed: true,
		},
		"key": schema.StringAttribute{
			MarkdownDescription: "Key of the newest epoch object; null if the lock never existed.",
			Computed:            true,
		},
		"holder": schema.StringAttribute{
			MarkdownDescription: "Who acquired the newest lease; null for a lock that admits several holders " +
				"and for a lock held shared (see `holders`). While a writer waits for the shared holders " +
				"(`pending`), that writer.",
			Computed: true,
		},
		"acquired_at": schema.StringAttribute{
			MarkdownDescription: "When the newest lease was acquired (RFC 3339, the holder's clock).",
			Computed:            true,
		},
		"expires_at": schema.StringAttribute{
			MarkdownDescription: "While the lease is held: when it lapses unless its holder renews it (RFC 3339, " +
				"derived from the store's clock). Null otherwise.",
			Computed: true,
		},
		"held_until_at_most": schema.StringAttribute{
			MarkdownDescription: heldUntilAtMostDescription("the newest lease") + " Shown whether or not " +
				"it is still held; null for a lock that admits several holders (see `holders`).",
			Computed: true,
		},
		"released_at": schema.StringAttribute{
			MarkdownDescription: "When the newest lease was released (RFC 3339, the releaser's clock); null unless released.",
			Computed:            true,
		},
		"released_by": schema.StringAttribute{
			MarkdownDescription: "Who force-released the newest lease; null unless an operator force-released it.",
			Computed:            true,
		},
		"lease_duration": schema.StringAttribute{
			MarkdownDescription: "Duration of the newest lease, e.g. `\"1h\"`; null for a lock that admits " +
				"several holders and for a lock held shared (see `holders`).",
			Computed: true,
		},
		"metadata": schema.MapAttribute{
			MarkdownDescription: "Metadata its holder attached to the newest lease.",
			ElementType:         types.StringType,
			Computed:            true,
		},
		"slots": schema.Int64Attribute{
			MarkdownDescription: "How many holders the lock admits: `1` for a mutex, which is also what a lock " +
				"that never existed reads as; n for a lock that admits n holders (its leases were acquired with " +
				"`slots` = n, or `s3lock run --slots n`), until an operator force-releases its marker. It is the " +
				"value that the `slots` of its leases must have.",
			Computed: true,
		},
		modeAttr: schema.StringAttribute{
			MarkdownDescription: modeResultDescription,
			Computed:            true,
		},
		"pending": schema.BoolAttribute{
			MarkdownDescription: pendingDescription,
			Computed:            true,
		},
		"holders": schema.ListNestedAttribute{
			MarkdownDescription: "For a lock that admits several holders: its held slots, sorted by slot, each " +
				"with its own lease. For a lock held shared (`mode` = `\"shared\"`): its shared holders, each " +
				"with its own share (`slot` 0), sorted by key; while a writer waits (`pending`), the shared holders " +
				"it waits for. Empty when none is held, and for a lock one exclusive holder holds, whose one lease " +
				"the other attributes describe.",
			Computed:     true,
			NestedObject: holderObject(),
		},
	}
}

func (d *leaseDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_lease"
}

func (d *leaseDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := lockStateAttributes()
	attrs["bucket"] = schema.StringAttribute{
		MarkdownDescription: "Bucket that holds the lock.",
		Required:            true,
		Validators:          []validator.String{bucketValidator()},
	}
	attrs["name"] = schema.StringAttribute{
		MarkdownDescription: "Name of the lock, such as `deploy/prod`.",
		Required:            true,
		Validators:          []validator.String{lockNameValidator{}},
	}
	attrs["waiters"] = schema.ListNestedAttribute{
		MarkdownDescription: "Who waits for the lock in its line, in the order they will be served: runs and " +
			"processes waiting with order `\"fifo\"` or `\"newest\"`. Waiters without order (`\"none\"`) " +
			"are not in the line and not listed. Empty when nobody queues.",
		Computed:     true,
		NestedObject: waiterObject(),
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads who holds a lock now, without taking it: its newest epoch, holder, expiry " +
			"and metadata, and who waits for it in its line; for a lock that admits several holders (`slots`), " +
			"each held slot with its own epoch, holder and expiry (`holders`); for a lock held shared, `mode` " +
			"`\"shared\"` and each shared holder (`holders`), and whether a writer waits for them (`pending`). A " +
			"lock that never existed reads as " +
			"not held, with epoch `0`. It costs a LIST and a GET for the lock (and a GET per slot of a lock that " +
			"admits several holders; for a lock held shared, a LIST and a GET per shared holder), and a LIST of " +
			"the line and a GET per waiter.",
		Attributes: attrs,
	}
}

func (d *leaseDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_lease data source")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	d.factory = f
}

func (d *leaseDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg leaseDataSourceModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bucket, name := cfg.Bucket.ValueString(), cfg.Name.ValueString()
	client, ok := d.factory.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	lock := leaseRef{bucket: bucket, name: name}
	rctx, cancel := readContext(ctx)
	defer cancel()
	st, err := client.Current(rctx, name)
	if err != nil {
		resp.Diagnostics.Append(lockNotRead(lock, readFailure(rctx, err)))
		return
	}
	line, err := client.Line(rctx, name)
	if err != nil {
		resp.Diagnostics.Append(lockNotRead(lock, readFailure(rctx, err)))
		return
	}
	waiters := make([]waiterModelV0, len(line))
	for i, w := range line {
		if w.Err != nil {
			resp.Diagnostics.Append(unreadableWaiter(bucket, name, w))
		}
		waiters[i] = waiterFrom(w)
	}
	list, diags := types.ListValueFrom(ctx, waiterObject().Type(), waiters)
	resp.Diagnostics.Append(diags...)
	cfg.Waiters = list
	cfg.lockStateModelV0, diags = lockStateFrom(ctx, st)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, cfg)...)
}
