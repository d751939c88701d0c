package provider

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// setLeaseConfig is an s3lock_lease resource block named label that takes
// the lock set names, written in the order given.
func setLeaseConfig(label, bucket string, names []string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource \"s3lock_lease\" %q {\n  bucket = %q\n  names  = %s\n", label, bucket, hclList(names))
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// hclList writes strings as an HCL list.
func hclList(names []string) string {
	q := make([]string, 0, len(names))
	for _, n := range names {
		q = append(q, strconv.Quote(n))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// checkSetMatchesStore checks that the resource's leases are, in the set's
// order (names sorted), the current held leases of its locks as the SDK
// reads them, and that epoch, key and id are the first's.
func checkSetMatchesStore(t *testing.T, e *accEnv, addr string, sorted ...string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		for i, name := range sorted {
			st := e.current(t, name)
			want := map[string]string{
				fmt.Sprintf("leases.%d.name", i):  name,
				fmt.Sprintf("leases.%d.epoch", i): strconv.FormatUint(st.Epoch, 10),
				fmt.Sprintf("leases.%d.key", i):   st.Key,
			}
			if i == 0 {
				want["epoch"], want["key"], want["id"] = strconv.FormatUint(st.Epoch, 10), st.Key, leaseID(e.bucket, name, 0, st.Epoch)
			}
			for k, v := range want {
				got, err := stateAttr(s, addr, k)
				if err != nil {
					return err
				}
				if got != v {
					return fmt.Errorf("%s.%s = %q, but the store says %q", addr, k, got, v)
				}
			}
			if !st.Held {
				return fmt.Errorf("lock %q epoch %d is not held: %+v", name, st.Epoch, st)
			}
		}
		return nil
	}
}

// checkAllReleased checks that each lock's newest epoch is released.
func checkAllReleased(t *testing.T, e *accEnv, epoch uint64, names ...string) func(*terraform.State) error {
	t.Helper()
	return func(s *terraform.State) error {
		for _, name := range names {
			if err := checkReleased(t, e, name, epoch)(s); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestAccLeaseResource_SetHeldAndReleasedTogether: a resource with names
// holds a lease of each lock, shown in leases in the set's order (the names
// sorted, whatever order they are written in), epoch and key being the
// first's; writing the names in another order is an update in place that
// keeps the leases; destroy releases both.
func TestAccLeaseResource_SetHeldAndReleasedTogether(t *testing.T) {
	e := newAccEnv(t)
	a, b := e.name("set/a"), e.name("set/b")
	addr := "s3lock_lease.set"
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkAllReleased(t, e, 1, a, b),
		Steps: []tfresource.TestStep{
			{
				Config: e.providerConfig(nil) + setLeaseConfig("set", e.bucket, []string{b, a}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("leases"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectExact(map[string]knownvalue.Check{"name": knownvalue.StringExact(a),
							"epoch": knownvalue.Int64Exact(1), "key": knownvalue.StringExact(s3lock.Token{Name: a, Epoch: 1}.Key())}),
						knownvalue.ObjectExact(map[string]knownvalue.Check{"name": knownvalue.StringExact(b),
							"epoch": knownvalue.Int64Exact(1), "key": knownvalue.StringExact(s3lock.Token{Name: b, Epoch: 1}.Key())}),
					})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("name"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("slot"), knownvalue.Int64Exact(0)),
				},
				Check: checkSetMatchesStore(t, e, addr, a, b),
			},
			{
				Config:           e.providerConfig(nil) + setLeaseConfig("set", e.bucket, []string{a, b}),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}},
				Check: tfresource.ComposeAggregateTestCheckFunc(checkSetMatchesStore(t, e, addr, a, b),
					tfresource.TestCheckResourceAttr(addr, "epoch", "1"), tfresource.TestCheckResourceAttr(addr, "leases.1.epoch", "1")),
			},
		},
	})
}

