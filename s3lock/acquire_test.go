package s3lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestTryAcquire_HeldThenReleased: TryAcquire on a held lock reports its holder in a *HeldError, and takes the next epoch once the holder releases.
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
	if la.Token().Epoch != 1 || la.Token().Key() != ns.Name("locks/lock-0000000001.json") || la.State().Holder != "alice" {
		t.Fatalf("lease = epoch %d key %s holder %s; want epoch 1, the seed's key, alice", la.Token().Epoch, la.Token().Key(), la.State().Holder)
	}

	_, err = b.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) {
		t.Fatalf("TryAcquire on a held lock = %v; want a *HeldError", err)
	}
	if held.Holder != "alice" || held.Epoch != 1 || held.Key != la.Token().Key() || held.Bucket != ns.Bucket {
		t.Errorf("HeldError = %+v; want alice, epoch 1, %s", held, la.Token().Key())
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
	if lb.Token().Epoch != 2 {
		t.Errorf("epoch after handover = %d; want 2", lb.Token().Epoch)
	}
}

// TestEpochAtMaximum: a lock whose newest epoch is the largest possible fails TryAcquire and Acquire with ErrEpochExhausted at once.
func TestEpochAtMaximum(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	name := ns.Name("full")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: s3lock.MaxEpoch}.Key(), s3lock.EncodeReleasedForTest("old", s3lock.MaxEpoch, time.Minute))
	_, err := c.TryAcquire(t.Context(), name)
	if !errors.Is(err, s3lock.ErrEpochExhausted) || !strings.Contains(err.Error(), "9999999999") {
		t.Fatalf("TryAcquire at the maximum epoch = %v; want ErrEpochExhausted", err)
	}
	if _, err := c.Acquire(t.Context(), name); !errors.Is(err, s3lock.ErrEpochExhausted) {
		t.Fatalf("Acquire at the maximum epoch = %v; want ErrEpochExhausted at once", err)
	}
}

// TestForeignKeysAreIgnored: keys under a lock's prefix that are not epoch
// objects neither break acquisition nor count as epochs.
func TestForeignKeysAreIgnored(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	name := ns.Name("mixed")
	for _, k := range []string{
		name + "/README.txt",
		name + "/lock-abc.json",
		name + "/lock-00000000001.json", // eleven digits
		name + "/lock-0000000000.json",  // epoch 0
		name + "/lock-0000000009.json.bak",
		name + "/lock-00000000x9.json",
	} {
		putRaw(t, ns, k, []byte("not a lease"))
	}
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire among foreign keys: %v", err)
	}
	mustRelease(t, l)
	if l.Token().Epoch != 1 {
		t.Errorf("epoch = %d; want 1", l.Token().Epoch)
	}
	states, err := c.List(t.Context(), ns.Name(""))
	if err != nil || len(states) != 1 || states[0].Name != name {
		t.Errorf("List = %+v, %v; want only %s", states, err, name)
	}
}
