package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
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

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// leaseConfig is an s3lock_lease resource block named test; extra holds
// further arguments (raw HCL lines).
func leaseConfig(bucket, name string, extra ...string) string {
	return namedLeaseConfig("test", bucket, name, extra...)
}

// namedLeaseConfig is an s3lock_lease resource block named label.
func namedLeaseConfig(label, bucket, name string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource \"s3lock_lease\" %q {\n  bucket = %q\n  name   = %q\n", label, bucket, name)
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// checkLeaseMatchesStore checks that the resource's lease is the lock's
// current, held lease, as the SDK reads it, and runs more checks on that
// state.
func checkLeaseMatchesStore(t *testing.T, e *accEnv, addr, name string, more ...func(s3lock.State) error) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		st := e.current(t, name)
		epoch, err := stateAttr(s, addr, "epoch")
		if err != nil {
			return err
		}
		want := map[string]string{
			"epoch":       strconv.FormatUint(st.Epoch, 10),
			"key":         st.Key,
			"holder":      st.Holder,
			"acquired_at": formatTime(st.AcquiredAt),
			"id":          leaseID(e.bucket, name, 0, st.Epoch),
		}
		for k, v := range want {
			got, err := stateAttr(s, addr, k)
			if err != nil {
				return err
			}
			if got != v {
				return fmt.Errorf("%s.%s = %q, but the store says %q (epoch in state %s)", addr, k, got, v, epoch)
			}
		}
		if !st.Held {
			return fmt.Errorf("lock %q epoch %d is not held: %+v", name, st.Epoch, st)
		}
		for _, f := range more {
			if err := f(st); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkReleased checks that the lock's newest epoch is released.
func checkReleased(t *testing.T, e *accEnv, name string, epoch uint64) func(*terraform.State) error {
	t.Helper()
	return func(*terraform.State) error {
		st := e.current(t, name)
		if st.Epoch != epoch || !st.Released || st.Held {
			return fmt.Errorf("after destroy, lock %q: epoch %d released %v held %v; want epoch %d released",
				name, st.Epoch, st.Released, st.Held, epoch)
		}
		return nil
	}
}

func renewals(want uint64) func(s3lock.State) error {
	return func(st s3lock.State) error {
		if st.Renewals != want {
			return fmt.Errorf("lease epoch %d has %d renewals, want %d", st.Epoch, st.Renewals, want)
		}
		return nil
	}
}

// TestAccLeaseResource_Lifecycle: create (waiting in order "fifo" unless
// told otherwise), in-place updates without renewal, renewal inside
// renew_before, import, and destroy releasing the lease.
func TestAccLeaseResource_Lifecycle(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("deploy/prod")
	addr := "s3lock_lease.test"
	cfg := func(renewBefore string, extra ...string) string {
		return e.providerConfig(nil) + leaseConfig(e.bucket, name, append([]string{
			`lease_duration = "1h"`,
			fmt.Sprintf("renew_before = %q", renewBefore),
			`metadata = { change = "CHG-1" }`}, extra...)...)
	}
	var firstExpiry string
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkReleased(t, e, name, 1),
		Steps: []tfresource.TestStep{
			{
				Config: cfg("10m"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("order"), knownvalue.StringExact("fifo")),
				}},
				Check: checkLeaseMatchesStore(t, e, addr, name, renewals(0), func(st s3lock.State) error {
					if st.Metadata["change"] != "CHG-1" || st.LeaseDuration != time.Hour {
						return fmt.Errorf("lease metadata %v duration %s, want change=CHG-1 and 1h", st.Metadata, st.LeaseDuration)
					}
					return nil
				}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("holder"), knownvalue.StringExact("terraform-test")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("key"), knownvalue.StringExact(s3lock.Token{Name: name, Epoch: 1}.Key())),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("order"), knownvalue.StringExact("fifo")),
					// Remember the first expiry for the steps below.
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("expires_at"), knownvalue.StringFunc(func(v string) error {
						firstExpiry = v
						_, err := time.Parse(time.RFC3339, v)
						return err
					})),
				},
			},
			{
				// Changing renew_before or order is an update in place
				// that does not touch the lease: order only matters
				// while apply waits for the lock.
				Config: cfg("20m", `order = "newest"`),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(1)),
				}},
				Check: checkLeaseMatchesStore(t, e, addr, name, renewals(0)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("order"), knownvalue.StringExact("newest")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("expires_at"), knownvalue.StringFunc(func(v string) error {
						if v != firstExpiry {
							return fmt.Errorf("expires_at %s changed from %s without a renewal", v, firstExpiry)
						}
						return nil
					})),
				},
			},
			{
				// 45 minutes later the lease is within renew_before of its
				// expiry: the plan proposes a renewal in place.
				PreConfig: func() { e.setClockOffset(45 * time.Minute) },
				Config:    cfg("20m"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(addr, tfjsonpath.New("expires_at")),
				}},
				Check: tfresource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { e.setClockOffset(0); return nil },
					checkLeaseMatchesStore(t, e, addr, name, renewals(1)),
				),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("expires_at"), knownvalue.StringFunc(func(v string) error {
						if v < firstExpiry {
							return fmt.Errorf("expires_at %s after the renewal is before %s", v, firstExpiry)
						}
						return nil
					})),
				},
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateIdFunc: func(s *terraform.State) (string, error) { return stateAttr(s, addr, "id") },
				// renew_before and timeouts live only in configuration;
				// expires_at is estimated anew from the store on import.
				ImportStateVerifyIgnore: []string{"renew_before", "timeouts", "expires_at"},
			},
		},
	})
}

