package provider

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// checkSharedLeases checks that the lease resources at addrs hold the lock
// name together, shared, and that each is one of the shares the SDK reads
// (State.Holders): mode, the shared epoch, the share's key, the id that
// imports it, and the holder.
func checkSharedLeases(t *testing.T, e *accEnv, name string, addrs ...string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		st := e.current(t, name)
		if !st.Shared || !st.Held || len(st.Holders) != len(addrs) {
			return fmt.Errorf("lock %q is %+v; want it held shared by %d holders", name, st, len(addrs))
		}
		shares := map[string]s3lock.State{}
		for _, h := range st.Holders {
			shares[h.Key] = h
		}
		for _, addr := range addrs {
			attrs, err := attrsOf(s, addr, modeAttr, "epoch", "key", "id", "holder", "slot")
			if err != nil {
				return err
			}
			h, ok := shares[attrs["key"]]
			if !ok {
				return fmt.Errorf("%s holds %s, which the store does not show held (holders %+v)", addr, attrs["key"], st.Holders)
			}
			delete(shares, attrs["key"]) // each resource its own share
			// The shared epoch is the share's (the lock's newest epoch may be
			// a writer's that gave up, above it).
			ref := leaseRef{bucket: e.bucket, name: name, epoch: h.Epoch, share: shareOfKey(name, h.Epoch, h.Key)}
			want := map[string]string{
				modeAttr: modeShared,
				"epoch":  strconv.FormatUint(h.Epoch, 10),
				"id":     ref.id(),
				"holder": "terraform-test",
				"slot":   "0",
			}
			for k, v := range want {
				if attrs[k] != v {
					return fmt.Errorf("%s.%s = %q, want %q (the store's share: %+v)", addr, k, attrs[k], v, h)
				}
			}
			if ref.share == "" || h.Holder != "terraform-test" {
				return fmt.Errorf("share of %q as the store reads it: %+v", name, h)
			}
		}
		return nil
	}
}

// TestAccLeaseResource_Shared: two resources with mode = "shared" on one
// lock both apply and hold it at once, each with its own share under one
// shared epoch; the data source shows the lock held shared by both; an
// exclusive resource on the lock that does not wait fails saying that
// shared holders hold it, and takes nothing from them; a share is imported by its id;
// mode = "shared" with slots > 1 is refused at plan time, naming both;
// destroy releases the shares.
func TestAccLeaseResource_Shared(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("db/prod")
	two := e.providerConfig(nil) + namedLeaseConfig("a", e.bucket, name, `mode = "shared"`) +
		namedLeaseConfig("b", e.bucket, name, `mode = "shared"`)
	withData := two + fmt.Sprintf(`
data "s3lock_lease" "db" {
  bucket = %q
  name   = %q
}
`, e.bucket, name)
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy: func(*terraform.State) error {
			if st := e.current(t, name); st.Held {
				return fmt.Errorf("after destroy, lock %q is %+v; want no holder", name, st)
			}
			return nil
		},
		Steps: []tfresource.TestStep{
			{
				Config: two,
				Check:  checkSharedLeases(t, e, name, "s3lock_lease.a", "s3lock_lease.b"),
			},
			{
				Config: withData,
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkDataMatchesCurrent(t, e, "data.s3lock_lease.db", name),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", modeAttr, modeShared),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "pending", "false"),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.#", "2"),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.0.slot", "0"),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.0.holder", "terraform-test"),
					tfresource.TestCheckNoResourceAttr("data.s3lock_lease.db", "holder"),
					tfresource.TestCheckNoResourceAttr("data.s3lock_lease.db", "lease_duration"),
				),
			},
			{
				// A writer that does not wait fails at once, naming the
				// readers. (A writer that waits for them is an SDK matter:
				// see the report of the change that added this test.)
				Config: two + namedLeaseConfig("writer", e.bucket, name, `timeouts { create = "0s" }`),
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf(`Lock %q in bucket %q`, name, e.bucket),
					"2 shared holders", "Shared holders", "an exclusive lease waits"),
			},
			{
				// The readers hold on: the writer that gave up took nothing.
				Config: two,
				Check:  checkSharedLeases(t, e, name, "s3lock_lease.a", "s3lock_lease.b"),
			},
			{
				Config:            two,
				ResourceName:      "s3lock_lease.a",
				ImportState:       true,
				ImportStateVerify: true,
				// Timeouts are configuration only.
				ImportStateVerifyIgnore: []string{"timeouts", "expires_at", "held_until_at_most", "leases"},
			},
			{
				Config:   two + namedLeaseConfig("pool", e.bucket, e.name("pool"), `mode = "shared"`, "slots = 3"),
				PlanOnly: true,
				ExpectError: matchError(`mode = "shared" does not go with slots`, `mode = "shared" and slots = 3 cannot go together`,
					`Set mode = "exclusive"`),
			},
			{
				// The last configuration is the one destroyed.
				Config: two,
			},
		},
	})
}

