package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// ephemeralSetConfig is an ephemeral s3lock_lease named run that takes the
// lock set names, written in the order given.
func ephemeralSetConfig(bucket string, names []string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ephemeral \"s3lock_lease\" \"run\" {\n  bucket = %q\n  names  = %s\n", bucket, hclList(names))
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// seenSetConfig is an ephemeral lease of the set names and a resource whose
// provisioner writes what it sees of the lease's leases (name:epoch:key
// each, in the set's order) and of the s3lock run it may run under (its
// S3LOCK_EPOCH), to the file seen in the working directory.
func seenSetConfig(bucket string, names []string, extra ...string) string {
	return ephemeralSetConfig(bucket, names, extra...) + `
resource "terraform_data" "work" {
  provisioner "local-exec" {
    command = "printf '%s %s %s' \"$LEASES\" \"$EPOCH\" \"$S3LOCK_EPOCH\" > seen && sleep 2"
    environment = {
      LEASES = join(",", [for l in ephemeral.s3lock_lease.run.leases : "${l.name}:${l.epoch}:${l.key}"])
      EPOCH  = ephemeral.s3lock_lease.run.epoch
    }
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`
}

// readSeenSet reads what seenSetConfig's provisioner saw: the leases, the
// lease's epoch, and S3LOCK_EPOCH.
func readSeenSet(t *testing.T, dir string) (leases, epoch, runEpoch string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "seen"))
	if err != nil {
		t.Fatalf("the provisioner under the lease did not run: %v", err)
	}
	f := strings.Split(string(b), " ")
	if len(f) != 3 {
		t.Fatalf("the provisioner saw %q", b)
	}
	return f[0], f[1], f[2]
}

// wantLeases is seenSetConfig's rendering of the leases of names at epoch,
// in the order given.
func wantLeases(epoch uint64, names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s:%d:%s", n, epoch, s3lock.Token{Name: n, Epoch: epoch}.Key()))
	}
	return strings.Join(parts, ",")
}

// TestAccLeaseEphemeral_SetPerPhase: an ephemeral lease of a set, per
// phase, holds a lease of each lock while the run lasts — leases in the
// set's order, epoch and key the first's — and releases them all when it
// closes; a set that finds one of its locks held, with wait_timeout =
// "0s", is refused at once, naming the held lock, and takes nothing.
func TestAccLeaseEphemeral_SetPerPhase(t *testing.T) {
	e := newAccEnv(t)
	a, b := e.name("eset/a"), e.name("eset/b")
	config := requiredProviders("s3lock", "echo") + e.providerBlock(nil) +
		ephemeralSetConfig(e.bucket, []string{b, a}, perPhase) + `
provider "echo" {
  data = ephemeral.s3lock_lease.run
}

resource "echo" "lease" {}
`
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(echoFactories),
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{checkEchoedLease(func(l echoedLease) error {
					if len(l.Leases) != 2 || l.Leases[0].Name != a || l.Leases[1].Name != b {
						return fmt.Errorf("leases %+v; want a's and b's, in that order", l.Leases)
					}
					for _, m := range l.Leases {
						if m.Key != (s3lock.Token{Name: m.Name, Epoch: mustEpoch(m.Epoch)}.Key()) {
							return fmt.Errorf("lease %+v: key is not its epoch's", m)
						}
					}
					if l.Epoch != l.Leases[0].Epoch || l.Key != l.Leases[0].Key || l.Slot != "0" {
						return fmt.Errorf("epoch %s, key %s, slot %s; want the first lease's, slot 0", l.Epoch, l.Key, l.Slot)
					}
					// The run has ended: every epoch it took is released.
					for _, name := range []string{a, b} {
						if st := e.current(t, name); st.Held || !st.Released {
							return fmt.Errorf("lock %q after the run: %s; want released", name, st.Phase())
						}
					}
					return nil
				})},
			},
			{
				PreConfig: func() { e.hold(t, "other-team", b, time.Hour) },
				Config:    e.providerConfig(nil) + ephemeralSetConfig(e.bucket, []string{a, b}, perPhase, `wait_timeout = "0s"`),
				ExpectError: matchError("Could not acquire lock", fmt.Sprintf("Lock %q", b), "not acquired, all or none",
					"held by \"other-team\"", "what it had taken", regexp.QuoteMeta("("+a+") is released")),
			},
		},
	})
}

