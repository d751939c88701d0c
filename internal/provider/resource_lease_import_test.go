package provider

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestParseLeaseID(t *testing.T) {
	cases := []struct {
		id         string
		want       leaseRef
		wantErrHas string
	}{
		{id: "locks/deploy/prod/42", want: leaseRef{bucket: "locks", name: "deploy/prod", epoch: 42}},
		{id: "locks/a/1", want: leaseRef{bucket: "locks", name: "a", epoch: 1}},
		{id: "locks/a/0000000007", want: leaseRef{bucket: "locks", name: "a", epoch: 7}},
		{id: "locks/ci/runners/lock-slots/2/7", want: leaseRef{bucket: "locks", name: "ci/runners", slot: 2, epoch: 7}},
		{id: "locks/a/lock-slots/64/1", want: leaseRef{bucket: "locks", name: "a", slot: 64, epoch: 1}},
		{id: "locks/a", wantErrHas: "has none of the forms <bucket>/<name>/<epoch>, <bucket>/<name>/lock-slots/<slot>/<epoch> or <bucket>/<name>/lock-shared/<epoch>/<share>"},
		{id: "locks//1", wantErrHas: "has none of the forms"},
		{id: "/a/1", wantErrHas: "has none of the forms"},
		{id: "locks/a/", wantErrHas: "has none of the forms"},
		{id: "locks/a/0", wantErrHas: "epoch"},
		{id: "locks/a/x1", wantErrHas: "epoch"},
		{id: "locks/a/99999999999", wantErrHas: "epoch"},
		{id: "Locks/a/1", wantErrHas: "bucket name"},
		{id: "locks/a/../b/1", wantErrHas: "escape"},
		{id: "locks/a/lock-slots/0/7", wantErrHas: `slot "0" is not a number between 1 and 64`},
		{id: "locks/a/lock-slots/65/7", wantErrHas: `slot "65"`},
		{id: "locks/a/lock-slots/x/7", wantErrHas: `slot "x"`},
		{id: "locks/a/lock-slots/2/b/7", wantErrHas: `slot "2/b"`},
		{id: "locks/deploy/prod/lock-shared/42/0123456789abcdef",
			want: leaseRef{bucket: "locks", name: "deploy/prod", epoch: 42, share: "0123456789abcdef"}},
		{id: "locks/a/lock-shared/0000000007/0123456789abcdef", want: leaseRef{bucket: "locks", name: "a", epoch: 7, share: "0123456789abcdef"}},
		{id: "locks/a/lock-shared/7", wantErrHas: "does not have the form <bucket>/<name>/lock-shared/<epoch>/<share>"},
		{id: "locks/a/lock-shared/7/", wantErrHas: "does not have the form"},
		{id: "locks/a/lock-shared/x/0123456789abcdef", wantErrHas: `epoch "x"`},
		{id: "locks/lock-shared/7/0123456789abcdef", wantErrHas: "has none of the forms"},
		// No slot before the epoch: the name then has the reserved segment.
		{id: "locks/lock-slots/2/7", wantErrHas: "reserved"},
		{id: "locks/a/lock-slots/7", wantErrHas: "reserved"},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			got, err := parseLeaseID(tc.id)
			if tc.wantErrHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrHas) {
					t.Fatalf("parseLeaseID(%q) error = %v, want one containing %q", tc.id, err, tc.wantErrHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseLeaseID(%q) = %+v, %v; want %+v", tc.id, got, err, tc.want)
			}
			// The id of the lease it names is the same ID, written as the
			// provider writes it.
			back, err := parseLeaseID(got.id())
			if err != nil || back != got {
				t.Errorf("leaseID of %+v does not parse back: %+v, %v", got, back, err)
			}
		})
	}
}