// TestAccLeaseResource_ExclusiveAfterShared: once the shared leases are
// destroyed, an exclusive lease of the lock applies, at an epoch above the
// shared one, and the data source shows it held exclusively; changing a
// lease's mode replaces it.
func TestAccLeaseResource_ExclusiveAfterShared(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("db/prod")
	var sharedEpoch string
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{
			{
				Config: e.providerConfig(nil) + namedLeaseConfig("a", e.bucket, name, `mode = "shared"`),
				Check: tfresource.ComposeAggregateTestCheckFunc(
					checkSharedLeases(t, e, name, "s3lock_lease.a"),
					func(s *terraform.State) (err error) {
						sharedEpoch, err = stateAttr(s, "s3lock_lease.a", "epoch")
						return err
					},
				),
			},
			{
				Config: e.providerConfig(nil) + namedLeaseConfig("a", e.bucket, name) + fmt.Sprintf(`
data "s3lock_lease" "db" {
  bucket = %q
  name   = %q
  depends_on = [s3lock_lease.a]
}
`, e.bucket, name),
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttr("s3lock_lease.a", modeAttr, modeExclusive),
					func(s *terraform.State) error {
						epoch, err := stateAttr(s, "s3lock_lease.a", "epoch")
						if err != nil {
							return err
						}
						if a, b := mustAtoi(epoch), mustAtoi(sharedEpoch); a <= b {
							return fmt.Errorf("the exclusive lease's epoch %d is not above the shared epoch %d", a, b)
						}
						st := e.current(t, name)
						if st.Shared || st.Holder != "terraform-test" || strconv.FormatUint(st.Epoch, 10) != epoch {
							return fmt.Errorf("lock %q is %+v; want it held exclusively at epoch %s", name, st, epoch)
						}
						return nil
					},
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", modeAttr, modeExclusive),
					tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.#", "0"),
				),
			},
		},
	})
}

// mustAtoi reads a number the provider wrote into state.
func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestAccLeaseEphemeral_Shared: an ephemeral lease with mode = "shared"
// joins a lock that someone else holds shared, under terraform apply, and
// its result is its own share (mode, shared epoch, the share's key); an
// exclusive one that does not wait fails saying that a shared holder holds
// the lock; mode = "shared" with slots > 1 is refused at plan time. (The
// in-process provider of these tests takes the lock per phase.)
func TestAccLeaseEphemeral_Shared(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("db/prod")
	reader := e.hold(t, "report", name, time.Hour, s3lock.WithShared())
	config := func(extra ...string) string {
		return requiredProviders("s3lock", "echo") + e.providerBlock(nil) + ephemeralLeaseConfig(e.bucket, name, append([]string{perPhase}, extra...)...) + `
provider "echo" {
  data = ephemeral.s3lock_lease.run
}

resource "echo" "lease" {}
`
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(echoFactories),
		Steps: []tfresource.TestStep{
			{
				Config:      config(`mode = "shared"`, "slots = 3"),
				PlanOnly:    true,
				ExpectError: matchError(`mode = "shared" does not go with slots`, "slots = 3"),
			},
			{
				Config: config(`mode = "shared"`, `wait_timeout = "0s"`),
				ConfigStateChecks: []statecheck.StateCheck{
					checkEchoedLease(func(l echoedLease) error {
						epoch, err := l.Epoch.Int64()
						if err != nil {
							return err
						}
						share := shareOfKey(name, uint64(epoch), l.Key)
						if l.Mode != modeShared || uint64(epoch) != reader.Token().Epoch || share == "" || share == reader.Token().Share ||
							len(l.Leases) != 1 || l.Leases[0].Key != l.Key {
							return fmt.Errorf("ephemeral result %+v; want a share of its own beside the report's %+v", l, reader.Token())
						}
						// The run released its share as it ended; the report's
						// is untouched.
						tok := s3lock.Token{Name: name, Epoch: uint64(epoch), Share: share}
						if _, err := e.sdk(t, "observer").Lookup(t.Context(), tok); err == nil {
							return fmt.Errorf("after the run, its share %s is still held", tok.Key())
						}
						return reader.Renew(t.Context())
					}),
				},
			},
			{
				Config:   config(`wait_timeout = "0s"`),
				PlanOnly: true,
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf(`Lock %q in bucket %q`, name, e.bucket),
					"1 shared holder", "Shared holders"),
			},
			{
				// The last configuration is the one destroyed.
				Config: config(`mode = "shared"`),
			},
		},
	})
}

// TestAccLeaseDataSource_PendingWriter: while a writer waits for a shared
// holder, the data source shows the lock still held shared, pending, with
// the writer as holder and the shared holder it waits for in holders.
func TestAccLeaseDataSource_PendingWriter(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("db/prod")
	reader := e.hold(t, "plan-41", name, time.Hour, s3lock.WithShared())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	writer := e.sdk(t, "apply-40")
	go func() {
		defer close(done)
		if l, err := writer.Acquire(ctx, name, s3lock.WithOrder(s3lock.OrderNone)); err == nil {
			_ = l.Release(context.Background())
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	testkit.Eventually(t, 10*time.Second, "the writer's pending epoch", func() bool {
		st, err := e.sdk(t, "observer").Current(t.Context(), name)
		return err == nil && st.Pending
	})
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: e.providerConfig(nil) + fmt.Sprintf(`
data "s3lock_lease" "db" {
  bucket = %q
  name   = %q
}
`, e.bucket, name),
			Check: tfresource.ComposeAggregateTestCheckFunc(
				checkDataMatchesCurrent(t, e, "data.s3lock_lease.db", name),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", modeAttr, modeShared),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "pending", "true"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holder", "apply-40"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.#", "1"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.0.holder", "plan-41"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.db", "holders.0.key", reader.Token().Key()),
			),
		}},
	})
}
