package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestAccLeaseEphemeral_Slots: with slots, the ephemeral lease takes a free
// slot of the lock (here the one slot someone else does not hold) and
// releases it when the run ends; one that asks for another number of slots
// fails at once with the mismatch diagnostic, and one that finds all slots
// held waits and fails saying so. (The in-process provider of these tests
// takes the lock per phase.)
func TestAccLeaseEphemeral_Slots(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("ci/runners")
	other := e.hold(t, "other-team", name, time.Hour, s3lock.WithSlots(2))
	free := 3 - other.Token().Slot
	var second *s3lock.Lease
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
				Config: config("slots = 2"),
				ConfigStateChecks: []statecheck.StateCheck{
					checkEchoedLease(func(l echoedLease) error {
						epoch, err := l.Epoch.Int64()
						if err != nil {
							return err
						}
						if l.Slots != "2" || string(l.Slot) != strconv.Itoa(free) || l.Key != (s3lock.Token{Name: name, Slot: free, Epoch: uint64(epoch)}).Key() ||
							l.Holder != "terraform-test" {
							return fmt.Errorf("ephemeral result %+v; want slot %d of 2", l, free)
						}
						// The run released its slot as it ended; other-team's
						// is untouched.
						_, err = e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: name, Slot: free, Epoch: uint64(epoch)})
						if !leaseReleased(err) {
							return fmt.Errorf("after the run, slot %d at epoch %d: %w; want it released", free, epoch, err)
						}
						return other.Renew(t.Context())
					}),
				},
			},
			{
				Config:   config("slots = 3"),
				PlanOnly: true,
				ExpectError: matchError("Lock admits another number of holders",
					fmt.Sprintf(`Lock %q in bucket %q admits 2 holders, but this lease asks for slots = 3`, name, e.bucket),
					"set slots = 2"),
			},
			{
				Config:   config(),
				PlanOnly: true,
				ExpectError: matchError("Lock admits another number of holders", "admits 2 holders",
					`asks for a mutex \(slots = 1, the default\)`),
			},
			{
				PreConfig: func() { second = e.hold(t, "other-team-2", name, time.Hour, s3lock.WithSlots(2)) },
				Config:    config("slots = 2", `wait_timeout = "2s"`),
				PlanOnly:  true,
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf(`all 2 slots of lock %q`, name),
					"All slots of the lock are held by others"),
			},
			{
				// A slot frees: the run takes it (and the test's destroy
				// can run).
				PreConfig: func() {
					if err := second.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
				},
				Config: config("slots = 2"),
			},
		},
	})
}

// ephemeralFeature is what the tests that run the real CLI with ephemeral
// leases need.
var ephemeralFeature = tfharness.Feature{Name: "ephemeral resources", Terraform: "1.10.0", OpenTofu: "1.11.0"}

// seenConfig is an ephemeral lease on name with extra arguments, and a
// resource whose provisioner writes what it sees of the lease, and of the
// s3lock run it may run under, to the file seen in the working directory.
func seenConfig(bucket, name string, extra ...string) string {
	return ephemeralLeaseConfig(bucket, name, extra...) + `
resource "terraform_data" "work" {
  provisioner "local-exec" {
    command = "printf '%s %s %s %s %s %s' \"$SLOT\" \"$EPOCH\" \"$KEY\" \"$S3LOCK_SLOT\" \"$S3LOCK_EPOCH\" \"$S3LOCK_KEY\" > seen && sleep 3"
    environment = {
      SLOT  = ephemeral.s3lock_lease.run.slot
      EPOCH = ephemeral.s3lock_lease.run.epoch
      KEY   = ephemeral.s3lock_lease.run.key
    }
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`
}

// seenLease is what seenConfig's provisioner saw: the ephemeral lease's
// slot, epoch and key, and S3LOCK_SLOT, S3LOCK_EPOCH and S3LOCK_KEY.
type seenLease struct {
	slot, epoch, key       string
	runSlot, runEpoch, run string
}

func readSeen(t *testing.T, dir string) seenLease {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "seen"))
	if err != nil {
		t.Fatalf("the provisioner under the lease did not run: %v", err)
	}
	f := strings.Split(string(b), " ")
	if len(f) != 6 {
		t.Fatalf("the provisioner saw %q", b)
	}
	return seenLease{slot: f[0], epoch: f[1], key: f[2], runSlot: f[3], runEpoch: f[4], run: f[5]}
}

// slotEpochs lists the epoch objects of every slot of name.
func (e *accEnv) slotEpochs(t *testing.T, name string) []string {
	t.Helper()
	return e.keysUnder(t, name+"/"+slotIDSegment+"/")
}

