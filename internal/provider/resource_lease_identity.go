package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The resource identity of s3lock_lease (Terraform 1.12 and later, OpenTofu
// 1.12 and later): the bucket, the lock name and the epoch, the same parts as
// the import ID, and, for the lease of one slot of a lock that admits several
// holders, the slot (null for a mutex's lease, and in identities stored
// before slots existed), and, for a shared lease, its share id (null for an
// exclusive lease, and in identities stored before shared leases). An epoch (of a slot) is acquired once and never
// reused, so the identity names one lease for good; it does not change while
// the resource exists (a renewal keeps the epoch, anything else replaces the
// lease).
// Import blocks may give it instead of an ID, and the s3lock_lease list
// resource returns it for every lease it finds.

var _ resource.ResourceWithIdentity = (*leaseResource)(nil)

// leaseIdentityModelV0 is the identity of s3lock_lease.
type leaseIdentityModelV0 struct {
	Bucket types.String `tfsdk:"bucket"`
	Name   types.String `tfsdk:"name"`
	Epoch  types.Int64  `tfsdk:"epoch"`
	Slot   types.Int64  `tfsdk:"slot"`
	Share  types.String `tfsdk:"share"`
}

func (r *leaseResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = leaseIdentitySchema()
}

// leaseIdentitySchema is the identity schema of s3lock_lease.
func leaseIdentitySchema() identityschema.Schema {
	return identityschema.Schema{
		Attributes: map[string]identityschema.Attribute{
			"bucket": identityschema.StringAttribute{
				RequiredForImport: true,
				Description:       "Bucket that holds the lock.",
			},
			"name": identityschema.StringAttribute{
				RequiredForImport: true,
				Description:       "Name of the lock, such as deploy/prod.",
			},
			"epoch": identityschema.Int64Attribute{
				RequiredForImport: true,
				Description:       "Epoch of the lease. Only the lock's current epoch, while it is held, can be imported.",
			},
			"slot": identityschema.Int64Attribute{
				OptionalForImport: true,
				Description: "The slot the lease holds, from 1 to the number of holders its lock admits, for the " +
					"lease of a slot (slots greater than 1); epoch is then the slot's. Null for a mutex's lease.",
			},
			"share": identityschema.StringAttribute{
				OptionalForImport: true,
				Description: "The share id of a shared lease (mode shared), 16 hex digits, as in the key of its share; " +
					"epoch is then the shared epoch. Null for an exclusive lease.",
			},
		},
	}
}

// leaseIdentity is the identity of the lease l.
func leaseIdentity(l leaseRef) leaseIdentityModelV0 {
	id := leaseIdentityModelV0{
		Bucket: types.StringValue(l.bucket),
		Name:   types.StringValue(l.name),
		Epoch:  types.Int64Value(int64(l.epoch)),
		Slot:   types.Int64Null(),
		Share:  stringOrNull(l.share),
	}
	if l.slot > 0 {
		id.Slot = types.Int64Value(int64(l.slot))
	}
	return id
}

// setLeaseIdentity stores the identity of l in id. id is nil when the
// framework passes no identity; there is nothing to set then.
func setLeaseIdentity(ctx context.Context, id *tfsdk.ResourceIdentity, l leaseRef) diag.Diagnostics {
	if id == nil {
		return nil
	}
	return id.Set(ctx, leaseIdentity(l))
}

// importTarget is the lease an import asks for: by the import ID
// (`terraform import`, an import block's id) or, when there is none, by the
// identity of an import block (Terraform 1.12 and later). A diagnostic says
// what is wrong with either.
func importTarget(ctx context.Context, req resource.ImportStateRequest) (leaseRef, diag.Diagnostics) {
	if req.ID != "" || req.Identity == nil {
		l, err := parseLeaseID(req.ID)
		if err != nil {
			return leaseRef{}, diag.Diagnostics{invalidImportID(err)}
		}
		return l, nil
	}
	var id leaseIdentityModelV0
	diags := req.Identity.Get(ctx, &id)
	if diags.HasError() {
		return leaseRef{}, diags
	}
	l, err := identityRef(id)
	if err != nil {
		diags.Append(invalidImportIdentity(err))
	}
	return l, diags
}

// identityRef checks an identity given in an import block as parseLeaseID
// checks an import ID.
func identityRef(id leaseIdentityModelV0) (leaseRef, error) {
	if id.Bucket.IsNull() || id.Bucket.IsUnknown() || id.Name.IsNull() || id.Name.IsUnknown() ||
		id.Epoch.IsNull() || id.Epoch.IsUnknown() {
		return leaseRef{}, errors.New("bucket, name and epoch must all be set")
	}
	l := leaseRef{bucket: id.Bucket.ValueString(), name: id.Name.ValueString()}
	if e := id.Epoch.ValueInt64(); e < 1 || uint64(e) > s3lock.MaxEpoch {
		return leaseRef{}, fmt.Errorf("epoch %d is not a number between 1 and %d", e, s3lock.MaxEpoch)
	}
	l.epoch = uint64(id.Epoch.ValueInt64())
	switch s := id.Slot; {
	case s.IsUnknown():
		return leaseRef{}, errors.New("slot must be known (or left out, for a mutex's lease)")
	case s.IsNull():
	case s.ValueInt64() < 1 || s.ValueInt64() > s3lock.MaxSlots:
		return leaseRef{}, fmt.Errorf("slot %d is not a number between 1 and %d (leave it out for a mutex's lease)",
			s.ValueInt64(), s3lock.MaxSlots)
	default:
		l.slot = int(s.ValueInt64())
	}
	if id.Share.IsUnknown() {
		return leaseRef{}, errors.New("share must be known (or left out, for an exclusive lease)")
	}
	l.share = id.Share.ValueString() // the SDK checks it when the import resumes the lease
	if err := s3lock.ValidateConfig(l.bucket); err != nil {
		return leaseRef{}, err
	}
	if err := s3lock.ValidateName(l.name); err != nil {
		return leaseRef{}, err
	}
	return l, nil
}
