package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = (*leasesDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*leasesDataSource)(nil)
)

// prefixPattern accepts the prefixes of valid lock names.
var prefixPattern = regexp.MustCompile(`^$|^[^/](?:[^/]|/[^/])*/?$`)

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
	Name types.String `tfsdk:"name"`
	lockStateModelV0
}

func (d *leasesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_leases"
}

func (d *leasesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	entry := lockStateAttributes()
	entry["name"] = schema.StringAttribute{
		MarkdownDescription: "Name of the lock.",
		Computed:            true,
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists every lock whose name starts with a prefix, with who holds it now: for " +
			"dashboards and policy checks (\"who holds what right now\"). It lists the keys under the prefix " +
			"and reads each lock's newest epoch object.",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the locks.",
				Required:            true,
				Validators:          []validator.String{bucketValidator{}},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "Only locks whose name starts with this string, e.g. `\"deploy/\"`. " +
					"Default: every lock in the bucket.",
				Optional: true,
				Validators: []validator.String{stringvalidator.RegexMatches(prefixPattern,
					"must not start with a slash or contain \"//\": lock names never do")},
			},
			"leases": schema.ListNestedAttribute{
				MarkdownDescription: "The locks under the prefix, sorted by name, each with the state of its " +
					"newest lease (held or not).",
				Computed:     true,
				NestedObject: schema.NestedAttributeObject{Attributes: entry},
			},
		},
	}
}

func (d *leasesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_leases data source")
	if err != nil {
		resp.Diagnostics.AddError("Unexpected provider data", err.Error())
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
	what := fmt.Sprintf("locks under prefix %q", prefix)
	client, ok := dataSourceClient(ctx, d.factory, bucket, what, &resp.Diagnostics)
	if !ok {
		return
	}
	states, err := client.List(ctx, prefix)
	if err != nil {
		resp.Diagnostics.AddError("Could not list locks",
			fmt.Sprintf("Locks under prefix %q in bucket %q (s3://%s/%s*): %v%s", prefix, bucket, bucket, prefix, err,
				hintSuffix(bucket, prefix+"*", err)))
		return
	}
	entries := make([]leaseEntryModelV0, len(states))
	for i, st := range states {
		if st.Err != nil {
			resp.Diagnostics.AddWarning("Unreadable lock",
				fmt.Sprintf("Lock %q in bucket %q is listed as not held: %v", st.Name, bucket, st.Err))
		}
		entries[i] = leaseEntryModelV0{Name: types.StringValue(st.Name), lockStateModelV0: lockStateFrom(st)}
	}
	list, diags := types.ListValueFrom(ctx, types.ObjectType{AttrTypes: lockStateAttrTypes()}, entries)
	resp.Diagnostics.Append(diags...)
	cfg.Leases = list
	resp.Diagnostics.Append(resp.State.Set(ctx, cfg)...)
}

// hintSuffix is hintFor as a paragraph to append, or "".
func hintSuffix(bucket, objects string, err error) string {
	if h := hintFor(bucket, objects, err); h != "" {
		return "\n\n" + h
	}
	return ""
}
