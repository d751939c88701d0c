package s3lock_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/witness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// longLease is long enough that the store's clock slack (2 s) and the
// safety margin (1.2 s) together are less than half of it: a mistake in the
// lapse or trust arithmetic that takes away half a lease shows as an early
// takeover or an overlap, not as a difference the slack absorbs (with the
// 3 s leases of the other tests, judging a lease lapsed at half its
// validity is not observable).
const longLease = 12 * time.Second

// witnessed returns a witness of ns's lock objects and the client option
// that puts it below everything else in the client's transport (wrap, if
// not nil, goes above it: fault injection), and checks at the end of the
// test what it saw.
func witnessed(t *testing.T, ns *s3test.Namespace) *witness.Witness {
	t.Helper()
	w := witness.New(ns.Bucket, nil)
	t.Cleanup(func() {
		if len(w.Writes()) == 0 {
			t.Error("the witness saw no write to an epoch object: its check would prove nothing")
		}
		if err := w.Check(); err != nil {
			t.Errorf("the store's record breaks the protocol's rules:\n%v", err)
		}
	})
	return w
}

// through returns the client option that sends a client's requests through
// w, below wrap (nil: nothing else).
func through(w *witness.Witness, wrap func(http.RoundTripper) http.RoundTripper) s3test.Option {
	return s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		if wrap == nil {
			return w.Wrap(next)
		}
		return wrap(w.Wrap(next))
	})
}

// TestTakeover_LongLease: with a lease of production proportions, a lease is
// taken over only once it has gone without a write for its validity by the
// store's clock, and its holder stops trusting it before that; the store's
// record of every write (internal/testkit/witness) shows both rules held.
func TestTakeover_LongLease(t *testing.T) {
	t.Parallel()
	t.Run("a crashed holder's lease is taken over once it lapsed", func(t *testing.T) {
		t.Parallel()
		ns := s3test.New(t)
		w := witnessed(t, ns)
		name := ns.Name("crashed")
		holder := newLockClient(t, ns, "crashed", []s3lock.Option{s3lock.WithLeaseDuration(longLease)}, through(w, nil))
		waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithLeaseDuration(longLease),
			s3lock.WithPollInterval(50 * time.Millisecond)}, through(w, nil))

		sent := time.Now() // before the holder's create was sent
		old, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		stop := w.Watch(old)
		time.Sleep(200 * time.Millisecond) // sampled while trusted
		stop()
		old.Detach() // the holder stops renewing, as if it crashed

		l := acquireWithin(t, waiter, name, 3*longLease)
		took := time.Since(sent)
		mustRelease(t, l)
		defer w.Watch(l)()
		if err := l.Renew(t.Context()); err != nil { // a renewal's trust is checked too
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if l.Token().Epoch != 2 {
			t.Errorf("epoch = %d; want 2", l.Token().Epoch)
		}
		if len(w.Claims()) == 0 {
			t.Error("no lease's trust was sampled: the trust check would prove nothing")
		}
		if took < longLease {
			t.Errorf("taken over %s after the holder acquired; the lease of %s had not lapsed", took, longLease)
		}
	})
	t.Run("a holder cut off from the store stops trusting before anyone takes over", func(t *testing.T) {
		t.Parallel()
		ns := s3test.New(t)
		w := witnessed(t, ns)
		name := ns.Name("cut-off")
		cut := s3test.NewFaults(1)
		holder := newLockClient(t, ns, "cut-off", []s3lock.Option{s3lock.WithLeaseDuration(longLease),
			s3lock.WithRequestTimeout(time.Second)}, through(w, cut.Wrap))
		waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithLeaseDuration(longLease),
			s3lock.WithPollInterval(50 * time.Millisecond)}, through(w, nil))

		old, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Watch(old)()
		// Every write of the holder fails from now on, before the store
		// sees it: its renewals never land.
		cut.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Ops: []string{"PutObject"}, Probability: 1})
		ended := make(chan time.Time, 1)
		go func() {
			<-old.Done()
			ended <- time.Now()
		}()

		l := acquireWithin(t, waiter, name, 3*longLease)
		acquired := time.Now()
		mustRelease(t, l)
		select {
		case at := <-ended:
			if !at.Before(acquired) {
				t.Errorf("the cut-off holder stopped trusting its lease at %v, after the takeover at %v", at, acquired)
			}
		default:
			t.Errorf("the cut-off holder still trusts its lease (until %v) after the takeover at %v", old.State().ExpiresAt, acquired)
		}
		wantLost(t, "the cut-off holder's Err()", old.Err(), s3lock.LostLapsed)
	})
}

// acquireWithin acquires name with c, failing the test if that takes longer
// than limit (a guard against hangs, not a timing assertion).
func acquireWithin(t *testing.T, c *s3lock.Client, name string, limit time.Duration) *s3lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("never acquired %s: %v", name, err)
	}
	return l
}
