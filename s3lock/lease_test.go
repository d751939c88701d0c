package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// TestRenew_ExtendsExpiry: a manual Renew moves the lease's expiry later and is counted as a renewal in the store.
func TestRenew_ExtendsExpiry(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "alice", []s3lock.Option{s3lock.WithLeaseDuration(4 * time.Second)})
	l, err := c.TryAcquire(t.Context(), ns.Name("renew"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	before := l.State().ExpiresAt
	time.Sleep(100 * time.Millisecond)
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !l.State().ExpiresAt.After(before) {
		t.Errorf("ExpiresAt after Renew = %v; want later than %v", l.State().ExpiresAt, before)
	}
	st, err := c.Current(t.Context(), ns.Name("renew"))
	if err != nil || st.Renewals != 1 {
		t.Errorf("Current after one renewal = %+v, %v; want 1 renewal", st, err)
	}
}

// TestLease_RenewsInBackground: a lease with auto-renew keeps renewing on its own while it is held.
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
	testkit.Eventually(t, waitLimit, "three background renewals", func() bool {
		st, err := c.Current(t.Context(), ns.Name("bg"))
		return err == nil && st.Renewals >= 3
	})
	if l.Err() != nil {
		t.Fatalf("lease ended while renewing: %v", l.Err())
	}
}

// TestRelease_AfterForceReleaseIsLost: a release that finds its epoch
// force-released must say the lease was lost (it used to mistake the
// operator's write, which has the same renewal count, for its own).
func TestRelease_AfterForceReleaseIsLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("force-then-release")
	holder := newLockClient(t, ns, "holder", nil)
	op := newLockClient(t, ns, "operator", nil)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := op.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	next, err := op.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, next)
	if err := l.Release(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) || !strings.Contains(err.Error(), "force-released by operator") {
		t.Fatalf("Release after a force-release = %v; want ErrLeaseLost naming the operator", err)
	}
	wantLost(t, "Release after a force-release", l.Err(), s3lock.LostForceReleased)
}

// TestRelease_GivesUpWhenTheStoreIsDown: Release with a context that never
// ends must return once the lease can no longer be trusted (it used to retry
// forever while holding the lease's lock).
func TestRelease_GivesUpWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1)
	c := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), ns.Name("down"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 1})
	done := make(chan error, 1)
	go func() { done <- l.Release(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, s3lock.ErrLeaseLost) || !errors.Is(err, s3lock.ErrUnavailable) {
			t.Fatalf("Release against a failing store = %v; want ErrLeaseLost caused by ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Release did not give up after the lease's trust window")
	}
}

// TestLostLease_KeepsItsCause: a lease that ends because renewals kept
// failing says why.
func TestLostLease_KeepsItsCause(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1)
	c := newLockClient(t, ns, "holder", []s3lock.Option{
		s3lock.WithLeaseDuration(2 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond),
	}, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), ns.Name("cause"))
	if err != nil {
		t.Fatal(err)
	}
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Ops: []string{"PutObject"}, Probability: 1})
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease never ended")
	}
	if err := l.Err(); !errors.Is(err, s3lock.ErrLeaseLost) || !errors.Is(err, s3lock.ErrUnavailable) {
		t.Fatalf("Err = %v; want ErrLeaseLost caused by ErrUnavailable", err)
	}
}

// lateRenewal holds back the first renewal PUT (If-Match, not a release): it
// answers the client only when the request's context ends, and sends it to
// the store after the client's read-back of the object, so the renewal lands
// after the client concluded that it did not. The next release waits until
// it has landed.
type lateRenewal struct {
	next     http.RoundTripper
	held     chan struct{} // closed when the renewal is held back
	mu       sync.Mutex
	renewal  *http.Request // the held-back renewal, until sent
	body     []byte
	landed   chan struct{} // closed when it has reached the store
	sentOnce sync.Once
}

func (lr *lateRenewal) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	isPut := req.Method == http.MethodPut && req.Header.Get("If-Match") != ""
	lr.mu.Lock()
	first := isPut && !bytes.Contains(body, []byte(`"expired":true`)) && lr.renewal == nil && lr.landed == nil
	if first {
		lr.renewal, lr.body, lr.landed = req.Clone(context.Background()), body, make(chan struct{})
	}
	landed := lr.landed
	lr.mu.Unlock()
	switch {
	case first:
		close(lr.held)
		<-req.Context().Done() // the client gives up on it (Release cancels the renewal)
		return nil, req.Context().Err()
	case isPut && landed != nil:
		<-landed // the release goes out after the late renewal landed
	}
	resp, err := lr.next.RoundTrip(req)
	if req.Method == http.MethodGet && landed != nil {
		lr.sentOnce.Do(func() { go lr.land() }) // after the client's read-back
	}
	return resp, err
}

// land sends the held-back renewal to the store.
func (lr *lateRenewal) land() {
	lr.mu.Lock()
	req, body := lr.renewal, lr.body
	lr.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	if resp, err := lr.next.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
	close(lr.landed)
}

// TestRelease_RecognisesItsOwnLateRenewal: Release stops the background
// renewal, cancelling one in flight; that renewal may still land after its
// read-back found the object unchanged. Release's write then finds a write
// id it did not confirm — but its own: it must release on that state, not
// report the lease taken over and leave the lock held until it lapses.
func TestRelease_RecognisesItsOwnLateRenewal(t *testing.T) {
	ns := s3test.New(t)
	lr := &lateRenewal{held: make(chan struct{})}
	rec := &recording{}
	c := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithLeaseDuration(3 * time.Second),
		s3lock.WithRenewInterval(200 * time.Millisecond), s3lock.WithObserver(rec)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { lr.next = next; return lr }))
	name := ns.Name("late-renewal")
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	<-lr.held // a renewal is in flight
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v; want the lease released (the write it did not know was its own renewal)", err)
	}
	select {
	case <-lr.landed:
	default:
		t.Fatal("the held-back renewal never landed: the test did not exercise the race")
	}
	st, err := newLockClient(t, ns, "viewer", nil).Current(t.Context(), name)
	if err != nil || st.Held || !st.Released {
		t.Errorf("after Release: %+v, %v; want the lock released at once", st, err)
	}
	// The cancelled renewal is no failed renewal; the lease was released.
	if f, r, lost := rec.count(observe.RenewFailed, "", ""), rec.count(observe.Released, "", ""),
		rec.count(observe.Lost, "", ""); f != 0 || r != 1 || lost != 0 {
		t.Errorf("events: %d renew-failed, %d released, %d lost; want 0, 1, 0", f, r, lost)
	}
}
