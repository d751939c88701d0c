package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The trust deadline is a timer, not the end of a request: a holder cut off
// from the store by a network that swallows its requests (accepts, never
// answers) stops trusting its lease at the deadline, while its renewal is
// still hanging, and before anyone else can take the lock.

// deadlineNoise is how late, after its trust deadline, a lease may end: the
// scheduling noise of a loaded two-core machine under the race detector. The
// deadline itself is sent+duration−margin; before the fix the lease ended
// only when the hanging renewal's read-back gave up (a full request timeout).
const deadlineNoise = 500 * time.Millisecond

// blackholedClient returns a client whose requests go through a proxy the
// test can blackhole, with a 3s lease renewed every second.
func blackholedClient(t *testing.T, ns *s3test.Namespace) (*s3lock.Client, *s3test.Proxy) {
	t.Helper()
	if !ns.Target.Local {
		t.Skip("needs the local server behind a proxy of the test's own")
	}
	proxy := s3test.NewProxy(t, ns.Target.Endpoint)
	tg := ns.Target
	tg.Endpoint = proxy.URL
	// The request timeout is what the lease used to wait for: far longer
	// than the lease, so that waiting for it would show.
	c, err := s3lock.New(s3test.NewClient(t, tg), ns.Bucket, s3lock.WithHolder("partitioned"),
		s3lock.WithLeaseDuration(3*time.Second), s3lock.WithRenewInterval(time.Second),
		s3lock.WithRequestTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

// rivalAcquires starts a rival that goes to the store directly and returns a
// channel that receives the time it acquired the lock. The test ends only
// once the rival has released the lock: its goroutine must not outlive the
// test (the leak check of a run of this test alone found it releasing).
func rivalAcquires(t *testing.T, ns *s3test.Namespace, name string) <-chan time.Time {
	t.Helper()
	rival := newLockClient(t, ns, "rival", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	got := make(chan time.Time, 1)
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := rival.Acquire(ctx, name)
		if err != nil {
			t.Errorf("rival: %v", err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l.Release(ctx)
	}()
	return got
}

func TestLeaseDeadline_BlackholedHolderLosesAtItsDeadline(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c, proxy := blackholedClient(t, ns)
	name := ns.Name("blackholed")
	lease, err := c.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	time.Sleep(1500 * time.Millisecond) // at least one renewal is confirmed
	proxy.Blackhole()
	rival := rivalAcquires(t, ns, name)

	<-lease.Done()
	ended := time.Now()
	if !errors.Is(lease.Err(), s3lock.ErrLeaseLost) {
		t.Fatalf("lease ended with %v; want it lost", lease.Err())
	}
	wantLost(t, "the blackholed lease's end", lease.Err(), s3lock.LostLapsed)
	if late := ended.Sub(lease.State().ExpiresAt); late > deadlineNoise {
		t.Errorf("the lease ended %s after its trust deadline %s, while its renewal hung; want the deadline to end it",
			late, lease.State().ExpiresAt.Format(time.StampMilli))
	}
	if took := <-rival; !took.After(ended) {
		t.Errorf("the rival acquired at %s, before the partitioned holder stopped trusting its lease at %s",
			took.Format(time.StampMilli), ended.Format(time.StampMilli))
	}
}

func TestLeaseDeadline_DoCancelsItsWorkAtTheDeadline(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c, proxy := blackholedClient(t, ns)
	name := ns.Name("do-blackholed")
	var (
		cancelled time.Time
		deadline  time.Time
		rival     <-chan time.Time
	)
	err := c.Do(t.Context(), name, func(ctx context.Context, lease *s3lock.Lease) error {
		time.Sleep(1500 * time.Millisecond)
		proxy.Blackhole()
		rival = rivalAcquires(t, ns, name)
		<-ctx.Done()
		cancelled = time.Now()
		deadline = lease.State().ExpiresAt
		return context.Cause(ctx)
	})
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Do = %v; want the lease lost", err)
	}
	wantLost(t, "Do", err, s3lock.LostLapsed)
	if late := cancelled.Sub(deadline); late > deadlineNoise {
		t.Errorf("Do cancelled its work %s after the lease's trust deadline; want it cancelled by the deadline", late)
	}
	if took := <-rival; !took.After(cancelled) {
		t.Errorf("the rival acquired at %s, before Do cancelled the partitioned holder's work at %s",
			took.Format(time.StampMilli), cancelled.Format(time.StampMilli))
	}
}

// A holder that releases while the store swallows its requests learns at
// the deadline, not after a request timeout, that the release was not
// confirmed (the lease lapses by itself).
func TestLeaseDeadline_ReleaseGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c, proxy := blackholedClient(t, ns)
	lease, err := c.Acquire(t.Context(), ns.Name("release-blackholed"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	err = lease.Release(context.Background())
	returned := time.Now()
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Release = %v; want the lease lost (the release was never confirmed)", err)
	}
	wantLost(t, "Release", err, s3lock.LostLapsed)
	if late := returned.Sub(lease.State().ExpiresAt); late > deadlineNoise {
		t.Errorf("Release returned %s after the lease's trust deadline; want it to give up by then", late)
	}
}

// A release abandoned by its caller (its context ended before the store
// answered) leaves the lease to its deadline timer: Done still closes by the
// deadline, with the lease lost, instead of never.
func TestLeaseDeadline_AbandonedReleaseStillEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c, proxy := blackholedClient(t, ns)
	lease, err := c.Acquire(t.Context(), ns.Name("abandoned-release"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := lease.Release(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release = %v; want the caller's deadline", err)
	}
	select {
	case <-lease.Done():
	case <-time.After(time.Until(lease.State().ExpiresAt) + 5*time.Second):
		t.Fatalf("Done still open 5s after the lease's trust deadline %s", lease.State().ExpiresAt.Format(time.StampMilli))
	}
	if !errors.Is(lease.Err(), s3lock.ErrLeaseLost) {
		t.Errorf("Err = %v; want the lease lost", lease.Err())
	}
	wantLost(t, "the abandoned lease's end", lease.Err(), s3lock.LostLapsed)
}

// lateAnswers forwards a PutObject at once (the store applies it) but hands
// its answer back only after hold: a renewal confirmed too late.
type lateAnswers struct {
	next http.RoundTripper
	hold atomic.Int64 // nanoseconds; 0: no delay
}

func (l *lateAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if d := time.Duration(l.hold.Load()); d > 0 && req.Method == http.MethodPut {
		time.Sleep(d) // deliberately deaf to the request's context: a slow network
	}
	return resp, err
}

// A renewal the store applied but whose answer arrives after the lease's
// trust deadline cannot revive the lease: the deadline ended it meanwhile.
func TestLeaseDeadline_LateConfirmationDoesNotReviveTheLease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	late := &lateAnswers{}
	c := newLockClient(t, ns, "late", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { late.next = next; return late }))
	lease, err := c.TryAcquire(t.Context(), ns.Name("late"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	deadline := lease.State().ExpiresAt
	late.hold.Store(int64(time.Until(deadline) + 500*time.Millisecond))
	err = lease.Renew(t.Context())
	answered := time.Now()
	if !errors.Is(err, s3lock.ErrLeaseLost) || !errors.Is(lease.Err(), s3lock.ErrLeaseLost) {
		t.Fatalf("Renew confirmed after the deadline = %v (lease: %v); want the lease lost", err, lease.Err())
	}
	wantLost(t, "the late-confirmed lease's end", lease.Err(), s3lock.LostLapsed)
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done is open after the lease was lost")
	}
	if !answered.After(deadline) || lease.State().ExpiresAt.After(deadline) {
		t.Errorf("the late renewal moved the deadline from %s to %s (answered %s)", deadline.Format(time.StampMilli),
			lease.State().ExpiresAt.Format(time.StampMilli), answered.Format(time.StampMilli))
	}
}
