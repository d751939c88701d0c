package tfstate_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Plans (Terraform's OperationTypePlan) lock a state shared; every other
// operation locks it alone (PROTOCOL.md §15).

// planLock is a plan's Lock of ws.
func planLock(t *testing.T, s *tfstate.Store, ws string) string {
	t.Helper()
	id, err := s.Lock(t.Context(), ws, tfstate.OperationPlan)
	if err != nil {
		t.Fatalf("plan's Lock(%s): %v", ws, err)
	}
	return id
}

// current is the default workspace's state lock as the SDK sees it.
func current(t *testing.T, ns *s3test.Namespace, s *tfstate.Store) s3lock.State {
	t.Helper()
	c, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Current(t.Context(), s.LockName(tfstate.DefaultWorkspace))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// epochOf is the epoch of a lock ID (a plan's, EPOCH.SHARE, or an exclusive
// lock's).
func epochOf(t *testing.T, id string) uint64 {
	t.Helper()
	epoch, _, err := tfstate.ParseLockID(id)
	if err != nil {
		t.Fatal(err)
	}
	return epoch
}

// TestStore_PlansShareAndApplyExcludes: two plans hold the lock at once
// under lock IDs of their own, and write nothing (no seal, no lock file; a
// write under a plan's lock is refused before any request); an apply waits
// for both — the unlock of one leaves the other held — and then locks under
// a greater epoch and writes.
func TestStore_PlansShareAndApplyExcludes(t *testing.T) {
	ns := s3test.New(t)
	cfg := tfstate.Config{LockFile: true, Order: s3lock.OrderFIFO}
	first := newStore(t, ns, "first-apply", nil, cfg)
	id := lock(t, first, "default")
	if err := first.Write(t.Context(), "default", stateJSON("1")); err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	key := first.Key("default")
	before := object(t, ns, key)

	plan1 := newStore(t, ns, "plan-1", nil, cfg)
	plan2 := newStore(t, ns, "plan-2", nil, cfg)
	id1, id2 := planLock(t, plan1, "default"), planLock(t, plan2, "default")
	if id1 == id2 || epochOf(t, id1) != epochOf(t, id2) || !strings.Contains(id1, ".") {
		t.Fatalf("the plans' lock IDs are %q and %q; want two IDs EPOCH.SHARE of one shared epoch", id1, id2)
	}
	if st := current(t, ns, plan1); !st.Shared || len(st.Holders) != 2 {
		t.Fatalf("the lock while two plans hold it: shared %v, %d holders; want it shared by both", st.Shared, len(st.Holders))
	}
	if got, err := plan1.Read(t.Context(), "default"); err != nil || !bytes.Equal(got, stateJSON("1")) {
		t.Errorf("a plan's read: %q, %v; want the state", got, err)
	}
	if !bytes.Equal(object(t, ns, key), before) || exists(t, ns, plan1.LockFileKey("default")) {
		t.Fatal("a plan's lock wrote: the state object changed (a seal), or the S3 backend's lock file was taken")
	}

	for name, write := range map[string]func() error{
		"Write":      func() error { return plan1.Write(t.Context(), "default", stateJSON("99")) },
		"WriteUnder": func() error { return plan2.WriteUnder(t.Context(), "default", id2, stateJSON("99")) },
	} {
		if err := write(); !errors.Is(err, tfstate.ErrSharedLock) {
			t.Errorf("%s under a plan's lock: %v; want ErrSharedLock", name, err)
		}
	}
	if !bytes.Equal(object(t, ns, key), before) {
		t.Fatal("a write under a plan's lock landed")
	}
	if err := plan1.Write(t.Context(), "dev", stateJSON("1")); err != nil { // without a lock, as workspace new writes
		t.Fatal(err)
	}
	devID := planLock(t, plan1, "dev")
	if err := plan1.Delete(t.Context(), "dev"); !errors.Is(err, tfstate.ErrSharedLock) || !exists(t, ns, plan1.Key("dev")) {
		t.Errorf("Delete of a workspace under a plan's lock: %v; want ErrSharedLock, and the state kept", err)
	}
	if err := plan1.Unlock(t.Context(), "dev", devID); err != nil {
		t.Fatal(err)
	}

	apply := newStore(t, ns, "apply", nil, tfstate.Config{LockFile: true, Order: s3lock.OrderFIFO, Wait: time.Minute})
	got := make(chan string, 1)
	failed := make(chan error, 1)
	go func() {
		id, err := apply.Lock(t.Context(), "default", "OperationTypeApply")
		if err != nil {
			failed <- err
			return
		}
		got <- id
	}()
	testkit.Eventually(t, 30*time.Second, "the apply to wait for the plans (a pending epoch)", func() bool {
		return current(t, ns, apply).Pending
	})
	if err := plan1.Unlock(t.Context(), "default", id1); err != nil {
		t.Fatal(err)
	}
	st := current(t, ns, apply)
	if len(st.Holders) != 1 || tfstate.ShareLockID(st.Holders[0].Epoch, st.Holders[0].Share) != id2 {
		t.Fatalf("after one plan's unlock the lock's shared holders are %+v; want the other plan's (lock ID %s)", st.Holders, id2)
	}
	select {
	case id := <-got:
		t.Fatalf("the apply locked (lock ID %s) while plan 2 holds the state", id)
	case err := <-failed:
		t.Fatalf("the apply's Lock: %v", err)
	default:
	}
	if err := plan2.Unlock(t.Context(), "default", id2); err != nil {
		t.Fatal(err)
	}
	var applyID string
	select {
	case applyID = <-got:
	case err := <-failed:
		t.Fatalf("the apply's Lock once the plans unlocked: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the apply did not lock within a minute of the plans' unlocks")
	}
	if epochOf(t, applyID) <= epochOf(t, id2) {
		t.Errorf("the apply's lock ID %s; want an epoch above the plans' (%s)", applyID, id2)
	}
	if err := apply.Write(t.Context(), "default", stateJSON("2")); err != nil {
		t.Fatalf("the apply's write: %v", err)
	}
	if !exists(t, ns, apply.LockFileKey("default")) {
		t.Error("the apply's lock does not hold the S3 backend's lock file")
	}
	if err := apply.Unlock(t.Context(), "default", applyID); err != nil {
		t.Fatal(err)
	}
}

// TestStore_APlanFindsAnApplyThatWaitsForPlans: a plan that comes while an
// apply waits for the plans before it does not join them; what it is told
// names the apply and says that it waits for plans.
func TestStore_APlanFindsAnApplyThatWaitsForPlans(t *testing.T) {
	ns := s3test.New(t)
	plan1 := newStore(t, ns, "plan-1", nil, tfstate.Config{})
	id1 := planLock(t, plan1, "default")
	apply := newStore(t, ns, "apply", nil, tfstate.Config{Wait: time.Minute, Who: "alice@laptop"})
	done := make(chan error, 1)
	go func() {
		id, err := apply.Lock(t.Context(), "default", "OperationTypeApply")
		if err == nil {
			err = apply.Unlock(t.Context(), "default", id)
		}
		done <- err
	}()
	testkit.Eventually(t, 30*time.Second, "the apply to wait for the plan", func() bool {
		return current(t, ns, apply).Pending
	})
	plan2 := newStore(t, ns, "plan-2", nil, tfstate.Config{})
	_, err := plan2.Lock(t.Context(), "default", tfstate.OperationPlan)
	var held *s3lock.HeldError
	if !errors.As(err, &held) || !held.Pending || held.Holder != "apply" {
		t.Fatalf("a plan's Lock while an apply waits for plans: %v; want a *s3lock.HeldError naming the pending apply", err)
	}
	info := tfstate.HolderInfo(held, apply.Key("default"))
	if info.ID != tfstate.LockID(held.Epoch) || info.Operation != "OperationTypeApply" || info.Who != "alice@laptop" ||
		!strings.Contains(info.Info, "waits for the plans") {
		t.Errorf("the lock info a plan is shown: %+v; want the apply's, saying that it waits for the plans", info)
	}
	if err := plan1.Unlock(t.Context(), "default", id1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the apply, once the plan unlocked: %v", err)
	}
}

// TestStore_ForceUnlockOfAPlanTakesItsShareOnly: force-unlock of a plan's
// lock ID ends that plan's lock only; the plain epoch of a lock plans hold
// is refused, and the refusal lists the plans' lock IDs.
func TestStore_ForceUnlockOfAPlanTakesItsShareOnly(t *testing.T) {
	ns := s3test.New(t)
	plan1 := newStore(t, ns, "plan-1", nil, tfstate.Config{})
	plan2 := newStore(t, ns, "plan-2", nil, tfstate.Config{})
	operator := newStore(t, ns, "operator", nil, tfstate.Config{})
	id1, id2 := planLock(t, plan1, "default"), planLock(t, plan2, "default")
	epoch := tfstate.LockID(epochOf(t, id1))
	err := operator.Unlock(t.Context(), "default", epoch)
	var se *tfstate.SharedEpochError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), id1) || !strings.Contains(err.Error(), id2) {
		t.Fatalf("force-unlock of the shared epoch %s: %v; want a *tfstate.SharedEpochError listing %s and %s", epoch, err, id1, id2)
	}
	if len(current(t, ns, operator).Holders) != 2 {
		t.Fatal("a refused force-unlock ended a plan's lock")
	}
	if err := operator.Unlock(t.Context(), "default", id1); err != nil {
		t.Fatalf("force-unlock of plan 1's lock ID %s: %v", id1, err)
	}
	st := current(t, ns, operator)
	if len(st.Holders) != 1 || st.Holders[0].Holder != "plan-2" {
		t.Fatalf("after plan 1's force-unlock the holders are %+v; want plan 2 alone", st.Holders)
	}
	if err := operator.Unlock(t.Context(), "default", id1); err != nil {
		t.Errorf("force-unlock of plan 1's lock ID again (its share is force-released already): %v; want nothing to do", err)
	}
	if err := plan2.Unlock(t.Context(), "default", id2); err != nil {
		t.Fatal(err)
	}
	var nc *tfstate.NotCurrentError
	if err := operator.Unlock(t.Context(), "default", id2); !errors.As(err, &nc) {
		t.Errorf("force-unlock of plan 2's lock ID after its unlock (its share is gone): %v; want a *tfstate.NotCurrentError", err)
	}
}