// TestAccLeaseResource_SetWaitsInTheSetsOrder: a set written [b, a] takes
// a first, as every set does: while a is held by someone else it waits for
// a holding nothing (b is never taken during the wait), takes both once a
// is free; a second set on the same locks, in the opposite order, with
// timeouts.create = "0s", is refused at once and takes nothing.
func TestAccLeaseResource_SetWaitsInTheSetsOrder(t *testing.T) {
	e := newAccEnv(t)
	a, b := e.name("order/a"), e.name("order/b")
	held := e.hold(t, "other-team", a, time.Hour)
	var waited, bTakenDuringWait atomic.Bool
	hooks := e.hooks
	hooks.onWait = func(h *s3lock.HeldError) {
		if h.Name != a || h.Holder != "other-team" || !waited.CompareAndSwap(false, true) {
			return
		}
		if e.current(t, b).Epoch != 0 {
			bTakenDuringWait.Store(true)
		}
		go func() { _ = held.Release(t.Context()) }()
	}
	first := setLeaseConfig("first", e.bucket, []string{b, a}, `timeouts { create = "2m" }`)
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.factoriesWith(hooks),
		CheckDestroy:             checkAllReleased(t, e, 2, a),
		Steps: []tfresource.TestStep{
			{
				Config: e.providerConfig(nil) + first,
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkSetMatchesStore(t, e, "s3lock_lease.first", a, b),
					func(*terraform.State) error {
						switch {
						case !waited.Load():
							return fmt.Errorf("the set never reported waiting for a")
						case bTakenDuringWait.Load():
							return fmt.Errorf("the set took b while it waited for a, which comes first in its order")
						}
						return nil
					},
				),
			},
			{
				Config: e.providerConfig(nil) + first +
					setLeaseConfig("second", e.bucket, []string{a, b}, `timeouts { create = "0s" }`),
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf("Lock %q", a), "lock set", "not acquired, all or none",
					"it had taken none"),
			},
			{
				Config: e.providerConfig(nil) + first,
				Check:  checkSetMatchesStore(t, e, "s3lock_lease.first", a, b),
			},
		},
	})
}

// TestAccLeaseResource_SetLostIsReplaced: when one lease of the set is lost
// (force-released here), the refresh warns and the plan replaces the
// resource: its other lease is released and the set taken again, each lock
// at a new epoch.
func TestAccLeaseResource_SetLostIsReplaced(t *testing.T) {
	e := newAccEnv(t)
	a, b := e.name("lost/a"), e.name("lost/b")
	addr := "s3lock_lease.set"
	config := e.providerConfig(nil) + setLeaseConfig("set", e.bucket, []string{a, b})
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkAllReleased(t, e, 2, a, b),
		Steps: []tfresource.TestStep{
			{Config: config, Check: checkSetMatchesStore(t, e, addr, a, b)},
			{
				// The refresh marks the lost lease: epoch 0, no key (no
				// epoch object's); the other stays as it was.
				PreConfig: func() {
					if err := e.sdk(t, "operator").ForceRelease(t.Context(), s3lock.Token{Name: b, Epoch: 1}); err != nil {
						t.Fatal(err)
					}
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttr(addr, "leases.0.epoch", "1"),
					tfresource.TestCheckResourceAttr(addr, "leases.1.epoch", "0"),
					tfresource.TestCheckNoResourceAttr(addr, "leases.1.key"),
				),
			},
			{
				Config: config,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace),
				}},
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkSetMatchesStore(t, e, addr, a, b),
					tfresource.TestCheckResourceAttr(addr, "leases.0.epoch", "2"),
					tfresource.TestCheckResourceAttr(addr, "leases.1.epoch", "2"),
				),
			},
		},
	})
}

// TestAccLeaseResource_SetValidation: exactly one of name and names; a set
// the SDK refuses (lockset.Check) is a diagnostic naming names; slots is
// for one lock only.
func TestAccLeaseResource_SetValidation(t *testing.T) {
	e := newAccEnv(t)
	bucket := e.bucket
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"name and names", leaseConfig(bucket, "a", `names = ["b", "c"]`),
			[]string{"Invalid Attribute Combination", "names"}},
		{"neither", fmt.Sprintf("resource \"s3lock_lease\" \"test\" {\n  bucket = %q\n}\n", bucket),
			[]string{"Invalid Attribute Combination", "names"}},
		{"a name twice", setLeaseConfig("test", bucket, []string{"a", "b", "a"}),
			[]string{"Invalid lock set", `names = \["a", "b", "a"\] is no lock set`, `lock "a" is named twice`}},
		{"an invalid name", setLeaseConfig("test", bucket, []string{"a", "team/../other"}),
			[]string{"Invalid lock set", "names", "team/../other", "escape"}},
		{"no name", setLeaseConfig("test", bucket, nil),
			[]string{"Invalid lock set", "at least one lock name"}},
		{"slots", setLeaseConfig("test", bucket, []string{"a", "b"}, "slots = 2"),
			[]string{"Invalid Attribute Combination", "slots", "names"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(nil) + tc.config,
					ExpectError: matchError(tc.want...),
					PlanOnly:    true,
				}},
			})
		})
	}
}
