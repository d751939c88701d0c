package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestRunClaims: a lock's turn is taken by one opener at a time, another
// lock's turn is not held up by it, and a wait for a turn ends with its
// context.
func TestRunClaims(t *testing.T) {
	c := newRunClaims()
	done, err := c.take(t.Context(), "b/deploy/prod")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.take(t.Context(), "b/deploy/stage")
	if err != nil {
		t.Fatalf("another lock's turn: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.take(ctx, "b/deploy/prod"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second take of a lock whose turn is taken: %v; want it to wait until its context ends", err)
	}
	next := make(chan error, 1)
	go func() {
		d, err := c.take(t.Context(), "b/deploy/prod")
		if err == nil {
			d()
		}
		next <- err
	}()
	done()
	if err := <-next; err != nil {
		t.Fatalf("the next take after the turn ended: %v", err)
	}
}

// TestAccLeaseEphemeral_TwoBlocksOfOneLockInOneProcess: two ephemeral blocks
// of one run on the same lock, served by one provider process, share the
// run's one lease (one epoch, the plan's) under the real CLI. They used to
// wait for each other forever: the first block's claim of the lock made the
// guard hold up the second's, whose request held the process's one line to
// the guard, which the first block's adoption then waited for.
func TestAccLeaseEphemeral_TwoBlocksOfOneLockInOneProcess(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, ephemeralFeature)
	if os.Getenv("S3LOCK_RUN_GUARD") == "off" {
		t.Skip("S3LOCK_RUN_GUARD=off: whole-run leases fail (TestAccMain_WholeRunUnavailable)")
	}
	name := e.name("deploy/prod")
	second := strings.ReplaceAll(ephemeralLeaseConfig(e.bucket, name), `"run"`, `"second"`) + `
resource "terraform_data" "second" {
  depends_on = [ephemeral.s3lock_lease.second]
}
`
	h, dir := cliWorkdir(t, e, seenConfig(e.bucket, name)+second)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := h.Run(ctx, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v (a deadline: the blocks waited for each other)\n%s", err, out)
	}
	if seen := readSeen(t, dir); seen.epoch != "1" || seen.key != (s3lock.Token{Name: name, Epoch: 1}).Key() {
		t.Errorf("the run's lease was epoch %s (%s); want epoch 1, the plan's, for both blocks and phases", seen.epoch, seen.key)
	}
	testkit.Eventually(t, time.Minute, "the run's lease to be released", func() bool { st := e.current(t, name); return st.Released })
	if st := e.current(t, name); st.Epoch != 1 {
		t.Errorf("the lock is at epoch %d after the run; want 1: one lease for the run's blocks and phases", st.Epoch)
	}
}

// TestAccLeaseEphemeral_WholeRunNeedsTerraform: a provider that terraform did
// not start — here one the test serves in its own process, as a debugger
// serves it — cannot tell which run it serves, so it cannot hold a lease for
// the whole run. A lease that asks for one (the default) fails before it
// takes the lock, saying why and what to do; it never falls back to a lease
// per phase by itself.
func TestAccLeaseEphemeral_WholeRunNeedsTerraform(t *testing.T) {
	e := newAccEnv(t)
	run := e.name("deploy/prod")
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: e.providerConfig(nil) + ephemeralLeaseConfig(e.bucket, run) + `
resource "terraform_data" "work" {
  depends_on = [ephemeral.s3lock_lease.run]
}
`,
			ExpectError: matchError("Cannot hold lock for the whole run", `Lock "`+run+`" in bucket "`+e.bucket+`"`,
				"not started by Terraform", "served in-process", `scope = "phase"`, "another run can take it between them"),
		}},
	})
	if st := e.current(t, run); st.Epoch != 0 {
		t.Errorf("the lock is %+v after the failed run; want it never taken", st)
	}
}

// TestWholeRunUnavailable_NamesTheWayOut: each reason a run has no guard gets
// a diagnostic that names the lock, the bucket and the reason, says what to
// do about that reason, and offers scope = "phase" with its cost. (Windows
// cannot be produced on the CI's Linux: its reason is checked here.)
func TestWholeRunUnavailable_NamesTheWayOut(t *testing.T) {
	lock := leaseRef{bucket: "locks", name: "deploy/prod"}
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{fmt.Errorf("%w: it runs in debug mode", runguard.ErrNotTerraform), "Run terraform (or tofu) as usual"},
		{fmt.Errorf("%w (S3LOCK_RUN_GUARD=off)", runguard.ErrTurnedOff), "Remove S3LOCK_RUN_GUARD"},
		{fmt.Errorf("%w: /tmp/s3lock-run-0 must be a directory of user 0", runguard.ErrDirUnusable), "Make that directory yours"},
		{fmt.Errorf("%w (this is windows)", runguard.ErrUnsupported), "s3lock run NAME -- terraform apply"},
		{errors.New("runguard: something else"), "s3lock run NAME -- terraform apply"},
	} {
		d := wholeRunUnavailable(lock, tc.cause)
		text := d.Summary() + "\n" + d.Detail()
		for _, want := range []string{"Cannot hold lock for the whole run", `Lock "deploy/prod" in bucket "locks"`,
			tc.cause.Error(), tc.want, `scope = "phase"`, phaseCost} {
			if !strings.Contains(text, want) {
				t.Errorf("for %v the diagnostic lacks %q:\n%s", tc.cause, want, text)
			}
		}
		if strings.Count(text, phaseCost) != 1 {
			t.Errorf("for %v the diagnostic says what a lease per phase costs %d times:\n%s", tc.cause, strings.Count(text, phaseCost), text)
		}
	}
}
