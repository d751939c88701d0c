package s3lock_test

import (
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestCurrent_States: Current reads a lock through each of its phases:
// free, held, released, lapsed.
func TestCurrent_States(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "alice", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)})
	name := ns.Name("state")

	st, err := c.Current(t.Context(), name)
	if err != nil || st.Epoch != 0 || st.Held || st.Released || st.Phase() != s3lock.PhaseFree {
		t.Fatalf("Current of a lock that never existed = %+v, %v; want the zero state, free", st, err)
	}

	l, err := c.TryAcquire(t.Context(), name, s3lock.WithMetadata(map[string]string{"k": "v"}))
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Current(t.Context(), name)
	if err != nil || !st.Held || st.Released || st.Epoch != 1 || st.Holder != "alice" || st.Metadata["k"] != "v" ||
		st.LeaseDuration != 2*time.Second || st.ExpiresAt.IsZero() || st.Phase() != s3lock.PhaseHeld {
		t.Fatalf("Current of a held lock = %+v, %v", st, err)
	}
	if st.TrustedUntil.IsZero() || st.TrustedUntil.After(l.State().ExpiresAt) || !st.TrustedUntil.Before(st.ExpiresAt) {
		t.Errorf("TrustedUntil = %v; want no later than the holder's deadline %v, before the lock frees at %v",
			st.TrustedUntil, l.State().ExpiresAt, st.ExpiresAt)
	}

	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err = c.Current(t.Context(), name)
	if err != nil || st.Held || !st.Released || st.Epoch != 1 || st.ReleasedAt.IsZero() || st.Phase() != s3lock.PhaseReleased {
		t.Fatalf("Current of a released lock = %+v, %v", st, err)
	}

	l2, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	l2.Detach() // the holder vanishes without releasing
	testkit.Eventually(t, waitLimit, "the lease to lapse", func() bool {
		st, err = c.Current(t.Context(), name)
		return err == nil && !st.Held
	})
	if st.Released || st.Epoch != 2 || st.Phase() != s3lock.PhaseLapsed || !st.TrustedUntil.IsZero() {
		t.Fatalf("Current of a lapsed lock = %+v; want epoch 2, neither held nor released", st)
	}
}

// TestList: List returns the locks under a prefix, in key order, each with its state.
func TestList(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "lister", nil)
	held := []string{ns.Name("team/a"), ns.Name("team/b/c")}
	for _, n := range held {
		l, err := c.TryAcquire(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		mustRelease(t, l)
	}
	l, err := c.TryAcquire(t.Context(), ns.Name("other/x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	states, err := c.List(t.Context(), ns.Name("team/"))
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || states[0].Name != held[0] || states[1].Name != held[1] || !states[0].Held || !states[1].Held {
		t.Fatalf("List(team/) = %+v; want %v, both held", states, held)
	}
	all, err := c.List(t.Context(), ns.Name(""))
	if err != nil || len(all) != 3 || all[1].Name != ns.Name("team/a") || all[0].Released != true {
		t.Fatalf("List() = %+v, %v; want 3 locks, other/x released", all, err)
	}
}