// mustEpoch reads an echoed epoch.
func mustEpoch(n interface{ Int64() (int64, error) }) uint64 {
	v, _ := n.Int64()
	return uint64(v)
}

// TestAccLeaseEphemeral_SetForTheWholeRun: the real provider binary under
// the real CLI holds a set for the whole run: the plan takes it, the run's
// guard holds each lease across the phases, the apply sees the same epochs,
// and the guard releases them all as terraform exits.
func TestAccLeaseEphemeral_SetForTheWholeRun(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	if os.Getenv("S3LOCK_RUN_GUARD") == "off" {
		t.Skip("S3LOCK_RUN_GUARD=off: whole-run leases fail (TestAccMain_WholeRunUnavailable)")
	}
	a, b := e.name("wset/a"), e.name("wset/b")
	h, dir := cliWorkdir(t, e, seenSetConfig(e.bucket, []string{b, a}, `lease_duration = "6s"`))
	out, err := h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if leases, epoch, _ := readSeenSet(t, dir); leases != wantLeases(1, a, b) || epoch != "1" {
		t.Fatalf("the apply saw leases %s, epoch %s; want %s, epoch 1: the plan's\n%s", leases, epoch, wantLeases(1, a, b), out)
	}
	for _, name := range []string{a, b} {
		testkit.Eventually(t, time.Minute, name+" to be released", func() bool { return e.current(t, name).Released })
		if st := e.current(t, name); st.Epoch != 1 {
			t.Errorf("lock %q is at epoch %d after the run; want 1: one lease for the run's phases", name, st.Epoch)
		}
	}
}

// TestAccLeaseEphemeral_TwoBlocksOfOneSetShareTheRunsLeases: two blocks of
// one run that take the same set, written in opposite orders, share the
// run's leases (the second block's claims find the run's leases, lock by
// lock, in the set's order): one epoch a lock, no wait for itself.
func TestAccLeaseEphemeral_TwoBlocksOfOneSetShareTheRunsLeases(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	if os.Getenv("S3LOCK_RUN_GUARD") == "off" {
		t.Skip("S3LOCK_RUN_GUARD=off: whole-run leases fail (TestAccMain_WholeRunUnavailable)")
	}
	a, b := e.name("bset/a"), e.name("bset/b")
	second := strings.ReplaceAll(ephemeralSetConfig(e.bucket, []string{a, b}), `"run"`, `"second"`) + `
resource "terraform_data" "second" {
  depends_on = [ephemeral.s3lock_lease.second]
}
`
	h, dir := cliWorkdir(t, e, seenSetConfig(e.bucket, []string{b, a})+second)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := h.Run(ctx, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v (a deadline: the blocks waited for each other)\n%s", err, out)
	}
	if leases, _, _ := readSeenSet(t, dir); leases != wantLeases(1, a, b) {
		t.Errorf("the run's leases were %s; want %s, the plan's, for both blocks and phases", leases, wantLeases(1, a, b))
	}
	for _, name := range []string{a, b} {
		testkit.Eventually(t, time.Minute, name+" to be released", func() bool { return e.current(t, name).Released })
		if st := e.current(t, name); st.Epoch != 1 {
			t.Errorf("lock %q is at epoch %d after the run; want 1: one lease for the run's blocks and phases", name, st.Epoch)
		}
	}
}

