package provider

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// checkSlotLeases checks that the lease resources at addrs hold distinct
// slots of the lock name, which admits slots holders, and that each is the
// slot's current, held lease as the SDK reads it: slot, epoch, key, id and
// holder.
func checkSlotLeases(t *testing.T, e *accEnv, name string, slots int, addrs ...string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		st := e.current(t, name)
		if st.Slots != slots {
			return fmt.Errorf("lock %q admits %d holders, want %d", name, st.Slots, slots)
		}
		held := map[int]s3lock.State{}
		for _, h := range st.Holders {
			held[h.Slot] = h
		}
		seen := map[int]string{}
		for _, addr := range addrs {
			attrs, err := attrsOf(s, addr, "slots", "slot", "epoch", "key", "id", "holder")
			if err != nil {
				return err
			}
			slot, _ := strconv.Atoi(attrs["slot"])
			if other, dup := seen[slot]; dup {
				return fmt.Errorf("%s and %s both hold slot %d", other, addr, slot)
			}
			seen[slot] = addr
			h, ok := held[slot]
			if !ok {
				return fmt.Errorf("%s holds slot %s, which the store does not show held (holders %+v)", addr, attrs["slot"], st.Holders)
			}
			want := map[string]string{
				"slots":  strconv.Itoa(slots),
				"epoch":  strconv.FormatUint(h.Epoch, 10),
				"key":    s3lock.Token{Name: name, Slot: slot, Epoch: h.Epoch}.Key(),
				"id":     leaseID(e.bucket, name, slot, h.Epoch),
				"holder": "terraform-test",
			}
			for k, v := range want {
				if attrs[k] != v {
					return fmt.Errorf("%s.%s = %q, want %q (the store's slot %d: %+v)", addr, k, attrs[k], v, slot, h)
				}
			}
			if h.Key != want["key"] || h.Holder != "terraform-test" {
				return fmt.Errorf("slot %d of %q as the store reads it: %+v", slot, name, h)
			}
		}
		return nil
	}
}

// attrsOf returns the named attributes of the resource at addr in state.
func attrsOf(s *terraform.State, addr string, keys ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		v, err := stateAttr(s, addr, k)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// TestAccLeaseResource_Slots: two resources on a lock that admits 3 holders
// hold two of its slots at once, each with its own slot, epoch and key; a
// third one, while someone else has the last slot, waits and fails saying
// that all 3 slots are held; leases that ask for another number of slots, or
// for a mutex, fail at once with the mismatch diagnostic, without waiting;
// changing slots replaces the lease; destroy releases the slots.
func TestAccLeaseResource_Slots(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("ci/runners")
	two := e.providerConfig(nil) + namedLeaseConfig("a", e.bucket, name, "slots = 3") +
		namedLeaseConfig("b", e.bucket, name, "slots = 3")
	var other *s3lock.Lease
	var waits atomic.Int64
	countWaits := func() {
		waits.Store(0)
		e.setOnWait(func(h *s3lock.HeldError) {
			if h.Name == name {
				waits.Add(1)
			}
		})
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy: func(*terraform.State) error {
			st := e.current(t, name)
			if len(st.Holders) != 1 || st.Holders[0].Holder != "other-team" {
				return fmt.Errorf("after destroy, lock %q is held by %+v; want other-team's slot only", name, st.Holders)
			}
			return nil
		},
		Steps: []tfresource.TestStep{
			{
				Config: two,
				Check:  checkSlotLeases(t, e, name, 3, "s3lock_lease.a", "s3lock_lease.b"),
			},
			{
				// Someone else takes the last slot: a third lease waits for
				// one, in vain.
				PreConfig: func() { other = e.hold(t, "other-team", name, time.Hour, s3lock.WithSlots(3)) },
				Config:    two + namedLeaseConfig("c", e.bucket, name, "slots = 3", `timeouts { create = "3s" }`),
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf(`Lock %q in bucket %q`, name, e.bucket),
					fmt.Sprintf(`all 3 slots of lock %q`, name), "are held", "All slots of the lock are held by others"),
			},
			{
				PreConfig: countWaits,
				Config:    two + namedLeaseConfig("d", e.bucket, name, "slots = 2"),
				ExpectError: matchError("Lock admits another number of holders",
					fmt.Sprintf(`Lock %q in bucket %q admits 3 holders, but this lease asks for slots = 2`, name, e.bucket),
					"Its marker, s3://"+e.bucket+"/"+s3lock.Token{Name: name, Epoch: 1}.Key()+", records that", "set slots = 3, or use another lock name"),
			},
			{
				PreConfig: func() {
					if n := waits.Load(); n != 0 {
						t.Errorf("the lease with slots = 2 waited (%d reports) instead of failing at once", n)
					}
					countWaits()
				},
				Config: two + namedLeaseConfig("mutex", e.bucket, name),
				ExpectError: matchError("Lock admits another number of holders", "admits 3 holders",
					"asks for a mutex \\(slots = 1, the default\\)", "set slots = 3"),
			},
			{
				PreConfig: func() {
					if n := waits.Load(); n != 0 {
						t.Errorf("the mutex lease waited (%d reports) instead of failing at once", n)
					}
				},
				// The leases are still there, and nothing else changed.
				Config: two,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: checkSlotLeases(t, e, name, 3, "s3lock_lease.a", "s3lock_lease.b"),
			},
			{
				// Another number of slots replaces the lease: it is released,
				// and the new one is refused, for the lock admits 3.
				Config: e.providerConfig(nil) + namedLeaseConfig("a", e.bucket, name, "slots = 2") +
					namedLeaseConfig("b", e.bucket, name, "slots = 3"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("s3lock_lease.a", plancheck.ResourceActionReplace),
					plancheck.ExpectResourceAction("s3lock_lease.b", plancheck.ResourceActionNoop),
				}},
				ExpectError: matchError("Lock admits another number of holders", "asks for slots = 2"),
			},
		},
	})
	if err := other.Renew(t.Context()); err != nil {
		t.Errorf("other-team's slot was disturbed: %v", err)
	}
}