// TestAccLeaseResource_SecondWaitsForFirst: a second resource on the same lock,
// in another Terraform configuration, waits while the first holds it and
// acquires the next epoch once the first is destroyed.
func TestAccLeaseResource_SecondWaitsForFirst(t *testing.T) {
	e := newAccEnv(t)
	t.Parallel()
	name := e.name("handoff")
	addr := "s3lock_lease.test"
	first := make(chan uint64, 1)
	secondWaits := make(chan struct{})
	var waited atomic.Bool
	const patience = 3 * time.Minute

	// The two configurations run at the same time, each in its own
	// subtest; they coordinate through the channels.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		t.Run("first", func(t *testing.T) {
			cfg := e.providerConfig(map[string]string{"holder": `"first"`})
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{
					{
						Config: cfg + leaseConfig(e.bucket, name),
						Check: func(s *terraform.State) error {
							v, err := stateAttr(s, addr, "epoch")
							if err != nil {
								return err
							}
							n, err := strconv.ParseUint(v, 10, 64)
							first <- n
							return err
						},
					},
					{
						// Destroy the first lease once the second
						// configuration is waiting for it.
						PreConfig: func() {
							select {
							case <-secondWaits:
							case <-time.After(patience):
								t.Fatal("the second resource never waited for the first")
							}
						},
						Config: cfg,
					},
				},
			})
		})
	}()
	go func() {
		defer wg.Done()
		t.Run("second", func(t *testing.T) {
			var firstEpoch uint64
			select {
			case firstEpoch = <-first:
			case <-time.After(patience):
				t.Fatal("the first resource was never created")
			}
			hooks := e.hooks
			hooks.onWait = func(h *s3lock.HeldError) {
				if h.Epoch == firstEpoch && h.Holder == "first" && waited.CompareAndSwap(false, true) {
					close(secondWaits)
				}
			}
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.factoriesWith(hooks),
				CheckDestroy:             checkReleased(t, e, name, firstEpoch+1),
				Steps: []tfresource.TestStep{{
					Config: e.providerConfig(map[string]string{"holder": `"second"`}) +
						leaseConfig(e.bucket, name, `timeouts { create = "3m" }`),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(int64(firstEpoch)+1)),
						statecheck.ExpectKnownValue(addr, tfjsonpath.New("holder"), knownvalue.StringExact("second")),
					},
					Check: tfresource.ComposeAggregateTestCheckFunc(
						checkLeaseMatchesStore(t, e, addr, name),
						func(*terraform.State) error {
							if !waited.Load() {
								return fmt.Errorf("the second resource never reported waiting for the first")
							}
							return nil
						},
					),
				}},
			})
		})
	}()
	wg.Wait()
}

