package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// forceReleaseConfig is an s3lock_force_release action block named label.
func forceReleaseConfig(label, bucket, name string, epoch string) string {
	return fmt.Sprintf("action \"s3lock_force_release\" %q {\n  config {\n    bucket = %q\n    name   = %q\n    epoch  = %s\n  }\n}\n",
		label, bucket, name, epoch)
}

// wantOutput checks that the CLI's output has every part of want, in order
// (white space as the CLI wraps it).
func wantOutput(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if !matchError(want...).MatchString(out) {
		t.Errorf("%s: the output does not show %q:\n%s", what, want, out)
	}
}

// TestAccForceReleaseAction_ReleasesOneEpoch: `terraform apply -invoke`
// releases the epoch a crashed holder left behind, with progress messages,
// so the next acquirer need not wait, and the holder finds out; invoked
// again on that epoch once the lock has moved on, it leaves the newer lease
// alone; an epoch that does not exist is refused (Terraform 1.14 and later).
func TestAccForceReleaseAction_ReleasesOneEpoch(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	name := e.name("deploy/prod")
	crashed := e.hold(t, "crashed-pipeline", name, time.Hour)
	// The documented example, on the test's bucket.
	h, dir := cliWorkdir(t, e, example(t, "actions/s3lock_force_release/action.tf",
		`"acme-locks"`, fmt.Sprintf("%q", e.bucket), `"deploy/prod"`, fmt.Sprintf("%q", name))+
		forceReleaseConfig("missing", e.bucket, name, "7"), tfharness.Actions)
	action := "action.s3lock_force_release.deploy_prod"

	// A plan that invokes nothing leaves the lock alone.
	if out, err := h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st := e.current(t, name); !st.Held || st.Epoch != 1 {
		t.Fatalf("an apply that invokes nothing changed the lock: %s at epoch %d", st.Phase(), st.Epoch)
	}

	// Invoked without saying which epoch, it refuses before it starts.
	out, err := h.Invoke(t.Context(), dir, action)
	if err == nil {
		t.Fatalf("the action ran without an epoch:\n%s", out)
	}
	wantOutput(t, "force-release without an epoch", out, "Missing epoch", "needs epoch, but it is null", "-var")
	if strings.Contains(out, "Action started") {
		t.Errorf("the action started without an epoch:\n%s", out)
	}
	if st := e.current(t, name); !st.Held || st.Epoch != 1 {
		t.Fatalf("the action without an epoch changed the lock: %s at epoch %d", st.Phase(), st.Epoch)
	}

	out, err = h.Invoke(t.Context(), dir, action, "-var", "stuck_epoch=1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantOutput(t, "force-release of the held epoch", out,
		"Action started: "+action,
		fmt.Sprintf(`Lock %q in bucket %q: epoch 1 is held by "crashed-pipeline"; releasing it.`, name, e.bucket),
		fmt.Sprintf(`Epoch 1 of lock %q is released: the next acquirer takes it without waiting`, name),
		"Action complete: "+action,
		"Actions: 1 invoked.")
	if st := e.current(t, name); st.Epoch != 1 || !st.Released || st.ReleasedBy != "terraform-test" {
		t.Fatalf("after the action, lock %q is %s at epoch %d, released by %q; want epoch 1 released by terraform-test",
			name, st.Phase(), st.Epoch, st.ReleasedBy)
	}
	// The holder finds out at its next renewal.
	if err := crashed.Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Errorf("the force-released holder renewed: %v; want ErrLeaseLost", err)
	}
	// The next acquirer takes the lock at once.
	next := e.hold(t, "next-pipeline", name, time.Hour)
	if next.Token().Epoch != 2 {
		t.Fatalf("the next acquirer got epoch %d, want 2", next.Token().Epoch)
	}

	// Epoch 1 again, now that the lock is at epoch 2: only epoch 1 is
	// touched.
	out, err = h.Invoke(t.Context(), dir, action, "-var", "stuck_epoch=1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantOutput(t, "force-release of an older epoch", out,
		fmt.Sprintf(`Lock %q in bucket %q is at epoch 2 \(held\), not 1: releasing epoch 1 only, epoch 2 is left alone.`, name, e.bucket),
		fmt.Sprintf(`Epoch 1 of lock %q is released; the newer epoch, 2, was left alone.`, name))
	if st := e.current(t, name); st.Epoch != 2 || !st.Held || st.Holder != "next-pipeline" {
		t.Errorf("after releasing epoch 1 again, lock %q is %s at epoch %d held by %q; want epoch 2 held by next-pipeline",
			name, st.Phase(), st.Epoch, st.Holder)
	}

	// An epoch the lock never had is refused.
	out, err = h.Invoke(t.Context(), dir, "action.s3lock_force_release.missing")
	if err == nil {
		t.Fatalf("force-release of epoch 7, which does not exist, succeeded:\n%s", out)
	}
	wantOutput(t, "force-release of a missing epoch", out, "Could not force-release lease", "no such epoch",
		fmt.Sprintf(`lock %q has no epoch 7: nothing was changed.`, name), `held by "next-pipeline" at epoch 2`,
		"s3lock status "+name)
	if st := e.current(t, name); st.Epoch != 2 || !st.Held {
		t.Errorf("after the refused release, lock %q is %s at epoch %d; want epoch 2 held", name, st.Phase(), st.Epoch)
	}
}