// TestLeaseResource_StateFromBeforeSlots: state written before slots existed
// (slots and slot null) is a mutex's lease: a refresh fills in slots = 1 and
// slot = 0, and the default slots = 1 in the configuration does not replace
// it.
func TestLeaseResource_StateFromBeforeSlots(t *testing.T) {
	r, _, bucket, name := newDirectLeaseResource(t)
	state := directLeaseState(t, r, bucket, name)
	read := resource.ReadResponse{State: state}
	r.Read(t.Context(), resource.ReadRequest{State: state}, &read)
	if read.Diagnostics.HasError() {
		t.Fatalf("Read: %v", read.Diagnostics)
	}
	var got leaseResourceModelV0
	if d := read.State.Get(t.Context(), &got); d.HasError() {
		t.Fatal(d)
	}
	if got.Slots.ValueInt64() != 1 || got.Slot.IsNull() || got.Slot.ValueInt64() != 0 {
		t.Errorf("after Read, slots = %v and slot = %v; want 1 and 0", got.Slots, got.Slot)
	}

	cases := []struct {
		name        string
		state, plan types.Int64
		replace     bool
	}{
		{name: "state from before slots, default", state: types.Int64Null(), plan: types.Int64Value(1)},
		{name: "state from before slots, slots = 3", state: types.Int64Null(), plan: types.Int64Value(3), replace: true},
		{name: "unchanged", state: types.Int64Value(3), plan: types.Int64Value(3)},
		{name: "changed", state: types.Int64Value(3), plan: types.Int64Value(2), replace: true},
		{name: "to a mutex", state: types.Int64Value(3), plan: types.Int64Value(1), replace: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := planmodifier.Int64Request{
				Path: path.Root("slots"), StateValue: tc.state, PlanValue: tc.plan, ConfigValue: tc.plan,
				State: tfsdk.State{Raw: tftypes.NewValue(tftypes.Object{}, map[string]tftypes.Value{})},
				Plan:  tfsdk.Plan{Raw: tftypes.NewValue(tftypes.Object{}, map[string]tftypes.Value{})},
			}
			var resp planmodifier.Int64Response
			replaceIfSlotsChanged().PlanModifyInt64(t.Context(), req, &resp)
			if resp.RequiresReplace != tc.replace {
				t.Errorf("slots %v -> %v: replace %v, want %v", tc.state, tc.plan, resp.RequiresReplace, tc.replace)
			}
		})
	}
}

// TestLeaseResource_SlotLeaseWithoutToken: the state of a slot lease
// without a lease token (written by hand: the SDK checks it by lock, slot
// and epoch) is read, renewed and released like any other.
func TestLeaseResource_SlotLeaseWithoutToken(t *testing.T) {
	r, c, bucket, _ := newDirectLeaseResource(t)
	name := "pool/runners"
	if _, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour), s3lock.WithSlots(3)); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour), s3lock.WithSlots(3))
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	state := directLeaseState(t, r, bucket, name)
	set := func(attr string, v any) {
		if d := state.SetAttribute(t.Context(), path.Root(attr), v); d.HasError() {
			t.Fatal(d)
		}
	}
	set("slots", types.Int64Value(3))
	set("slot", types.Int64Value(int64(l.Token().Slot)))
	set("epoch", types.Int64Value(int64(l.Token().Epoch)))
	set("key", types.StringValue(l.Token().Key()))
	set("id", types.StringValue(leaseID(bucket, name, l.Token().Slot, l.Token().Epoch)))

	read := resource.ReadResponse{State: state}
	r.Read(t.Context(), resource.ReadRequest{State: state}, &read)
	if len(read.Diagnostics) != 0 || read.State.Raw.IsNull() {
		t.Fatalf("Read: %v (state removed %v); want the lease kept", read.Diagnostics, read.State.Raw.IsNull())
	}

	plan := tfsdk.Plan(state)
	if d := plan.SetAttribute(t.Context(), path.Root("expires_at"), types.StringUnknown()); d.HasError() {
		t.Fatal(d)
	}
	update := resource.UpdateResponse{State: state}
	r.Update(t.Context(), resource.UpdateRequest{State: state, Plan: plan}, &update)
	if update.Diagnostics.HasError() {
		t.Fatalf("Update (renewal): %v", update.Diagnostics)
	}
	if st, err := c.Lookup(t.Context(), s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch}); err != nil || st.Renewals != 1 {
		t.Fatalf("after the renewal, slot %d: %+v, %v; want it held, renewed once", l.Token().Slot, st, err)
	}

	var del resource.DeleteResponse
	r.Delete(t.Context(), resource.DeleteRequest{State: state}, &del)
	if len(del.Diagnostics) != 0 {
		t.Fatalf("Delete: %v", del.Diagnostics)
	}
	_, err = c.Lookup(t.Context(), s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch})
	if !leaseReleased(err) {
		t.Errorf("after Delete, slot %d: %v; want it released", l.Token().Slot, err)
	}
	if st, err := c.Current(t.Context(), name); err != nil || len(st.Holders) != 1 {
		t.Errorf("after Delete, the lock: %+v, %v; want the other slot still held", st, err)
	}
}