// TestAccLeaseEphemeral_SlotsForTheWholeRun: the real provider binary under
// the real CLI holds a slot lease for the whole run: the plan takes a slot,
// hands it to the run's guard by its token (which carries the slot), the
// apply uses the same slot and epoch, the guard renews it and releases it
// as terraform exits. Two blocks of one run that ask for different slots
// fail with the mismatch diagnostic. (Linux; elsewhere the provider takes
// the lock per phase, and the test skips.)
func TestAccLeaseEphemeral_SlotsForTheWholeRun(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	if os.Getenv("S3LOCK_RUN_GUARD") == "off" {
		t.Skip("S3LOCK_RUN_GUARD=off: whole-run leases fail (TestAccMain_WholeRunUnavailable)")
	}
	name := e.name("ci/runners")
	other := e.hold(t, "other-team", name, time.Hour, s3lock.WithSlots(2))
	free := 3 - other.Token().Slot
	h, dir := cliWorkdir(t, e, seenConfig(e.bucket, name, "slots = 2", `lease_duration = "6s"`))
	out, err := h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := readSeen(t, dir)
	if seen.slot != strconv.Itoa(free) || seen.epoch != "1" || seen.key != (s3lock.Token{Name: name, Slot: free, Epoch: 1}).Key() {
		t.Fatalf("the apply's lease is slot %s at epoch %s (%s); want slot %d at epoch 1, the plan's\n%s",
			seen.slot, seen.epoch, seen.key, free, out)
	}
	// One run, one lease: the slot's one epoch, renewed by the guard and
	// released as terraform exited.
	var st s3lock.State
	testkit.Eventually(t, time.Minute, "the run's slot to be released", func() bool {
		_, err := e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: name, Slot: free, Epoch: 1})
		return leaseReleased(err)
	})
	if keys := e.slotEpochs(t, name); len(keys) != 2 {
		t.Errorf("the slots have the epochs %v; want other-team's and the run's one epoch", keys)
	}
	st = e.current(t, name)
	if len(st.Holders) != 1 || st.Holders[0].Slot != other.Token().Slot {
		t.Errorf("after the run, the lock's holders are %+v; want other-team's only", st.Holders)
	}
	if err := other.Renew(t.Context()); err != nil {
		t.Errorf("other-team's slot was disturbed: %v", err)
	}

	// Two blocks of one run on the same lock share the run's lease, so they
	// must ask for the same number of slots.
	second := strings.ReplaceAll(ephemeralLeaseConfig(e.bucket, name, "slots = 3"), `"run"`, `"second"`)
	writeWorkFile(t, dir, "second.tf", second+`
resource "terraform_data" "second" {
  depends_on = [ephemeral.s3lock_lease.second]
}
`)
	out, err = h.Run(t.Context(), dir, "plan", "-input=false", "-no-color")
	if err == nil {
		t.Fatalf("a run with two blocks asking for 2 and 3 slots of one lock planned:\n%s", out)
	}
	// Whichever block opens first takes the lock; the other is refused,
	// by the marker or by the run's lease.
	if !strings.Contains(out, "This run holds it already") {
		wantOutput(t, "two blocks, two numbers of slots", out, "Error: Lock admits another number of holders",
			"with ephemeral.s3lock_lease.second", "admits 2 holders, but this lease asks for slots = 3", "Its marker")
	} else {
		wantOutput(t, "two blocks, two numbers of slots", out, "Error: Lock admits another number of holders",
			"admits 2 holders, but this lease asks for slots = 3", "This run holds it already",
			"through another ephemeral s3lock_lease block on the same lock")
	}
}

// s3lockRun builds the s3lock CLI once per test and returns a command that
// runs `s3lock run` with args under the harness's environment, on the env's
// store.
func s3lockRun(t *testing.T, e *accEnv, h *tfharness.Harness) func(ctx context.Context, dir string, args ...string) *exec.Cmd {
	t.Helper()
	if !e.ns.Target.Local {
		t.Skip("needs the local server (static credentials for terraform and the CLI)")
	}
	cli := filepath.Join(t.TempDir(), "s3lock")
	if err := tfharness.Build(t.Context(), h.RepoRoot, "./cmd/s3lock", cli); err != nil {
		t.Fatal(err)
	}
	tg := e.ns.Target
	return func(ctx context.Context, dir string, args ...string) *exec.Cmd {
		cmd := h.Command(ctx, dir)
		cmd.Path, cmd.Args = cli, append([]string{cli, "run"}, args...)
		cmd.Env = append(cmd.Env, "S3LOCK_BUCKET="+e.bucket, "S3LOCK_ENDPOINT="+tg.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
			"AWS_ACCESS_KEY_ID="+tg.AccessKey, "AWS_SECRET_ACCESS_KEY="+tg.SecretKey, "AWS_REGION="+tg.Region,
			"AWS_EC2_METADATA_DISABLED=true")
		return cmd
	}
}

