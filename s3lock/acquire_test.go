package s3lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestTryAcquire_HeldThenReleased(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a := newLockClient(t, ns, "alice", nil)
	b := newLockClient(t, ns, "bob", nil)
	name := ns.Name("locks")

	la, err := a.TryAcquire(t.Context(), name, s3lock.WithMetadata(map[string]string{"job": "migrate"}))
	if err != nil {
		t.Fatalf("first TryAcquire: %v", err)
	}
	if la.Epoch() != 1 || la.Key() != ns.Name("locks/lock-0000000001.json") || la.Holder() != "alice" {
		t.Fatalf("lease = epoch %d key %s holder %s; want epoch 1, the seed's key, alice", la.Epoch(), la.Key(), la.Holder())
	}

	_, err = b.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) {
		t.Fatalf("TryAcquire on a held lock = %v; want a *HeldError", err)
	}
	if held.Holder != "alice" || held.Epoch != 1 || held.Key != la.Key() || held.Bucket != ns.Bucket {
		t.Errorf("HeldError = %+v; want alice, epoch 1, %s", held, la.Key())
	}
	if held.ExpiresIn <= 0 || held.ExpiresIn > s3lock.DefaultLeaseDuration+3*time.Second {
		t.Errorf("HeldError.ExpiresIn = %s; want within the lease duration plus slack", held.ExpiresIn)
	}
	if held.Metadata["job"] != "migrate" {
		t.Errorf("HeldError.Metadata = %v; want the holder's metadata", held.Metadata)
	}

	if err := la.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !errors.Is(la.Err(), s3lock.ErrReleased) {
		t.Errorf("Err after Release = %v; want ErrReleased", la.Err())
	}
	select {
	case <-la.Done():
	default:
		t.Error("Done is not closed after Release")
	}
	if err := la.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v; want nil", err)
	}

	lb, err := b.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	mustRelease(t, lb)
	if lb.Epoch() != 2 {
		t.Errorf("epoch after handover = %d; want 2", lb.Epoch())
	}
}

func TestAcquire_WaitsForRelease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a := newLockClient(t, ns, "alice", nil)
	b := newLockClient(t, ns, "bob", []s3lock.Option{s3lock.WithPollInterval(20 * time.Millisecond)})
	name := ns.Name("wait")

	la, err := a.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	observed := make(chan *s3lock.HeldError, 16)
	got := make(chan *s3lock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := b.Acquire(t.Context(), name, s3lock.WithWaitObserver(func(h *s3lock.HeldError) {
			select {
			case observed <- h:
			default:
			}
		}))
		got <- l
		errc <- err
	}()
	h := <-observed // the waiter saw alice's lease before anything was released
	if h.Holder != "alice" || h.Epoch != 1 {
		t.Errorf("wait observer saw %+v; want alice at epoch 1", h)
	}
	if err := la.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if err := <-errc; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	mustRelease(t, lb)
	if lb.Epoch() != 2 {
		t.Errorf("epoch = %d; want 2", lb.Epoch())
	}
}

func TestAcquire_GivesUpWhenContextEnds(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a := newLockClient(t, ns, "alice", nil)
	b := newLockClient(t, ns, "bob", nil)
	name := ns.Name("busy")
	la, err := a.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, la)

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(ctx, name)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("Acquire with a short deadline = %v; want DeadlineExceeded wrapping ErrHeld", err)
	}
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "alice" {
		t.Errorf("last cause = %v; want alice's HeldError", err)
	}
}

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
	if st.TrustedUntil.IsZero() || st.TrustedUntil.After(l.ExpiresAt()) || !st.TrustedUntil.Before(st.ExpiresAt) {
		t.Errorf("TrustedUntil = %v; want no later than the holder's deadline %v, before the lock frees at %v",
			st.TrustedUntil, l.ExpiresAt(), st.ExpiresAt)
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
	eventually(t, "the lease to lapse", func() bool {
		st, err = c.Current(t.Context(), name)
		return err == nil && !st.Held
	})
	if st.Released || st.Epoch != 2 || st.Phase() != s3lock.PhaseLapsed || !st.TrustedUntil.IsZero() {
		t.Fatalf("Current of a lapsed lock = %+v; want epoch 2, neither held nor released", st)
	}
}

func TestRenew_ExtendsExpiry(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "alice", []s3lock.Option{s3lock.WithLeaseDuration(4 * time.Second)})
	l, err := c.TryAcquire(t.Context(), ns.Name("renew"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	before := l.ExpiresAt()
	time.Sleep(100 * time.Millisecond)
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !l.ExpiresAt().After(before) {
		t.Errorf("ExpiresAt after Renew = %v; want later than %v", l.ExpiresAt(), before)
	}
	st, err := c.Current(t.Context(), ns.Name("renew"))
	if err != nil || st.Renewals != 1 {
		t.Errorf("Current after one renewal = %+v, %v; want 1 renewal", st, err)
	}
}

func TestLease_RenewsInBackground(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "alice", []s3lock.Option{
		s3lock.WithLeaseDuration(2 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond)})
	l, err := c.TryAcquire(t.Context(), ns.Name("bg"))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	eventually(t, "three background renewals", func() bool {
		st, err := c.Current(t.Context(), ns.Name("bg"))
		return err == nil && st.Renewals >= 3
	})
	if l.Err() != nil {
		t.Fatalf("lease ended while renewing: %v", l.Err())
	}
}