// TestAccLeaseEphemeral_SetUnderS3lockRun: under `s3lock run a b`, an
// ephemeral lease of the set {a, b} is the CLI's leases (the provider takes
// no lock: each lock keeps the run's one epoch); of {a} alone too. Under
// `s3lock run a`, a lease of {a, b} fails at once and says why: taking b
// while the run holds a could wait forever.
func TestAccLeaseEphemeral_SetUnderS3lockRun(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	a, b := e.name("rset/a"), e.name("rset/b")
	h, dir := cliWorkdir(t, e, "")
	run := s3lockRun(t, e, h)
	apply := func(t *testing.T, config string, locks ...string) (string, error) {
		t.Helper()
		writeWorkFile(t, dir, "lease.tf", config)
		for _, f := range []string{"seen", "terraform.tfstate"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		args := append(append([]string{"--holder", "ci-job", "--wait", "1m"}, locks...),
			"--", h.Terraform, "apply", "-auto-approve", "-input=false", "-no-color")
		out, err := run(t.Context(), dir, args...).CombinedOutput()
		return string(out), err
	}
	t.Run("the run's set", func(t *testing.T) {
		out, err := apply(t, seenSetConfig(e.bucket, []string{b, a}, perPhase), a, b)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if leases, epoch, runEpoch := readSeenSet(t, dir); leases != wantLeases(1, a, b) || epoch != "1" || runEpoch != "1" {
			t.Fatalf("the lease saw %s, epoch %s, S3LOCK_EPOCH %s; want the run's %s\n%s", leases, epoch, runEpoch, wantLeases(1, a, b), out)
		}
		for _, name := range []string{a, b} {
			if st := e.current(t, name); st.Epoch != 1 || !st.Released {
				t.Errorf("lock %q after s3lock run: %s at epoch %d; want the run's one epoch, released", name, st.Phase(), st.Epoch)
			}
		}
	})
	t.Run("part of the run's set", func(t *testing.T) {
		out, err := apply(t, seenSetConfig(e.bucket, []string{b}, perPhase), a, b)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if leases, _, _ := readSeenSet(t, dir); leases != wantLeases(2, b) {
			t.Fatalf("the lease saw %s; want the run's %s\n%s", leases, wantLeases(2, b), out)
		}
	})
	t.Run("a set larger than the run's", func(t *testing.T) {
		out, err := apply(t, seenSetConfig(e.bucket, []string{a, b}, perPhase), a)
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("s3lock run: %v, want terraform's failure\n%s", err, out)
		}
		wantOutput(t, "{a, b} under s3lock run a", out, "Lock set partly held by s3lock run",
			fmt.Sprintf(`which holds %q in bucket %q but not %q`, a, e.bucket, b), "could wait forever",
			fmt.Sprintf("s3lock run %s %s -- terraform", a, b))
		if st := e.current(t, b); st.Epoch != 2 || !st.Released {
			t.Errorf("lock %q after the refusal: %s at epoch %d; want the last run's epoch 2, released: not taken", b, st.Phase(), st.Epoch)
		}
	})
}

// TestInheritedSetFrom_AllOrNothingOfTheRun: a set's leases are inherited
// from `s3lock run` lock by lock; the locks its environment does not hold
// are listed, and a malformed environment naming one of them is an error
// about that lock.
func TestInheritedSetFrom_AllOrNothingOfTheRun(t *testing.T) {
	const bucket = "locks"
	env := func(vars ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(vars); i += 2 {
			m[vars[i]] = vars[i+1]
		}
		return func(k string) string { return m[k] }
	}
	key := func(name string, epoch uint64) string { return s3lock.Token{Name: name, Epoch: epoch}.Key() }
	set := func(extra ...string) func(string) string {
		return env(append([]string{runenv.Bucket, bucket, runenv.Holder, "ci",
			runenv.Name, "a", runenv.Epoch, "3", runenv.Key, key("a", 3), runenv.Locks, "2",
			runenv.Name + "_1", "a", runenv.Epoch + "_1", "3", runenv.Key + "_1", key("a", 3),
			runenv.Name + "_2", "b", runenv.Epoch + "_2", "5", runenv.Key + "_2", key("b", 5)}, extra...)...)
	}
	for _, tc := range []struct {
		what    string
		getenv  func(string) string
		names   []string
		held    string
		missing string
		bad     string
	}{
		{what: "no s3lock run", getenv: env(), names: []string{"a", "b"}, missing: "a b"},
		{what: "the run's set", getenv: set(), names: []string{"a", "b"}, held: "a:3 b:5"},
		{what: "part of the run's set", getenv: set(), names: []string{"b"}, held: "b:5"},
		{what: "more than the run's set", getenv: set(), names: []string{"a", "b", "c"}, held: "a:3 b:5", missing: "c"},
		{what: "a malformed lock of the set", getenv: set(runenv.Key+"_2", key("b", 4)), names: []string{"a", "b"}, bad: "b"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			ins, missing, bad, err := inheritedSetFrom(tc.getenv, bucket, tc.names)
			var held []string
			for _, in := range ins {
				held = append(held, fmt.Sprintf("%s:%d", in.Name, in.Epoch))
			}
			if strings.Join(held, " ") != tc.held || strings.Join(missing, " ") != tc.missing || bad != tc.bad || (err != nil) != (tc.bad != "") {
				t.Errorf("inheritedSetFrom = held %v, missing %v, bad %q, %v; want held %q, missing %q, bad %q",
					held, missing, bad, err, tc.held, tc.missing, tc.bad)
			}
		})
	}
}