// TestAccLeaseEphemeral_UnderS3lockRunSlots: under `s3lock run --slots 3`,
// an ephemeral lease with slots = 3 on the same lock is the CLI's slot lease
// (S3LOCK_SLOT, S3LOCK_EPOCH, S3LOCK_KEY, checked against the store): the
// provider takes no slot of its own. One with another number of slots fails
// with the mismatch diagnostic, and so does one with slots under an
// `s3lock run` of the lock as a mutex, whose lease an ephemeral mutex lease
// still uses.
func TestAccLeaseEphemeral_UnderS3lockRunSlots(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	name, mutex := e.name("ci/runners"), e.name("deploy/prod")
	other := e.hold(t, "other-team", name, time.Hour, s3lock.WithSlots(3))
	h, dir := cliWorkdir(t, e, "")
	run := s3lockRun(t, e, h)
	apply := func(t *testing.T, config string, runArgs ...string) (string, error) {
		t.Helper()
		writeWorkFile(t, dir, "lease.tf", config)
		// A fresh state, so that the provisioner runs again.
		for _, f := range []string{"seen", "terraform.tfstate"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		args := append(append([]string{"--holder", "ci-job", "--wait", "1m"}, runArgs...),
			"--", h.Terraform, "apply", "-auto-approve", "-input=false", "-no-color")
		b, err := run(t.Context(), dir, args...).CombinedOutput()
		return string(b), err
	}

	t.Run("slot lease", func(t *testing.T) {
		out, err := apply(t, seenConfig(e.bucket, name, "slots = 3"), "--slots", "3", name)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		seen := readSeen(t, dir)
		if seen.runSlot == "0" || seen.slot != seen.runSlot || seen.epoch != seen.runEpoch || seen.key != seen.run ||
			seen.runSlot == strconv.Itoa(other.Token().Slot) {
			t.Fatalf("the ephemeral lease is slot %s at epoch %s (%s), s3lock run's is slot %s at epoch %s (%s)\n%s",
				seen.slot, seen.epoch, seen.key, seen.runSlot, seen.runEpoch, seen.run, out)
		}
		if keys := e.slotEpochs(t, name); len(keys) != 2 {
			t.Errorf("the slots have the epochs %v; want other-team's and s3lock run's only", keys)
		}
		if st := e.current(t, name); len(st.Holders) != 1 || st.Holders[0].Holder != "other-team" {
			t.Errorf("after s3lock run, the lock's holders are %+v; want other-team's only", st.Holders)
		}
	})
	t.Run("other number of slots", func(t *testing.T) {
		out, err := apply(t, seenConfig(e.bucket, name, "slots = 2"), "--slots", "3", name)
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("s3lock run: %v, want terraform's failure\n%s", err, out)
		}
		wantOutput(t, "slots = 2 under s3lock run --slots 3", out, "Lock admits another number of holders",
			fmt.Sprintf(`Lock %q in bucket %q admits 3 holders, but this lease asks for slots = 2`, name, e.bucket),
			"This run runs under `s3lock run --slots 3`", "S3LOCK_SLOTS", "set slots = 3")
	})
	t.Run("mutex lease", func(t *testing.T) {
		out, err := apply(t, seenConfig(e.bucket, mutex), mutex)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		seen := readSeen(t, dir)
		if seen.slot != "0" || seen.runSlot != "0" || seen.epoch != seen.runEpoch || seen.key != (s3lock.Token{Name: mutex, Epoch: 1}).Key() ||
			seen.key != seen.run {
			t.Fatalf("the ephemeral lease is slot %s at epoch %s (%s), s3lock run's is slot %s at epoch %s (%s)\n%s",
				seen.slot, seen.epoch, seen.key, seen.runSlot, seen.runEpoch, seen.run, out)
		}
		if st := e.current(t, mutex); st.Epoch != 1 || !st.Released {
			t.Errorf("after s3lock run, the mutex is %s at epoch %d; want its one epoch released", st.Phase(), st.Epoch)
		}
	})
	t.Run("a malformed environment", func(t *testing.T) {
		// Something between s3lock run and terraform rewrites S3LOCK_KEY:
		// the provider must say so at once, not take the lock anew and
		// wait for the run's own lease.
		bogus := runenv.Key + "=" + (s3lock.Token{Name: mutex, Epoch: 99}).Key()
		writeWorkFile(t, dir, "lease.tf", seenConfig(e.bucket, mutex))
		for _, f := range []string{"seen", "terraform.tfstate"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		out, err := run(t.Context(), dir, "--holder", "ci-job", "--wait", "1m", mutex, "--",
			"env", bogus, h.Terraform, "apply", "-auto-approve", "-input=false", "-no-color").CombinedOutput()
		if err == nil {
			t.Fatalf("an apply under a malformed s3lock run environment succeeded:\n%s", out)
		}
		wantOutput(t, "a malformed environment", string(out), "Cannot use the lease of s3lock run", runenv.Key,
			"is not the key of the epoch")
	})
	t.Run("slots under a mutex run", func(t *testing.T) {
		out, err := apply(t, seenConfig(e.bucket, mutex, "slots = 2"), mutex)
		if err == nil {
			t.Fatalf("slots = 2 under s3lock run of a mutex applied:\n%s", out)
		}
		wantOutput(t, "slots = 2 under s3lock run of a mutex", out, "Lock admits another number of holders",
			"admits one holder", "This run runs under `s3lock run`, which holds it as a mutex", "set slots = 1")
	})
}