// TestAccLeaseResource_Order: apply waits for a held lock in the order the
// configuration asks for: in the lock's line with "fifo" (the default) and
// "newest", racing outside it with "none". A "newest" waiter that a newer
// one supersedes while it waits fails without taking the lock.
func TestAccLeaseResource_Order(t *testing.T) {
	addr := "s3lock_lease.test"
	cases := []struct {
		name  string
		extra []string // arguments of the resource
		// inLine is the order of the apply's place in the line while it
		// waits; "" when it waits outside the line.
		inLine s3lock.Order
		// supersede queues a newer "newest" waiter while the apply waits;
		// otherwise the holder releases the lock.
		supersede bool
		wantOrder string // the order in state
	}{
		{name: "default is fifo", inLine: s3lock.OrderFIFO, wantOrder: "fifo"},
		{name: "none", extra: []string{`order = "none"`}, wantOrder: "none"},
		{name: "newest, superseded", extra: []string{`order = "newest"`}, inLine: s3lock.OrderNewest, supersede: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAccEnv(t)
			name := e.name("deploy/order")
			held := e.hold(t, "deployer", name, time.Hour)
			// What the line looked like once the apply waited.
			seen := make(chan []s3lock.Waiter, 1)
			e.onceWaiting("deployer", func() {
				line, err := e.line(name)
				if err != nil {
					t.Errorf("reading the line: %v", err)
				}
				seen <- line
				if tc.supersede {
					if err := e.queue("pipeline 43", name, s3lock.WithOrder(s3lock.OrderNewest)); err != nil {
						t.Error(err)
					}
					return
				}
				if err := held.Release(context.Background()); err != nil {
					t.Errorf("releasing the held lease: %v", err)
				}
			})
			step := tfresource.TestStep{
				Config: e.providerConfig(nil) + leaseConfig(e.bucket, name, append(tc.extra, `timeouts { create = "1m" }`)...),
			}
			if tc.supersede {
				step.ExpectError = matchError("Superseded by a newer run", `Lock "`+name+`" in bucket "`+e.bucket+`"`,
					`A newer run, "pipeline 43", queued for the lock with order = "newest"`, "stood down",
					"nothing that depends on the lock was changed")
			} else {
				step.ConfigStateChecks = []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("order"), knownvalue.StringExact(tc.wantOrder)),
				}
			}
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps:                    []tfresource.TestStep{step},
			})

			var line []s3lock.Waiter
			select {
			case line = <-seen:
			default:
				t.Fatal("the apply never reported waiting for the held lock")
			}
			var places []string
			for _, w := range line {
				places = append(places, fmt.Sprintf("%s (%s)", w.Holder, w.Order))
			}
			want := []string{}
			if tc.inLine != "" {
				want = []string{fmt.Sprintf("terraform-test (%s)", tc.inLine)}
			}
			if strings.Join(places, ", ") != strings.Join(want, ", ") {
				t.Errorf("while the apply waited, the line was %v; want %v", places, want)
			}
			if !tc.supersede {
				return
			}
			// The apply left the line to the newer run; the holder kept
			// the lock.
			if st := e.current(t, name); st.Epoch != 1 || !st.Held || st.Holder != "deployer" {
				t.Errorf("after the apply stood down, the lock is %+v; want epoch 1 still held by deployer", st)
			}
			line, err := e.line(name)
			if err != nil || len(line) != 1 || line[0].Holder != "pipeline 43" {
				t.Errorf("after the apply stood down, the line is %+v (%v); want only pipeline 43", line, err)
			}
		})
	}
}

