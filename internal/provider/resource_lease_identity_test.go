package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// expectLeaseIdentity checks the identity of the lease resource at addr: a
// mutex's lease, whose identity has no slot.
func expectLeaseIdentity(addr, bucket, name string, epoch int64) statecheck.StateCheck {
	return statecheck.ExpectIdentity(addr, leaseIdentityCheck(bucket, name, epoch))
}

// TestAccLeaseResource_Identity: the resource's identity is its bucket, lock
// name and epoch from the create on, an import block with that identity
// adopts the lease, and the identity stays through an update in place
// (Terraform 1.12 and later, OpenTofu 1.12 and later).
func TestAccLeaseResource_Identity(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ResourceIdentity)
	name := e.name("identity/prod")
	addr := "s3lock_lease.test"
	cfg := func(extra ...string) string { return e.providerConfig(nil) + leaseConfig(e.bucket, name, extra...) }
	matchesState := make([]statecheck.StateCheck, 0, 3)
	for _, a := range []string{"bucket", "name", "epoch"} {
		matchesState = append(matchesState, statecheck.ExpectIdentityValueMatchesState(addr, tfjsonpath.New(a)))
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkReleased(t, e, name, 1),
		Steps: []tfresource.TestStep{
			{
				Config:            cfg(),
				ConfigStateChecks: append([]statecheck.StateCheck{expectLeaseIdentity(addr, e.bucket, name, 1)}, matchesState...),
			},
			{
				// An import block with the identity adopts the lease, and
				// the plan has nothing else to do.
				ResourceName:    addr,
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithResourceIdentity,
				ImportPlanChecks: tfresource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("holder"), knownvalue.StringExact("terraform-test")),
				}},
			},
			{
				// An update in place keeps the lease, its epoch and so
				// the identity.
				Config: cfg(`order = "newest"`),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectLeaseIdentity(addr, e.bucket, name, 1)},
			},
		},
	})
}

// TestAccLeaseResource_IdentitySlot: the identity of the lease of a slot has
// the slot (and the slot's epoch), an import block with that identity adopts
// the lease, and an update in place keeps it (Terraform 1.12 and later,
// OpenTofu 1.12 and later).
func TestAccLeaseResource_IdentitySlot(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ResourceIdentity)
	name := e.name("identity/runners")
	// Someone holds a slot already: the resource's slot is another one.
	other := e.hold(t, "other-team", name, time.Hour, s3lock.WithSlots(2))
	slot := int64(3 - other.Token().Slot)
	addr := "s3lock_lease.test"
	cfg := func(extra ...string) string {
		return e.providerConfig(nil) + leaseConfig(e.bucket, name, append([]string{"slots = 2"}, extra...)...)
	}
	identity := statecheck.ExpectIdentity(addr, slotLeaseIdentityCheck(e.bucket, name, int(slot), 1))
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy: func(*terraform.State) error {
			_, err := e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: name, Slot: int(slot), Epoch: 1})
			if !leaseReleased(err) {
				return fmt.Errorf("after destroy, slot %d of %q: %w; want epoch 1 released", slot, name, err)
			}
			return nil
		},
		Steps: []tfresource.TestStep{
			{
				Config: cfg(),
				ConfigStateChecks: []statecheck.StateCheck{
					identity,
					statecheck.ExpectIdentityValueMatchesState(addr, tfjsonpath.New("slot")),
					statecheck.ExpectIdentityValueMatchesState(addr, tfjsonpath.New("epoch")),
				},
			},
			{
				ResourceName:    addr,
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithResourceIdentity,
				ImportPlanChecks: tfresource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("slot"), knownvalue.Int64Exact(slot)),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("slots"), knownvalue.Int64Exact(2)),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("key"), knownvalue.StringExact(s3lock.Token{Name: name, Slot: int(slot), Epoch: 1}.Key())),
				}},
			},
			{
				Config: cfg(`order = "newest"`),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{identity},
			},
		},
	})
}

