package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ list.ListResource              = (*leaseListResource)(nil)
	_ list.ListResourceWithConfigure = (*leaseListResource)(nil)
)

// NewLeaseListResource returns the s3lock_lease list resource, which lists
// the held leases under a prefix for `terraform query` (Terraform 1.14 and
// later).
func NewLeaseListResource() list.ListResource { return &leaseListResource{} }

// leaseListResource finds the leases that an s3lock_lease resource could
// import: every lock under a prefix whose newest lease is held now, and every
// held slot of a lock that admits several holders. It only reads (the SDK's
// List: one listing and one GET per lock and per slot); nothing is adopted
// until an import block imports a result.
type leaseListResource struct {
	factory *clientFactory
}

// leaseListModelV0 is the configuration of a list "s3lock_lease" block.
type leaseListModelV0 struct {
	Bucket types.String `tfsdk:"bucket"`
	Prefix types.String `tfsdk:"prefix"`
}

func (l *leaseListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_lease"
}

func (l *leaseListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the held leases under a prefix, for `terraform query`: each result is the " +
			"identity of an `s3lock_lease` (bucket, name and epoch; the slot for the lease of a slot; the share for a " +
			"shared lease) that an " +
			"import block can adopt, such as a lease an earlier pipeline step or the s3lock CLI took, and, when " +
			"Terraform asks for them (`include_resource = true`, or `-generate-config-out`), the attributes the " +
			"lease has once imported, so that the generated resource blocks import without changes. A lock that " +
			"admits several holders (`slots`) gives one result per held slot, each its own lease, and a lock held " +
			"shared one result per shared holder, each its own share. Locks that are " +
			"free, released or lapsed are left out (there is nothing to import), and so are locks whose newest " +
			"epoch object is unreadable (with a warning). Listing writes nothing: a lease is only adopted when an " +
			"import block imports it.",
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
		},
	}
}

func (l *leaseListResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_lease list resource")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	l.factory = f
}

// List lists the locks under the prefix with the SDK and returns the mutexes
// whose newest lease is held and the held slots of slot locks, sorted by name
// (and slot), at most req.Limit of them.
func (l *leaseListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg leaseListModelV0
	diags := req.Config.Get(ctx, &cfg)
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	bucket, prefix := cfg.Bucket.ValueString(), cfg.Prefix.ValueString()
	client, ok := l.factory.client(ctx, bucket, &diags)
	if !ok {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	rctx, cancel := readContext(ctx)
	states, err := client.List(rctx, prefix)
	err = readFailure(rctx, err)
	cancel()
	if err != nil {
		stream.Results = list.ListResultsStreamDiagnostics(diag.Diagnostics{listFailed(bucket, prefix, err)})
		return
	}
	tflog.Debug(ctx, "listed locks for terraform query", map[string]any{"bucket": bucket, "prefix": prefix, "locks": len(states)})
	stream.Results = func(push func(list.ListResult) bool) {
		found := int64(0)
		// lease pushes the result for a held lease; false: stop.
		lease := func(lock, held s3lock.State) bool {
			if req.Limit > 0 && found >= req.Limit {
				return false
			}
			found++
			return push(listedLease(ctx, req, bucket, lock, held))
		}
		for _, st := range states {
			switch {
			case st.Slots > 1 || st.Shared:
				// A slot lock: each held slot is a lease of its own; a
				// lock held shared: each share.
				for _, h := range st.Holders {
					if !lease(st, h) {
						return
					}
				}
			case st.Phase() == s3lock.PhaseHeld:
				if !lease(st, st) {
					return
				}
			case st.Phase() == s3lock.PhaseUnreadable:
				if !push(list.ListResult{Diagnostics: diag.Diagnostics{unreadableLock(bucket, st)}}) {
					return
				}
			default:
				// Free, released or lapsed: nothing to import.
			}
		}
	}
}

// listedLease is the result for a held lease of lock: held is the lock's
// state for a mutex, the slot's (an entry of lock.Holders) for a slot lock,
// the share's (an entry of lock.Holders) for a lock held shared.
// It has the lease's identity, a display name and, when Terraform asks for
// it, the state an import of it would have.
func listedLease(ctx context.Context, req list.ListRequest, bucket string, lock, held s3lock.State) list.ListResult {
	ref := leaseRef{bucket: bucket, name: lock.Name, epoch: held.Epoch, slot: held.Slot}
	if lock.Shared {
		ref.share = shareOfKey(lock.Name, held.Epoch, held.Key)
	}
	result := req.NewListResult(ctx)
	result.DisplayName = fmt.Sprintf("%s epoch %d, held by %s", lock.Name, held.Epoch, held.Holder)
	switch {
	case ref.slot > 0:
		result.DisplayName = fmt.Sprintf("%s slot %d of %d, epoch %d, held by %s", lock.Name, ref.slot, lock.Slots,
			held.Epoch, held.Holder)
	case ref.share != "":
		result.DisplayName = fmt.Sprintf("%s shared epoch %d, share %s, held by %s", lock.Name, held.Epoch, ref.share,
			held.Holder)
	}
	result.Diagnostics.Append(setLeaseIdentity(ctx, result.Identity, ref)...)
	if req.IncludeResource {
		result.Diagnostics.Append(setListedState(ctx, result.Resource, ref, max(lock.Slots, 1), held)...)
	}
	return result
}

// setListedState writes the state that ImportState gives the lease ref of a
// lock that admits slots holders, from what the listing read (st, the
// slot's state for a slot lease), without adopting the lease: so that the
// resource blocks `terraform query -generate-config-out` writes from it plan
// no changes after the import. expires_at is the time the lease is trusted
// until, as a refresh reads it.
func setListedState(ctx context.Context, res *tfsdk.Resource, ref leaseRef, slots int, st s3lock.State) diag.Diagnostics {
	var diags diag.Diagnostics
	set := func(attr string, v any) {
		diags.Append(res.SetAttribute(ctx, path.Root(attr), v)...)
	}
	set("id", types.StringValue(ref.id()))
	set("bucket", types.StringValue(ref.bucket))
	set("name", types.StringValue(ref.name))
	set("lease_duration", types.StringValue(formatDuration(st.LeaseDuration)))
	set("metadata", metadataValue(st.Metadata))
	// As on import: how the lease was waited for is not recorded in it.
	set("order", types.StringValue(string(defaultOrder)))
	set(modeAttr, types.StringValue(modeName(ref.share != "")))
	set("slots", types.Int64Value(int64(slots)))
	set("slot", types.Int64Value(int64(ref.slot)))
	set("epoch", types.Int64Value(int64(ref.epoch)))
	set("key", types.StringValue(st.Key))
	set("leases", leasesValue([]s3lock.Token{ref.token()})) // the one lease, as a refresh gives it
	set("holder", types.StringValue(st.Holder))
	set("acquired_at", timeValue(st.AcquiredAt))
	set("expires_at", timeValue(st.TrustedUntil))
	set("held_until_at_most", timeValue(st.HeldUntilAtMost))
	if d := maxHoldOf(st); d > 0 {
		set(maxHoldAttr, types.StringValue(formatDuration(d)))
	}
	return diags
}
