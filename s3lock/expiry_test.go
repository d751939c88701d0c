package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestExpiry_TakeoverOnlyAfterLapse: a holder that stops renewing is taken
// over only after its lease lapses — also when the holder's or the waiter's
// clock is off by an hour either way — and the waiter does not wait forever.
func TestExpiry_TakeoverOnlyAfterLapse(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	cases := []struct {
		name                   string
		holderSkew, waiterSkew time.Duration
	}{
		{"no skew", 0, 0},
		{"waiter clock +1h", 0, time.Hour},
		{"waiter clock -1h", 0, -time.Hour},
		{"holder clock +1h", time.Hour, 0},
		{"holder clock -1h", -time.Hour, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			name := ns.Name("expiry")
			w := witnessed(t, ns) // succession by the store's clock, whatever the clients' clocks say
			holder := newLockClient(t, ns, "crashed", []s3lock.Option{
				s3lock.WithLeaseDuration(lease), s3lock.WithClock(s3test.OffsetClock{Offset: tc.holderSkew})}, through(w, nil))
			waiter := newLockClient(t, ns, "waiter", []s3lock.Option{
				s3lock.WithLeaseDuration(lease), s3lock.WithClock(s3test.OffsetClock{Offset: tc.waiterSkew}),
				s3lock.WithPollInterval(50 * time.Millisecond)}, through(w, nil))

			sent := time.Now() // before the holder's create was sent
			old, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
			if err != nil {
				t.Fatal(err)
			}
			old.Detach() // the holder stops renewing, as if it crashed

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			l, err := waiter.Acquire(ctx, name)
			if err != nil {
				t.Fatalf("waiter never acquired: %v", err)
			}
			took := time.Since(sent)
			mustRelease(t, l)
			if l.Token().Epoch != 2 {
				t.Errorf("epoch = %d; want 2", l.Token().Epoch)
			}
			// The old lease could be valid until `lease` after its create
			// was sent; no takeover may happen before that.
			if took < lease {
				t.Errorf("taken over %s after the holder acquired; the lease of %s had not lapsed", took, lease)
			}
		})
	}
}

// TestExpiry_HolderStopsTrustingFirst: a lease that is not renewed ends (Done
// closes, Err matches ErrLeaseLost) before anyone else can acquire the lock.
func TestExpiry_HolderStopsTrustingFirst(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("trust")
	holder := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)})
	waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan time.Time, 1)
	go func() {
		<-l.Done()
		ended <- time.Now()
	}()
	l2, err := waiter.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	mustRelease(t, l2)
	select {
	case at := <-ended:
		if !at.Before(acquired) {
			t.Errorf("holder stopped trusting its lease at %v, after the takeover at %v", at, acquired)
		}
	default:
		t.Fatal("the lapsed lease's Done channel is still open after a takeover")
	}
	if err := l.Err(); err == nil {
		t.Fatal("Err() = nil for a lapsed lease")
	}
}

// noDate strips the Date header from the store's answers: a store that does
// not say what time it is.
type noDate struct{ next http.RoundTripper }

func (n noDate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(req)
	if err == nil {
		resp.Header.Del("Date")
	}
	return resp, err
}

// TestExpiry_StoreWithoutDate: when the store sends no Date header, a waiter
// judges a silent holder's lease lapsed only after watching its object stay
// unchanged for the whole lease (plus slack) on its own clock.
func TestExpiry_StoreWithoutDate(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	ns := s3test.New(t)
	name := ns.Name("no-date")
	holder := newLockClient(t, ns, "crashed", []s3lock.Option{s3lock.WithLeaseDuration(lease)})
	waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return noDate{next} }))
	old, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	old.Detach()
	if _, err := waiter.TryAcquire(t.Context(), name); !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("TryAcquire without a Date header = %v; want ErrHeld (the age is unknown)", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := waiter.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("waiter never acquired: %v", err)
	}
	mustRelease(t, l)
	if waited := time.Since(start); waited < lease {
		t.Errorf("took over after watching for %s; the lease of %s cannot have lapsed by the waiter's clock", waited, lease)
	}
	if l.Token().Epoch != 2 {
		t.Errorf("epoch = %d; want 2", l.Token().Epoch)
	}
}

// TestSafetyMargin_CoversDriftOfLongLeases: the clock-drift margin is at least 100 ppm of the lease duration and less than half of it.
func TestSafetyMargin_CoversDriftOfLongLeases(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, time.Minute, time.Hour, 30 * 24 * time.Hour} {
		if m := s3lock.SafetyMargin(d); m < d/10_000 || m >= d/2 {
			t.Errorf("SafetyMargin(%s) = %s; want at least 100 ppm of it and less than half", d, m)
		}
	}
}