// TestAccLeaseResource_ImportByIdentityRefused: an identity that does not
// name the lock's current, held epoch is refused, with the identity format
// or the reason.
func TestAccLeaseResource_ImportByIdentityRefused(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ResourceIdentity)
	name := e.name("identity/refused")
	for range 2 {
		if err := e.hold(t, "earlier", name, time.Minute).Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	e.hold(t, "current", name, time.Hour)
	slots := e.name("identity/slots")
	e.hold(t, "runner", slots, time.Hour, s3lock.WithSlots(2))
	cases := []struct {
		name     string
		identity string
		want     *regexp.Regexp
	}{
		{
			name:     "stale epoch",
			identity: fmt.Sprintf("{ bucket = %q, name = %q, epoch = 2 }", e.bucket, name),
			want:     matchError("Cannot import lease", `\(epoch 2\) lost`, "lock is at epoch 3"),
		},
		{
			name:     "epoch zero",
			identity: fmt.Sprintf("{ bucket = %q, name = %q, epoch = 0 }", e.bucket, name),
			want:     matchError("Invalid import identity", "epoch 0 is not a number between 1 and", "bucket, lock name and epoch"),
		},
		{
			name:     "name escaping its prefix",
			identity: fmt.Sprintf("{ bucket = %q, name = \"team/../other\", epoch = 1 }", e.bucket),
			want:     matchError("Invalid import identity", "team/../other", "epoch = 42"),
		},
		{
			name:     "bad bucket",
			identity: fmt.Sprintf("{ bucket = \"Not_A_Bucket\", name = %q, epoch = 1 }", name),
			want:     matchError("Invalid import identity", "Not_A_Bucket"),
		},
		{
			name:     "slot zero",
			identity: fmt.Sprintf("{ bucket = %q, name = %q, epoch = 3, slot = 0 }", e.bucket, name),
			want:     matchError("Invalid import identity", "slot 0 is not a number between 1 and 64", "slot = 2, epoch = 7"),
		},
		{
			name:     "slot of a mutex",
			identity: fmt.Sprintf("{ bucket = %q, name = %q, epoch = 3, slot = 1 }", e.bucket, name),
			want:     matchError("Cannot import lease", "not a slot lock", "The import ID names slot 1", `held by "current"`),
		},
		{
			name:     "slot lock without a slot",
			identity: fmt.Sprintf("{ bucket = %q, name = %q, epoch = 1 }", e.bucket, slots),
			want:     matchError("Cannot import lease", "marker of a lock that admits 2 holders", `by "runner"`),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lock := name
			if strings.Contains(tc.identity, slots) {
				lock = slots
			}
			config := e.providerConfig(nil) + leaseConfig(e.bucket, lock) +
				fmt.Sprintf("import {\n  to       = s3lock_lease.test\n  identity = %s\n}\n", tc.identity)
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps:                    []tfresource.TestStep{{Config: config, PlanOnly: true, ExpectError: tc.want}},
			})
		})
	}
}

// TestLeaseResource_IdentityForOlderState: state written by a provider
// version without identities (or by a CLI that does not keep them) gets its
// identity on the next refresh; an update in place sets it too.
func TestLeaseResource_IdentityForOlderState(t *testing.T) {
	r, _, bucket, name := newDirectLeaseResource(t)
	state := directLeaseState(t, r, bucket, name)
	want := leaseIdentityModelV0{Bucket: types.StringValue(bucket), Name: types.StringValue(name), Epoch: types.Int64Value(1),
		Slot: types.Int64Null()}

	read := resource.ReadResponse{State: state, Identity: nullLeaseIdentity(t)}
	r.Read(t.Context(), resource.ReadRequest{State: state, Identity: nullLeaseIdentity(t)}, &read)
	if read.Diagnostics.HasError() {
		t.Fatalf("Read: %v", read.Diagnostics)
	}
	checkIdentity(t, "after Read", read.Identity, want)

	update := resource.UpdateResponse{State: state, Identity: nullLeaseIdentity(t)}
	r.Update(t.Context(), resource.UpdateRequest{State: state, Plan: tfsdk.Plan(state), Identity: nullLeaseIdentity(t)}, &update)
	if update.Diagnostics.HasError() {
		t.Fatalf("Update: %v", update.Diagnostics)
	}
	checkIdentity(t, "after Update", update.Identity, want)
}

