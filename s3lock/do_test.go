package s3lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestDo: Do runs fn holding the lock, releases it afterwards, and passes fn's error through.
func TestDo(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("do")
	c := newLockClient(t, ns, "worker", nil)
	ran := false
	err := c.Do(t.Context(), name, func(ctx context.Context, l *s3lock.Lease) error {
		ran = true
		st, err := c.Current(ctx, name)
		if err != nil || !st.Held || st.Epoch != l.Token().Epoch {
			t.Errorf("inside Do: state %+v, %v; want held at epoch %d", st, err, l.Token().Epoch)
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

// forceReleaseTries bounds the operator's tries in TestDo_CancelsWhenLeaseIsLost.
const forceReleaseTries = 20

// TestDo_CancelsWhenLeaseIsLost: Do cancels fn's context when the lease is lost, and reports the loss even if fn succeeds.
func TestDo_CancelsWhenLeaseIsLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("do-lost")
	c := newLockClient(t, ns, "worker", []s3lock.Option{
		s3lock.WithLeaseDuration(3 * time.Second), s3lock.WithRenewInterval(100 * time.Millisecond)})
	op := newLockClient(t, ns, "operator", nil)
	err := c.Do(t.Context(), name, func(ctx context.Context, l *s3lock.Lease) error {
		// The holder renews every 100 ms: on a loaded machine (the race
		// detector, CI) it can change the object between each of the
		// operator's reads and writes, and ForceRelease then says to try
		// again (ErrUnavailable), as an operator would.
		err := op.ForceRelease(ctx, s3lock.Token{Name: name, Epoch: l.Token().Epoch})
		for try := 1; errors.Is(err, s3lock.ErrUnavailable) && try < forceReleaseTries; try++ {
			err = op.ForceRelease(ctx, s3lock.Token{Name: name, Epoch: l.Token().Epoch})
		}
		if err != nil {
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