// TestAccLeaseResource_LostLeaseReacquired: a lease lost outside Terraform is
// removed from state by refresh and acquired again by the next apply.
func TestAccLeaseResource_LostLeaseReacquired(t *testing.T) {
	addr := "s3lock_lease.test"
	cases := []struct {
		name string
		// lose makes the lease of epoch 1 end; it returns the epoch the
		// next apply is expected to get.
		lose func(t *testing.T, e *accEnv, name string) uint64
	}{
		{
			name: "force-released",
			lose: func(t *testing.T, e *accEnv, name string) uint64 {
				t.Helper()
				if err := e.sdk(t, "operator").ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
					t.Fatalf("ForceRelease: %v", err)
				}
				return 2
			},
		},
		{
			name: "replaced",
			lose: func(t *testing.T, e *accEnv, name string) uint64 {
				t.Helper()
				if err := e.sdk(t, "operator").ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
					t.Fatalf("ForceRelease: %v", err)
				}
				// Another holder takes epoch 2 and keeps it until the next
				// apply waits for it.
				l := e.hold(t, "intruder", name, time.Hour)
				e.setOnWait(func(h *s3lock.HeldError) {
					if h.Holder == "intruder" {
						go func() { _ = l.Release(context.Background()) }()
					}
				})
				return 3
			},
		},
		{
			name: "epoch object deleted",
			lose: func(t *testing.T, e *accEnv, name string) uint64 {
				t.Helper()
				_, err := e.ns.Client.DeleteObject(t.Context(), &s3.DeleteObjectInput{
					Bucket: aws.String(e.bucket), Key: aws.String(s3lock.Token{Name: name, Epoch: 1}.Key()),
				})
				if err != nil {
					t.Fatalf("DeleteObject: %v", err)
				}
				return 1
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAccEnv(t)
			name := e.name("lost")
			cfg := e.providerConfig(nil) + leaseConfig(e.bucket, name, `timeouts { create = "2m" }`)
			var next uint64
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{
					{
						Config: cfg,
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Exact(1)),
						},
					},
					{
						PreConfig:          func() { next = tc.lose(t, e, name) },
						RefreshState:       true,
						ExpectNonEmptyPlan: true,
						Check: func(s *terraform.State) error {
							if _, ok := s.RootModule().Resources[addr]; ok {
								return fmt.Errorf("refresh kept the lost lease in state")
							}
							return nil
						},
					},
					{
						Config: cfg,
						ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
							plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
						}},
						Check: checkLeaseMatchesStore(t, e, addr, name),
						ConfigStateChecks: []statecheck.StateCheck{
							// next is only known once the previous step
							// has lost the lease, so compare at check time.
							statecheck.ExpectKnownValue(addr, tfjsonpath.New("epoch"), knownvalue.Int64Func(func(v int64) error {
								if v < 0 || uint64(v) != next {
									return fmt.Errorf("epoch %d after the lease was lost, want %d", v, next)
								}
								return nil
							})),
						},
					},
				},
			})
		})
	}
}

// TestAccLeaseResource_ImportAdoptsPipelineLease: a lease taken by an earlier
// pipeline step (here, the SDK) is imported, kept by an empty plan, and
// released by destroy.
func TestAccLeaseResource_ImportAdoptsPipelineLease(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("pipeline/migrate")
	l := e.hold(t, "pipeline-step-1", name, 2*time.Hour, s3lock.WithMetadata(map[string]string{"run": "42"}))
	epoch := l.Token().Epoch
	l.Detach()
	cfg := e.providerConfig(nil) + leaseConfig(e.bucket, name, `lease_duration = "2h"`, `metadata = { run = "42" }`)
	addr := "s3lock_lease.test"
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		CheckDestroy:             checkReleased(t, e, name, epoch),
		Steps: []tfresource.TestStep{
			{
				Config:             cfg,
				ResourceName:       addr,
				ImportState:        true,
				ImportStatePersist: true,
				ImportStateId:      leaseID(e.bucket, name, 0, epoch),
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("imported %d instances, want 1", len(states))
					}
					a := states[0].Attributes
					if a["holder"] != "pipeline-step-1" || a["epoch"] != strconv.FormatUint(epoch, 10) ||
						a["lease_duration"] != "2h" || a["metadata.run"] != "42" {
						return fmt.Errorf("imported attributes %v do not describe the pipeline's lease", a)
					}
					return nil
				},
			},
			{
				Config: cfg,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: checkLeaseMatchesStore(t, e, addr, name),
			},
		},
	})
}

