package s3lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestDo(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("do")
	c := newLockClient(t, ns, "worker", nil)
	ran := false
	err := c.Do(t.Context(), name, func(ctx context.Context, l *s3lock.Lease) error {
		ran = true
		st, err := c.Current(ctx, name)
		if err != nil || !st.Held || st.Epoch != l.Epoch() {
			t.Errorf("inside Do: state %+v, %v; want held at epoch %d", st, err, l.Epoch())
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v (ran %v)", err, ran)
	}
	st, err := c.Current(t.Context(), name)
	if err != nil || !st.Released {
		t.Fatalf("after Do: %+v, %v; want released", st, err)
	}

	boom := errors.New("boom")
	if err := c.Do(t.Context(), name, func(context.Context, *s3lock.Lease) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Do returning an error = %v; want it passed through", err)
	}
	if st, _ := c.Current(t.Context(), name); !st.Released {
		t.Error("the lock stayed held after fn failed")
	}
}

func TestDo_CancelsWhenLeaseIsLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("do-lost")
	c := newLockClient(t, ns, "worker", []s3lock.Option{
		s3lock.WithLeaseDuration(3 * time.Second), s3lock.WithRenewInterval(100 * time.Millisecond)})
	op := newLockClient(t, ns, "operator", nil)
	err := c.Do(t.Context(), name, func(ctx context.Context, l *s3lock.Lease) error {
		if err := op.ForceRelease(ctx, name, l.Epoch()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), s3lock.ErrLeaseLost) {
				t.Errorf("context cause = %v; want ErrLeaseLost", context.Cause(ctx))
			}
			return nil // the work "succeeded"; Do must still report the loss
		case <-time.After(10 * time.Second):
			return errors.New("fn's context was not cancelled after the lease was lost")
		}
	})
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Do = %v; want ErrLeaseLost", err)
	}
}

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