// TestLeaseID_ShareIsTheKeyPath: the import ID of a shared lease has the
// shared epoch and the share id where the key of its share has them.
func TestLeaseID_ShareIsTheKeyPath(t *testing.T) {
	l := leaseRef{bucket: "locks", name: "deploy/prod", epoch: 42, share: "0123456789abcdef"}
	key := l.token().Key()
	if want := "locks/" + strings.TrimSuffix(key, ".json"); l.id() != strings.Replace(want, "/0000000042/", "/42/", 1) {
		t.Errorf("id = %q, want the key %q's path", l.id(), key)
	}
}

// leaseID is the id of a lease that is not shared (leaseRef.id), for the
// tests that spell it.
func leaseID(bucket, name string, slot int, epoch uint64) string {
	return leaseRef{bucket: bucket, name: name, slot: slot, epoch: epoch}.id()
}

// TestLeaseID_SlotIsTheKeyPath: the import ID of a slot lease has the slot
// where the key of its epoch object has it, so that it reads like the key.
func TestLeaseID_SlotIsTheKeyPath(t *testing.T) {
	id := leaseID("locks", "ci/runners", 2, 7)
	key := s3lock.Token{Name: "ci/runners", Slot: 2, Epoch: 7}.Key()
	if want := "locks/" + strings.TrimSuffix(key, "lock-0000000007.json") + "7"; id != want {
		t.Errorf("leaseID = %q, want %q (from the key %q)", id, want, key)
	}
}

// TestSlotOfKey: the slot a key names is read from the SDK's own keys
// (s3lock.Token.Key), a lock's own epoch names none, and a lock whose name
// merely resembles a slot's is not taken for one.
func TestSlotOfKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int
	}{
		{s3lock.Token{Name: "ci/runners", Slot: 2, Epoch: 7}.Key(), 2},
		{s3lock.Token{Name: "ci/runners", Slot: s3lock.MaxSlots, Epoch: 1}.Key(), s3lock.MaxSlots},
		{s3lock.Token{Name: "ci/runners", Epoch: 7}.Key(), 0},
		{"ci/lock-slots/x/lock-0000000001.json", 0},
		{"lock-slots/2/lock-0000000001.json", 0},
		{"", 0},
	} {
		if got := slotOfKey(c.key); got != c.want {
			t.Errorf("slotOfKey(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

// TestAccLeaseResource_ImportSlotLease: the lease of one slot of a lock that
// admits several holders, taken by an earlier pipeline step, is imported by
// its slot import ID, kept by an empty plan, and destroy releases that slot
// only.
func TestAccLeaseResource_ImportSlotLease(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("ci/runners")
	kept := e.hold(t, "pipeline-step-0", name, time.Hour, s3lock.WithSlots(3))
	l := e.hold(t, "pipeline-step-1", name, 2*time.Hour, s3lock.WithSlots(3), s3lock.WithMetadata(map[string]string{"run": "42"}))
	l.Detach()
	cfg := e.providerConfig(nil) + leaseConfig(e.bucket, name, "slots = 3", `lease_duration = "2h"`, `metadata = { run = "42" }`)
	addr := "s3lock_lease.test"
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy: func(*terraform.State) error {
			_, err := e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch})
			if !leaseReleased(err) {
				return fmt.Errorf("after destroy, slot %d of %q: %w; want its epoch %d released", l.Token().Slot, name, err, l.Token().Epoch)
			}
			return kept.Renew(t.Context()) // the other slot is not touched
		},
		Steps: []tfresource.TestStep{
			{
				Config:             cfg,
				ResourceName:       addr,
				ImportState:        true,
				ImportStatePersist: true,
				ImportStateId:      leaseID(e.bucket, name, l.Token().Slot, l.Token().Epoch),
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("imported %d instances, want 1", len(states))
					}
					a := states[0].Attributes
					want := map[string]string{
						"id": leaseID(e.bucket, name, l.Token().Slot, l.Token().Epoch), "slots": "3", "slot": strconv.Itoa(l.Token().Slot),
						"epoch": strconv.FormatUint(l.Token().Epoch, 10), "key": l.Token().Key(), "holder": "pipeline-step-1",
						"lease_duration": "2h", "metadata.run": "42",
					}
					for k, v := range want {
						if a[k] != v {
							return fmt.Errorf("imported %s = %q, want %q (all: %v)", k, a[k], v, a)
						}
					}
					return nil
				},
			},
			{
				Config: cfg,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: checkSlotLeasesHeldBy(t, e, name, addr, "pipeline-step-1"),
			},
		},
	})
}