// TestAccForceReleaseAction_Slot: with slot, the action releases one slot
// of a slot lock and leaves its other slots alone; without slot, it refuses
// to release the lock's marker while a slot is held, saying so (Terraform
// 1.14 and later).
func TestAccForceReleaseAction_Slot(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	name := e.name("jobs/heavy")
	kept := e.hold(t, "job-a", name, time.Hour, s3lock.WithSlots(2))
	stuck := e.hold(t, "job-b", name, time.Hour, s3lock.WithSlots(2))
	config := strings.Replace(forceReleaseConfig("slot", e.bucket, name, fmt.Sprint(stuck.Token().Epoch)),
		"  }\n}", fmt.Sprintf("    slot   = %d\n  }\n}", stuck.Token().Slot), 1) +
		forceReleaseConfig("marker", e.bucket, name, "1")
	h, dir := cliWorkdir(t, e, config, tfharness.Actions)

	out, err := h.Invoke(t.Context(), dir, "action.s3lock_force_release.slot")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantOutput(t, "force-release of a slot", out,
		fmt.Sprintf(`Lock %q in bucket %q: epoch %d of slot %d is held by "job-b"; releasing it.`, name, e.bucket, stuck.Token().Epoch, stuck.Token().Slot),
		fmt.Sprintf(`Epoch %d of slot %d of lock %q is released`, stuck.Token().Epoch, stuck.Token().Slot, name))
	if err := stuck.Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Errorf("the force-released slot's holder renewed: %v; want ErrLeaseLost", err)
	}
	if err := kept.Renew(t.Context()); err != nil {
		t.Errorf("the other slot's holder could not renew: %v", err)
	}
	st := e.current(t, name)
	if len(st.Holders) != 1 || st.Holders[0].Holder != "job-a" {
		t.Errorf("after the action, the slots are held by %+v; want job-a's only", st.Holders)
	}
	// The freed slot takes a new holder at once.
	if l := e.hold(t, "job-c", name, time.Hour, s3lock.WithSlots(2)); l.Token().Slot != stuck.Token().Slot {
		t.Errorf("job-c got slot %d, want the freed slot %d", l.Token().Slot, stuck.Token().Slot)
	}

	// The lock's own epoch 1 is its marker: released only once no slot is
	// held.
	out, err = h.Invoke(t.Context(), dir, "action.s3lock_force_release.marker")
	if err == nil {
		t.Fatalf("the marker of a lock with held slots was released:\n%s", out)
	}
	wantOutput(t, "force-release of the marker", out,
		fmt.Sprintf(`Lock %q in bucket %q admits 2 holders, 2 of its slots are held, and epoch 1 is its marker, which is `+
			`released only once none of its slots is held.`, name, e.bucket),
		"Could not force-release lease", "Epoch 1 is the marker of a lock that admits several holders",
		"nothing was changed", "The lock admits 2 holders; 2 of its slots are held now", "this action with slot")
	if st := e.current(t, name); st.Slots != 2 || st.Released || len(st.Holders) != 2 {
		t.Errorf("after the refused release, the lock is %+v; want its marker and both slots held", st)
	}
}

// TestAccForceReleaseAction_Validation: bad arguments fail before anything
// is released (Terraform 1.14 and later).
func TestAccForceReleaseAction_Validation(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	cases := []struct {
		name   string
		config string
		want   []string
	}{
		{name: "epoch zero", config: forceReleaseConfig("x", e.bucket, "deploy/prod", "0"),
			want: []string{"epoch", "between 1 and 9999999999"}},
		{name: "epoch beyond the largest", config: forceReleaseConfig("x", e.bucket, "deploy/prod", "10000000000"),
			want: []string{"epoch", "between 1 and 9999999999"}},
		{name: "name escaping its prefix", config: forceReleaseConfig("x", e.bucket, "team/../other", "1"),
			want: []string{"Invalid lock name", `"team/../other"`, "escape"}},
		{name: "bad bucket", config: forceReleaseConfig("x", "Not_A_Bucket", "deploy/prod", "1"),
			want: []string{"Invalid bucket name", "Not_A_Bucket"}},
		{name: "no epoch", config: strings.Replace(forceReleaseConfig("x", e.bucket, "deploy/prod", "1"), "    epoch  = 1\n", "", 1),
			want: []string{`"epoch" is required`}},
		{name: "slot zero", config: strings.Replace(forceReleaseConfig("x", e.bucket, "deploy/prod", "1"), "  }\n}", "    slot   = 0\n  }\n}", 1),
			want: []string{"slot", "between 1 and 64"}},
	}
	h, dir := cliWorkdir(t, e, "", tfharness.Actions)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeWorkFile(t, dir, "action.tf", tc.config)
			out, err := h.Invoke(t.Context(), dir, "action.s3lock_force_release.x")
			if err == nil {
				t.Fatalf("the action ran:\n%s", out)
			}
			wantOutput(t, tc.name, out, tc.want...)
		})
	}
}
