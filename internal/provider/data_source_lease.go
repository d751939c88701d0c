package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
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
	Bucket types.String `tfsdk:"bucket"`
	Name   types.String `tfsdk:"name"`
	lockStateModelV0
}

// lockStateModelV0 is what s3lock.Client.Current says about a lock; shared by
// both data sources.
type lockStateModelV0 struct {
	Held          types.Bool   `tfsdk:"held"`
	Released      types.Bool   `tfsdk:"released"`
	Epoch         types.Int64  `tfsdk:"epoch"`
	Key           types.String `tfsdk:"key"`
	Holder        types.String `tfsdk:"holder"`
	AcquiredAt    types.String `tfsdk:"acquired_at"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
	ReleasedAt    types.String `tfsdk:"released_at"`
	ReleasedBy    types.String `tfsdk:"released_by"`
	LeaseDuration types.String `tfsdk:"lease_duration"`
	Metadata      types.Map    `tfsdk:"metadata"`
}

// lockStateFrom converts an s3lock.State. A lock that never existed reads as
// not held, not released, epoch 0, everything else null.
func lockStateFrom(s s3lock.State) lockStateModelV0 {
	m := lockStateModelV0{
		Held:          types.BoolValue(s.Held),
		Released:      types.BoolValue(s.Released),
		Epoch:         types.Int64Value(int64(s.Epoch)),
		Key:           stringOrNull(s.Key),
		Holder:        stringOrNull(s.Holder),
		AcquiredAt:    timeValue(s.AcquiredAt),
		ExpiresAt:     timeValue(s.ExpiresAt),
		ReleasedAt:    timeValue(s.ReleasedAt),
		ReleasedBy:    stringOrNull(s.ReleasedBy),
		LeaseDuration: types.StringNull(),
		Metadata:      metadataValue(s.Metadata),
	}
	if s.Epoch > 0 {
		m.LeaseDuration = types.StringValue(formatDuration(s.LeaseDuration))
	}
	return m
}

// lockStateAttributes are the schema attributes of lockStateModelV0.
func lockStateAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"held": schema.BoolAttribute{
			MarkdownDescription: "Whether the lock's newest lease is held now: neither released nor lapsed, " +
				"as judged by the store's clock.",
			Computed: true,
		},
		"released": schema.BoolAttribute{
			MarkdownDescription: "Whether the newest lease was released (by its holder, or force-released). " +
				"A lease that lapsed is neither held nor released.",
			Computed: true,
		},
		"epoch": schema.Int64Attribute{
			MarkdownDescription: "The lock's newest epoch (the fencing token of its newest lease); `0` if the lock " +
				"never existed.",
			Computed: true,
		},
		"key": schema.StringAttribute{
			MarkdownDescription: "Key of the newest epoch object; null if the lock never existed.",
			Computed:            true,
		},
		"holder": schema.StringAttribute{
			MarkdownDescription: "Who acquired the newest lease.",
			Computed:            true,
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
		"released_at": schema.StringAttribute{
			MarkdownDescription: "When the newest lease was released (RFC 3339, the releaser's clock); null unless released.",
			Computed:            true,
		},
		"released_by": schema.StringAttribute{
			MarkdownDescription: "Who force-released the newest lease; null unless an operator force-released it.",
			Computed:            true,
		},
		"lease_duration": schema.StringAttribute{
			MarkdownDescription: "Duration of the newest lease, e.g. `\"1h\"`.",
			Computed:            true,
		},
		"metadata": schema.MapAttribute{
			MarkdownDescription: "Metadata its holder attached to the newest lease.",
			ElementType:         types.StringType,
			Computed:            true,
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
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads who holds a lock now, without taking it: its newest epoch, holder, expiry " +
			"and metadata. A lock that never existed reads as not held, with epoch `0`.",
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
	st, err := client.Current(ctx, name)
	if err != nil {
		resp.Diagnostics.Append(lockFailed(lockReadFailed, leaseRef{bucket: bucket, name: name}, err, ""))
		return
	}
	cfg.lockStateModelV0 = lockStateFrom(st)
	resp.Diagnostics.Append(resp.State.Set(ctx, cfg)...)
}