// nullLeaseIdentity is the identity the framework passes for state without
// one.
func nullLeaseIdentity(t *testing.T) *tfsdk.ResourceIdentity {
	t.Helper()
	s := leaseIdentitySchema()
	return &tfsdk.ResourceIdentity{Schema: s, Raw: tftypes.NewValue(s.Type().TerraformType(t.Context()), nil)}
}

func checkIdentity(t *testing.T, when string, id *tfsdk.ResourceIdentity, want leaseIdentityModelV0) {
	t.Helper()
	var got leaseIdentityModelV0
	if diags := id.Get(t.Context(), &got); diags.HasError() {
		t.Fatalf("%s: reading the identity: %v", when, diags)
	}
	if got != want {
		t.Errorf("%s: identity %+v, want %+v", when, got, want)
	}
}

// TestIdentityRef: an identity from an import block is checked as an import
// ID is.
func TestIdentityRef(t *testing.T) {
	id := func(bucket, name string, epoch int64) leaseIdentityModelV0 {
		return leaseIdentityModelV0{Bucket: types.StringValue(bucket), Name: types.StringValue(name), Epoch: types.Int64Value(epoch),
			Slot: types.Int64Null()}
	}
	slotID := func(slot int64) leaseIdentityModelV0 {
		i := id("my-locks", "ci/runners", 7)
		i.Slot = types.Int64Value(slot)
		return i
	}
	cases := []struct {
		name    string
		id      leaseIdentityModelV0
		want    leaseRef
		wantErr string
	}{
		{name: "lease", id: id("my-locks", "deploy/prod", 42), want: leaseRef{bucket: "my-locks", name: "deploy/prod", epoch: 42}},
		{name: "largest epoch", id: id("my-locks", "a", int64(s3lock.MaxEpoch)), want: leaseRef{bucket: "my-locks", name: "a", epoch: s3lock.MaxEpoch}},
		{name: "epoch zero", id: id("my-locks", "a", 0), wantErr: "epoch 0 is not a number between 1 and"},
		{name: "negative epoch", id: id("my-locks", "a", -1), wantErr: "epoch -1"},
		{name: "epoch too large", id: id("my-locks", "a", int64(s3lock.MaxEpoch)+1), wantErr: "epoch 10000000000"},
		{name: "bad bucket", id: id("My_Locks", "a", 1), wantErr: "bucket"},
		{name: "bad name", id: id("my-locks", "a//b", 1), wantErr: "a//b"},
		{name: "no name", id: leaseIdentityModelV0{Bucket: types.StringValue("my-locks"), Name: types.StringNull(), Epoch: types.Int64Value(1)},
			wantErr: "must all be set"},
		{name: "slot lease", id: slotID(2), want: leaseRef{bucket: "my-locks", name: "ci/runners", epoch: 7, slot: 2}},
		{name: "largest slot", id: slotID(s3lock.MaxSlots), want: leaseRef{bucket: "my-locks", name: "ci/runners", epoch: 7, slot: s3lock.MaxSlots}},
		{name: "slot zero", id: slotID(0), wantErr: "slot 0 is not a number between 1 and 64 (leave it out for a mutex's lease)"},
		{name: "slot too large", id: slotID(s3lock.MaxSlots + 1), wantErr: "slot 65"},
		{name: "slot unknown", id: func() leaseIdentityModelV0 { i := slotID(1); i.Slot = types.Int64Unknown(); return i }(),
			wantErr: "slot must be known"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := identityRef(tc.id)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("identityRef: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("identityRef: error %v, want one containing %q", err, tc.wantErr)
			case got != tc.want:
				t.Errorf("identityRef = %+v, want %+v", got, tc.want)
			}
		})
	}
}