// TestAccLeaseResource_ImportRefused: only the current, held epoch imports.
func TestAccLeaseResource_ImportRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, e *accEnv, name string) string // returns the import ID
		want  *regexp.Regexp
	}{
		{
			name: "stale epoch",
			setup: func(t *testing.T, e *accEnv, name string) string {
				t.Helper()
				for range 2 {
					if err := e.hold(t, "earlier", name, time.Minute).Release(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				e.hold(t, "current", name, time.Hour)
				return leaseID(e.bucket, name, 0, 2)
			},
			want: matchError("Cannot import lease", `\(epoch 2\) lost`, "replaced by a newer epoch", "lock is at epoch 3", "<bucket>/<name>/<epoch>"),
		},
		{
			name: "released epoch",
			setup: func(t *testing.T, e *accEnv, name string) string {
				t.Helper()
				if err := e.hold(t, "earlier", name, time.Minute).Release(t.Context()); err != nil {
					t.Fatal(err)
				}
				return leaseID(e.bucket, name, 0, 1)
			},
			want: matchError("Cannot import lease", "was released", "<bucket>/<name>/<epoch>"),
		},
		{
			name: "lock never existed",
			setup: func(t *testing.T, e *accEnv, name string) string {
				t.Helper()
				return leaseID(e.bucket, name, 0, 1)
			},
			want: matchError("Cannot import lease", "does not exist", "The lock has no epochs now"),
		},
		{
			name:  "no epoch",
			setup: func(t *testing.T, e *accEnv, name string) string { t.Helper(); return e.bucket + "/" + name },
			want:  matchError("Invalid import ID", "<bucket>/<name>/<epoch>"),
		},
		{
			name:  "no name",
			setup: func(t *testing.T, e *accEnv, _ string) string { t.Helper(); return e.bucket + "/7" },
			want:  matchError("Invalid import ID", "<bucket>/<name>/<epoch>"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAccEnv(t)
			name := e.name("import/" + strings.ReplaceAll(tc.name, " ", "-"))
			id := tc.setup(t, e, name)
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:        e.providerConfig(nil) + leaseConfig(e.bucket, name),
					ResourceName:  "s3lock_lease.test",
					ImportState:   true,
					ImportStateId: id,
					ExpectError:   tc.want,
				}},
			})
		})
	}
}

// TestAccLeaseResource_Validation: bad arguments fail the plan with a
// diagnostic naming the bucket and lock.
func TestAccLeaseResource_Validation(t *testing.T) {
	e := newAccEnv(t)
	bucket := e.bucket
	cases := []struct {
		name   string
		config string
		want   *regexp.Regexp
	}{
		{
			name:   "duration without unit",
			config: leaseConfig(bucket, "ok", `lease_duration = "300"`),
			want:   matchError("Invalid duration", `lease_duration = "300"`, `lock "ok" in bucket "`+bucket+`"`),
		},
		{
			name:   "duration in words",
			config: leaseConfig(bucket, "ok", `lease_duration = "ten minutes"`),
			want:   matchError("Invalid duration", `bucket "`+bucket+`"`),
		},
		{
			name:   "duration too short",
			config: leaseConfig(bucket, "ok", `lease_duration = "1s"`),
			want:   matchError("Duration out of range", `lock "ok" in bucket "`+bucket+`"`, `\[2s, 720h\]`),
		},
		{
			name:   "renew_before not shorter than the lease",
			config: leaseConfig(bucket, "ok", `lease_duration = "10m"`, `renew_before = "10m"`),
			want:   matchError("renew_before too long", `lock "ok" in bucket "`+bucket+`"`),
		},
		{
			// A renewed lease is trusted for 2h minus the safety margin
			// (5s + 0.72s): renewing 1h59m59s before expires_at is always due.
			name:   "renew_before within the safety margin of the lease",
			config: leaseConfig(bucket, "ok", `lease_duration = "2h"`, `renew_before = "1h59m59s"`),
			want:   matchError("renew_before too long", "shorter than 1h59m54"),
		},
		{
			name:   "empty name",
			config: leaseConfig(bucket, ""),
			want:   matchError("Invalid lock name", `Lock name "" for bucket "`+bucket+`"`, "empty"),
		},
		{
			name:   "name escaping its prefix",
			config: leaseConfig(bucket, "team/../other"),
			want:   matchError("Invalid lock name", `"team/../other" for bucket "`+bucket+`"`, "escape"),
		},
		{
			name:   "name with leading slash",
			config: leaseConfig(bucket, "/abs"),
			want:   matchError("Invalid lock name", `bucket "`+bucket+`"`, "starts with a slash"),
		},
		{
			name:   "name like an epoch object",
			config: leaseConfig(bucket, "a/lock-0000000001.json"),
			want:   matchError("Invalid lock name", "epoch object"),
		},
		{
			name:   "bad bucket",
			config: leaseConfig("Not_A_Bucket", "ok"),
			want:   matchError("Invalid bucket name", "Not_A_Bucket"),
		},
		{
			name:   "order not an order",
			config: leaseConfig(bucket, "ok", `order = "lifo"`),
			want:   matchError("Invalid order", `order "lifo"`, `"fifo"`, `"newest"`, `"none"`),
		},
		{
			name:   "bad timeout",
			config: leaseConfig(bucket, "ok", `timeouts { create = "soon" }`),
			want:   matchError("create", "soon"),
		},
		{
			name:   "no slots",
			config: leaseConfig(bucket, "ok", "slots = 0"),
			want:   matchError("Invalid Attribute Value", "slots", "between 1 and 64, got: 0"),
		},
		{
			name:   "more slots than a lock admits",
			config: leaseConfig(bucket, "ok", "slots = 65"),
			want:   matchError("Invalid Attribute Value", "slots", "between 1 and 64, got: 65"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(nil) + tc.config,
					PlanOnly:    true,
					ExpectError: tc.want,
				}},
			})
		})
	}
}

func TestFormatDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0:                                "0s",
		2 * time.Second:                  "2s",
		90 * time.Second:                 "1m30s",
		time.Hour:                        "1h",
		time.Hour + 30*time.Minute:       "1h30m",
		720 * time.Hour:                  "720h",
		1500 * time.Millisecond:          "1.5s",
		2*time.Hour + 3*time.Second:      "2h3s",
		25*time.Hour + time.Minute + 1e9: "25h1m1s",
	}
	for d, want := range cases {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(formatDuration(d)); err != nil || back != d {
			t.Errorf("formatDuration(%s) = %q does not parse back: %v, %v", d, formatDuration(d), back, err)
		}
	}
}

// TestRenewedSince: Read moves expires_at only when the lease was renewed
// since it was stored, judged at the one-second resolution of expires_at.
func TestRenewedSince(t *testing.T) {
	stored := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		until  time.Time
		stored types.String
		want   bool
	}{
		{name: "same second, fraction dropped in state", until: stored.Add(900 * time.Millisecond), stored: timeValue(stored), want: false},
		{name: "earlier estimate", until: stored.Add(-3 * time.Second), stored: timeValue(stored), want: false},
		{name: "renewed: a later second", until: stored.Add(time.Second), stored: timeValue(stored), want: true},
		{name: "stored value not a time", until: stored, stored: types.StringValue("soon"), want: true},
		{name: "no estimate", until: time.Time{}, stored: types.StringValue("soon"), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewedSince(tc.until, tc.stored); got != tc.want {
				t.Errorf("renewedSince(%s, %s) = %v, want %v", tc.until, tc.stored, got, tc.want)
			}
		})
	}
}

// TestLeaseResource_OverElsewhere: Read and Delete of a state without a lease
// token (written by hand: Resume adopts it) whose lease another handle ended.
// A lease a pipeline step released is deleted quietly; one an operator
// force-released is reported as lost, and Read removes it from state.
func TestLeaseResource_OverElsewhere(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, c *s3lock.Client, name string)
		// quietDelete: Delete reports nothing; else the lease-lost warning.
		quietDelete bool
		// readWarning is the summary of Read's one warning.
		readWarning string
	}{
		{name: "released through another handle", end: func(t *testing.T, c *s3lock.Client, name string) {
			t.Helper()
			l, err := c.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 1}, s3lock.WithoutAutoRenew())
			if err == nil {
				err = l.Release(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
		}, quietDelete: true, readWarning: "Lease released elsewhere"},
		{name: "force-released", end: func(t *testing.T, c *s3lock.Client, name string) {
			t.Helper()
			if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
				t.Fatal(err)
			}
		}, readWarning: "Lease lost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, c, bucket, name := newDirectLeaseResource(t)
			tc.end(t, c, name)
			state := directLeaseState(t, r, bucket, name)

			var read resource.ReadResponse
			read.State = state
			r.Read(t.Context(), resource.ReadRequest{State: state}, &read)
			if read.Diagnostics.HasError() || read.Diagnostics.WarningsCount() != 1 || !read.State.Raw.IsNull() ||
				read.Diagnostics.Warnings()[0].Summary() != tc.readWarning {
				t.Errorf("Read: diagnostics %v, state removed %v; want one warning %q and the state removed",
					read.Diagnostics, read.State.Raw.IsNull(), tc.readWarning)
			}

			var del resource.DeleteResponse
			r.Delete(t.Context(), resource.DeleteRequest{State: state}, &del)
			switch {
			case del.Diagnostics.HasError():
				t.Errorf("Delete: %v", del.Diagnostics)
			case tc.quietDelete && len(del.Diagnostics) != 0:
				t.Errorf("Delete of a lease already released: %v; want nothing (nothing was lost)", del.Diagnostics)
			case !tc.quietDelete && (del.Diagnostics.WarningsCount() != 1 ||
				!strings.Contains(del.Diagnostics.Warnings()[0].Detail(), "may not have been exclusive")):
				t.Errorf("Delete of a force-released lease: %v; want the lease-lost warning", del.Diagnostics)
			}
		})
	}
}

