package provider

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// max_hold caps a lease's tenure (s3lock.WithMaxHold): the lease and the data
// sources show the cap (held_until_at_most), a lease whose cap passes is
// lost with a diagnostic that names the cap and released, and a cap that
// does not outlast lease_duration is refused at plan time.

// TestAccLeaseResource_MaxHoldShowsTheCap: a capped lease shows
// held_until_at_most, its acquisition plus max_hold, as the store has it,
// and so does the data source; an uncapped one shows null.
func TestAccLeaseResource_MaxHoldShowsTheCap(t *testing.T) {
	e := newAccEnv(t)
	capped, uncapped := e.name("capped"), e.name("uncapped")
	config := e.providerConfig(nil) +
		namedLeaseConfig("capped", e.bucket, capped, `lease_duration = "1h"`, `max_hold = "1h30m"`) +
		namedLeaseConfig("uncapped", e.bucket, uncapped) + fmt.Sprintf(`
data "s3lock_lease" "capped" {
  bucket     = %q
  name       = %q
  depends_on = [s3lock_lease.capped]
}
`, e.bucket, capped)
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			Check: tfresource.ComposeTestCheckFunc(
				checkLeaseMatchesStore(t, e, "s3lock_lease.capped", capped, func(st s3lock.State) error {
					if got := st.HeldUntilAtMost.Sub(st.AcquiredAt); got != 90*time.Minute {
						return fmt.Errorf("the store's lease is held until at most %v, acquired at %v: %v later; want 1h30m",
							st.HeldUntilAtMost, st.AcquiredAt, got)
					}
					return nil
				}),
				checkCapShown(t, e, "s3lock_lease.capped", capped),
				checkCapShown(t, e, "data.s3lock_lease.capped", capped),
			),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("s3lock_lease.uncapped", tfjsonpath.New("held_until_at_most"), knownvalue.Null()),
				statecheck.ExpectKnownValue("s3lock_lease.uncapped", tfjsonpath.New("max_hold"), knownvalue.Null()),
			},
		}, {
			// A refresh keeps the cap, and plans nothing.
			Config:   config,
			PlanOnly: true,
		}},
	})
}

// checkCapShown checks that addr's held_until_at_most is the cap of the
// lock's lease as the store has it (to the second: RFC 3339).
func checkCapShown(t *testing.T, e *accEnv, addr, name string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		st := e.current(t, name)
		got, err := stateAttr(s, addr, "held_until_at_most")
		if err != nil {
			return err
		}
		if want := formatTime(st.HeldUntilAtMost); want == "" || got != want {
			return fmt.Errorf("%s.held_until_at_most = %q; the store's lease is held until at most %q", addr, got, want)
		}
		return nil
	}
}

// TestAccLeaseEphemeral_LostAtMaxHold: a lease whose cap passes while the
// run still needs it is reported lost with the cap's diagnostic (it reached
// its max_hold of 4s; raise max_hold), and the lock is released rather than
// left to lapse.
func TestAccLeaseEphemeral_LostAtMaxHold(t *testing.T) {
	e := newAccEnv(t)
	run, blocked := e.name("run"), e.name("blocked")
	config := e.providerConfig(nil) +
		ephemeralLeaseConfig(e.bucket, run, perPhase, `lease_duration = "2s"`, `max_hold = "4s"`) + fmt.Sprintf(`
resource "s3lock_lease" "blocked" {
  bucket     = %q
  name       = %q
  depends_on = [ephemeral.s3lock_lease.run]

  timeouts {
    create = "2m"
  }
}
`, e.bucket, blocked)
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			// Someone else holds "blocked" until the apply's lease of
			// "run" is past its cap: the apply outlives its max_hold.
			PreConfig: func() { holdUntilCapPassed(t, e, blocked, run) },
			Config:    config,
			ExpectError: matchError("Lease reached its max_hold", `Lock "`+run+`" in bucket "`+e.bucket+`"`,
				"maximum hold of 4s", "reached its max_hold of 4s", "work under it must have stopped", "raise max_hold"),
		}},
	})
	st := e.current(t, run)
	if st.Held || !st.Released {
		t.Errorf("after its cap, the run's lock is %+v; want it released, not left to lapse", st)
	}
	if got := st.HeldUntilAtMost.Sub(st.AcquiredAt); got != 4*time.Second {
		t.Errorf("the run's lease was held until at most %v after its acquisition; want 4s", got)
	}
}