// checkSlotLeasesHeldBy checks that the slot lease at addr is the current
// lease of its slot, held by holder.
func checkSlotLeasesHeldBy(t *testing.T, e *accEnv, name, addr, holder string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		a, err := attrsOf(s, addr, "slot", "epoch", "key")
		if err != nil {
			return err
		}
		slot, _ := strconv.Atoi(a["slot"])
		epoch, _ := strconv.ParseUint(a["epoch"], 10, 64)
		st, err := e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: name, Slot: slot, Epoch: epoch})
		switch {
		case err != nil:
			return fmt.Errorf("%s holds slot %d at epoch %d, but: %w", addr, slot, epoch, err)
		case st.Holder != holder || st.Key != a["key"]:
			return fmt.Errorf("slot %d of %q: %+v; want held by %s with key %s", slot, name, st, holder, a["key"])
		}
		return nil
	}
}

// TestAccLeaseResource_ImportSlotRefused: an import ID that does not name a
// held slot lease is refused, with the formats and the lock's holders.
func TestAccLeaseResource_ImportSlotRefused(t *testing.T) {
	e := newAccEnv(t)
	slots, mutex := e.name("ci/runners"), e.name("deploy/prod")
	first := e.hold(t, "pipeline-1", slots, time.Hour, s3lock.WithSlots(3))
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	held := e.hold(t, "pipeline-2", slots, time.Hour, s3lock.WithSlots(3))
	e.hold(t, "deployer", mutex, time.Hour)
	holders := fmt.Sprintf("The lock admits 3 holders; 1 of its slots is held now: slot %d by \"pipeline-2\" at epoch %d",
		held.Token().Slot, held.Token().Epoch)
	cases := []struct {
		name, lock, id string
		want           *regexp.Regexp
	}{
		{
			// Epoch 1 of the lock itself is its marker.
			name: "marker by the mutex format", lock: slots, id: leaseID(e.bucket, slots, 0, 1),
			want: matchError("Cannot import lease", "epoch 1 is the marker of a lock that admits 3 holders", holders,
				"Import the lease of one slot by", regexp.QuoteMeta(importSlotIDFormat)),
		},
		{
			name: "released slot epoch", lock: slots, id: leaseID(e.bucket, slots, first.Token().Slot, first.Token().Epoch),
			// Released, or superseded when the slot took a newer holder.
			want: matchError("Cannot import lease", fmt.Sprintf("slot %d", first.Token().Slot), "lost",
				regexp.QuoteMeta(importSlotIDFormat)),
		},
		{
			name: "slot of a mutex", lock: mutex, id: leaseID(e.bucket, mutex, 2, 1),
			want: matchError("Cannot import lease", "not a slot lock", "The import ID names slot 2", `held by "deployer"`,
				regexp.QuoteMeta(importIDFormat)),
		},
		{
			name: "slot beyond the lock's", lock: slots, id: leaseID(e.bucket, slots, 5, 1),
			want: matchError("Cannot import lease", "has 3 slots; there is no slot 5", "The import ID names slot 5", holders),
		},
		{
			name: "slot not a number", lock: slots, id: e.bucket + "/" + slots + "/lock-slots/two/1",
			want: matchError("Invalid import ID", `slot "two"`, regexp.QuoteMeta(importIDFormat),
				regexp.QuoteMeta(importSlotIDFormat)),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:        e.providerConfig(nil) + leaseConfig(e.bucket, tc.lock, "slots = 3"),
					ResourceName:  "s3lock_lease.test",
					ImportState:   true,
					ImportStateId: tc.id,
					ExpectError:   tc.want,
				}},
			})
		})
	}
}