// newDirectLeaseResource returns the lease resource configured on a fresh
// bucket, for calling its methods directly, an SDK client on that bucket,
// the bucket,
// and a lock name whose epoch 1 is held for an hour.
func newDirectLeaseResource(t *testing.T) (*leaseResource, *s3lock.Client, string, string) {
	t.Helper()
	ns := s3test.New(t)
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("terraform-test"))
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name("direct")
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	return &leaseResource{factory: &clientFactory{api: ns.Client, options: []s3lock.Option{s3lock.WithHolder("terraform-test")}}}, c, ns.Bucket, name
}

// directLeaseState is the state of a lease resource for epoch 1 of name,
// without private state.
func directLeaseState(t *testing.T, r *leaseResource, bucket, name string) tfsdk.State {
	t.Helper()
	var sr resource.SchemaResponse
	r.Schema(t.Context(), resource.SchemaRequest{}, &sr)
	st := tfsdk.State{Schema: sr.Schema, Raw: tftypes.NewValue(sr.Schema.Type().TerraformType(t.Context()), nil)}
	now := time.Now()
	diags := st.Set(t.Context(), &leaseResourceModelV0{
		ID: types.StringValue(leaseID(bucket, name, 0, 1)), Bucket: types.StringValue(bucket), Name: types.StringValue(name),
		Names: types.ListNull(types.StringType), Leases: types.ListNull(leaseSetElemType),
		LeaseDuration: types.StringValue("1h"), RenewBefore: types.StringNull(), Metadata: types.MapNull(types.StringType),
		Epoch: types.Int64Value(1), Key: types.StringValue(s3lock.Token{Name: name, Epoch: 1}.Key()), Holder: types.StringValue("terraform-test"),
		AcquiredAt: timeValue(now), ExpiresAt: timeValue(now.Add(time.Hour)),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType})},
	})
	if diags.HasError() {
		t.Fatalf("state: %v", diags)
	}
	return st
}

// TestAccLease_NameBesideAnObjectIsAClearError: a lease whose lock would
// live under an object ("deploy" beside the lock "deploy/prod") on a store
// that cannot keep both (versitygw's posix backend) fails with the object
// named and a way out, not as a store outage.
func TestAccLease_NameBesideAnObjectIsAClearError(t *testing.T) {
	e := newAccEnv(t)
	object, name := e.name("deploy"), e.name("deploy/prod")
	if _, err := e.ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(object),
		Body: strings.NewReader("an object, not a lock")}); err != nil {
		t.Fatal(err)
	}
	if l, err := e.sdk(t, "probe").TryAcquire(t.Context(), name); err == nil {
		_ = l.Release(t.Context())
		t.Skip("this store keeps the lock beside the object, as S3 does: nothing collides")
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: e.providerConfig(nil) + leaseConfig(e.bucket, name),
			ExpectError: matchError("Could not acquire lock", "s3://"+e.bucket+"/"+object+" exists",
				"name the lock apart from the objects it guards"),
		}},
	})
}
