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
	_ datasource.DataSource              = (*leasesDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*leasesDataSource)(nil)
)

// NewLeasesDataSource returns the s3lock_leases data source.
func NewLeasesDataSource() datasource.DataSource { return &leasesDataSource{} }

// leasesDataSource lists every lock under a prefix with its state.
type leasesDataSource struct {
	factory *clientFactory
}

// leasesDataSourceModelV0 is the s3lock_leases data source.
type leasesDataSourceModelV0 struct {
	Bucket types.String `tfsdk:"bucket"`
	Prefix types.String `tfsdk:"prefix"`
	Leases types.List   `tfsdk:"leases"`
}

// leaseEntryModelV0 is one lock in s3lock_leases.
type leaseEntryModelV0 struct {
	Name        types.String `tfsdk:"name"`
	WaiterCount types.Int64  `tfsdk:"waiter_count"`
	lockStateModelV0
}

func (d *leasesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_leases"
}

func (d *leasesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists every lock whose name starts with a prefix, with who holds it now: for " +
			"dashboards and policy checks (\"who holds what right now\"). It lists the keys under the prefix " +
			"and reads each lock's newest epoch object (and each held slot of a lock that admits several " +
			"holders, listed in `holders`); `waiter_count` comes from the same listing. The `s3lock_lease` data " +
			"source tells who waits for one lock.",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the locks.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "Only locks whose name starts with this string, e.g. `\"deploy/\"`. " +
					"Default: every lock in the bucket.",
				Optional:   true,
				Validators: []validator.String{prefixValidator()},
			},
			"leases": schema.ListNestedAttribute{
				MarkdownDescription: "The locks under the prefix, sorted by name, each with the state of its " +
					"newest lease (held or not).",
				Computed:     true,
				NestedObject: leaseEntryObject(),
			},
		},
	}
}

func (d *leasesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_leases data source")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	d.factory = f
}

func (d *leasesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg leasesDataSourceModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bucket, prefix := cfg.Bucket.ValueString(), cfg.Prefix.ValueString()
	client, ok := d.factory.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	rctx, cancel := readContext(ctx)
	defer cancel()
	states, err := client.List(rctx, prefix)
	if err != nil {
		resp.Diagnostics.Append(listFailed(bucket, prefix, readFailure(rctx, err)))
		return
	}
	entries := make([]leaseEntryModelV0, len(states))
	for i, st := range states {
		if st.Phase() == s3lock.PhaseUnreadable {
			resp.Diagnostics.Append(unreadableLock(bucket, st))
		}
		state, diags := lockStateFrom(ctx, st)
		resp.Diagnostics.Append(diags...)
		entries[i] = leaseEntryModelV0{Name: types.StringValue(st.Name), WaiterCount: types.Int64Value(int64(st.Waiters)),
			lockStateModelV0: state}
	}
	list, diags := types.ListValueFrom(ctx, leaseEntryObject().Type(), entries)
	resp.Diagnostics.Append(diags...)
	cfg.Leases = list
	resp.Diagnostics.Append(resp.State.Set(ctx, cfg)...)
}

// leaseEntryObject is the schema of one lock in s3lock_leases: the lock
// state's attributes and the lock's name. Its Type is the element type of
// the leases list, derived from the schema rather than declared again.
func leaseEntryObject() schema.NestedAttributeObject {
	entry := lockStateAttributes()
	entry["name"] = schema.StringAttribute{
		MarkdownDescription: "Name of the lock.",
		Computed:            true,
	}
	entry["waiter_count"] = schema.Int64Attribute{
		MarkdownDescription: "How many runs and processes wait for the lock in its line (order `\"fifo\"` or " +
			"`\"newest\"`; waiters without order are not counted), counted from the same listing as the locks " +
			"(no extra request).",
		Computed: true,
	}
	return schema.NestedAttributeObject{Attributes: entry}
}
