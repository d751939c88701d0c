package s3lock_test

import (
	"errors"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestSmoke(t *testing.T) {
	ns := s3test.New(t)
	a := newLockClient(t, ns, "a", nil)
	b := newLockClient(t, ns, "b", nil)
	l, err := a.TryAcquire(t.Context(), "locks")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(l.Key(), l.Epoch(), l.ExpiresAt())
	_, err = b.TryAcquire(t.Context(), "locks")
	var held *s3lock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2, err := b.TryAcquire(t.Context(), "locks")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(l2.Key())
	st, err := a.Current(t.Context(), "locks")
	t.Logf("%+v %v", st, err)
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