// TestAccLeaseEphemeral_WholeRunLostAtMaxHold: a run that outlives the
// max_hold of its whole-run lease is interrupted by the run's guard, which
// says that the lease reached its max_hold and to raise it, and releases the
// lock at once.
func TestAccLeaseEphemeral_WholeRunLostAtMaxHold(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	if os.Getenv("S3LOCK_RUN_GUARD") == "off" {
		t.Skip("S3LOCK_RUN_GUARD=off: whole-run leases fail (TestAccMain_WholeRunUnavailable)")
	}
	run := e.name("capped-run")
	h, dir := cliWorkdir(t, e, ephemeralLeaseConfig(e.bucket, run, `lease_duration = "5s"`, `max_hold = "8s"`)+`
resource "terraform_data" "work" {
  provisioner "local-exec" {
    command = "sleep 60"
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	out, err := h.Run(ctx, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the apply that outlived its lease's max_hold: %v (context: %v); want it interrupted\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{"reached its max_hold of 8s during this run", "interrupting terraform", "raise max_hold"} {
		if !matchError(want).MatchString(out) {
			t.Errorf("the run's output lacks %q:\n%s", want, out)
		}
	}
	testkit.Eventually(t, time.Minute, run+" to be released", func() bool { return e.current(t, run).Released })
	if st := e.current(t, run); st.Epoch != 1 || st.HeldUntilAtMost.Sub(st.AcquiredAt) != 8*time.Second {
		t.Errorf("the run's lease: epoch %d, held until at most %v after its acquisition; want epoch 1 capped at 8s",
			st.Epoch, st.HeldUntilAtMost.Sub(st.AcquiredAt))
	}
}

// holdUntilCapPassed holds lock name until the lease of lock capped that
// the apply took (its second epoch: the plan took the first) is past its
// cap.
func holdUntilCapPassed(t *testing.T, e *accEnv, name, capped string) {
	t.Helper()
	l := e.hold(t, "other-team", name, time.Hour)
	observer := e.sdk(t, "observer")
	go func() {
		defer l.Release(t.Context()) //nolint:errcheck // the test checks the outcome
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			st, err := observer.Current(t.Context(), capped)
			if err == nil && st.Epoch >= 2 && !st.HeldUntilAtMost.IsZero() && time.Now().After(st.HeldUntilAtMost.Add(time.Second)) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// TestAccLease_MaxHoldValidation: a max_hold that does not outlast
// lease_duration (written, or its default) is refused at plan time naming
// both, and one that is not a duration is refused naming it; nothing is
// acquired.
func TestAccLease_MaxHoldValidation(t *testing.T) {
	e := newAccEnv(t)
	cases := []struct {
		name, block string
		want        []string
	}{
		{"resource: not longer than its lease", namedLeaseConfig("test", e.bucket, e.name("a"), `lease_duration = "1h"`, `max_hold = "60m"`),
			[]string{"max_hold not longer than lease_duration", `max_hold = "60m" must be longer than lease_duration = "1h"`, "Raise max_hold"}},
		{"resource: shorter than the default lease", namedLeaseConfig("test", e.bucket, e.name("b"), `max_hold = "30m"`),
			[]string{"max_hold not longer than lease_duration", `max_hold = "30m" must be longer than lease_duration = "1h"`}},
		{"ephemeral: shorter than the default lease", ephemeralLeaseConfig(e.bucket, e.name("c"), perPhase, `max_hold = "1m"`),
			[]string{"max_hold not longer than lease_duration", `max_hold = "1m" must be longer than lease_duration = "2m"`}},
		{"resource: not a duration", namedLeaseConfig("test", e.bucket, e.name("d"), `max_hold = "2 hours"`),
			[]string{"Invalid duration", `max_hold = "2 hours"`, "is not a duration"}},
		{"ephemeral: negative", ephemeralLeaseConfig(e.bucket, e.name("e"), perPhase, `max_hold = "-1h"`),
			[]string{"Duration out of range", `max_hold = "-1h"`, "allowed range"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				TerraformVersionChecks:   ephemeralVersions,
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(nil) + tc.block,
					PlanOnly:    true,
					ExpectError: matchError(tc.want...),
				}},
			})
		})
	}
}
