package s3lock_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// recording is an Observer that keeps every event.
type recording struct {
	mu     sync.Mutex
	events []observe.Event
}

func (r *recording) Observe(e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// count returns how many events of kind were seen (requests: of op with
// outcome, "" for any).
func (r *recording) count(kind observe.Kind, op string, outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind && (op == "" || e.Op == op) && (outcome == "" || e.Outcome == outcome) {
			n++
		}
	}
	return n
}

func TestObserver_HearsWhatTheClientDoes(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("observed")
	rec := &recording{}
	counter, withCounter := counting()
	c := newLockClient(t, ns, "observed", []s3lock.Option{s3lock.WithObserver(rec)}, withCounter)
	other := newLockClient(t, ns, "other", nil)

	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew()) // LIST, PUT, LIST (a first epoch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(t.Context(), name); !errors.Is(err, s3lock.ErrHeld) { // LIST, GET
		t.Fatalf("second TryAcquire = %v; want ErrHeld", err)
	}
	if err := l.Renew(t.Context()); err != nil { // PUT
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil { // PUT
		t.Fatal(err)
	}
	// A waiter that waits for a holder, then acquires.
	held, err := other.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = held.Release(t.Context())
	}()
	l2, err := c.Acquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	// Lost: an operator force-releases it; the next renewal finds out.
	if err := other.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: l2.Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	_ = l2.Renew(t.Context())

	for _, want := range []struct {
		kind observe.Kind
		n    int
	}{
		{observe.Acquired, 2}, {observe.AcquireFailed, 1}, {observe.Renewed, 1},
		{observe.Released, 1}, {observe.Lost, 1}, {observe.RenewFailed, 0},
	} {
		if got := rec.count(want.kind, "", ""); got != want.n {
			t.Errorf("%s events: %d; want %d", want.kind, got, want.n)
		}
	}
	if got, want := rec.count(observe.Request, "", ""), counter.Total(); got != want {
		t.Errorf("request events: %d; the transport saw %d requests", got, want)
	}
	if n := rec.count(observe.Request, "PutObject", "precondition-failed"); n != 1 {
		t.Errorf("PutObject precondition-failed events: %d; want 1 (the renewal after the force-release)", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.events {
		switch {
		case e.Kind == observe.Acquired && e.Epoch == l2.Token().Epoch && e.Wait < 250*time.Millisecond:
			t.Errorf("the waiting Acquire reported a wait of %s; it waited about 300 ms", e.Wait)
		case e.Kind == observe.Lost && e.Reason != string(s3lock.LostForceReleased):
			t.Errorf("lost event with reason %s; want force-released", e.Reason)
		case e.Bucket != ns.Bucket:
			t.Errorf("event %+v does not name the bucket", e)
		}
	}
}

func TestObserver_NilIsRefused(t *testing.T) {
	if err := s3lock.ValidateConfig("my-locks", s3lock.WithObserver(nil)); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("WithObserver(nil) = %v; want ErrInvalidConfig", err)
	}
}

// TestObserver_CountsFailedRenewalAttempts: a renewal whose first attempt
// gets a 503 is retried and confirmed: one renew-failed, one renewed. A
// Release that cancels a renewal in flight is no failed renewal.
func TestObserver_CountsFailedRenewalAttempts(t *testing.T) {
	ns := s3test.New(t)
	rec := &recording{}
	var failed atomic.Bool
	c := newLockClient(t, ns, "observed", []s3lock.Option{s3lock.WithObserver(rec)},
		s3test.WithoutRetries(), s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
			return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Header.Get("If-Match") != "" && failed.CompareAndSwap(false, true) {
					return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
						Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
				}
				return next.RoundTrip(req)
			})
		}))
	l, err := c.TryAcquire(t.Context(), ns.Name("renewed"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew through one 503: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f, ok := rec.count(observe.RenewFailed, "", ""), rec.count(observe.Renewed, "", ""); f != 1 || ok != 1 {
		t.Errorf("renew-failed %d, renewed %d; want 1 and 1", f, ok)
	}
	if n := rec.count(observe.Request, "PutObject", "unavailable"); n != 1 {
		t.Errorf("PutObject unavailable events: %d; want 1", n)
	}
}
