package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// gate holds the first create request (If-None-Match) that passes through
// it until opened: a contender that read the lock, then paused before its
// write reached the store.
type gate struct {
	next    http.RoundTripper
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{reached: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*" {
		held := false
		g.once.Do(func() { held = true })
		if held {
			close(g.reached)
			<-g.open
		}
	}
	return g.next.RoundTrip(req)
}

func epochObjectExists(t *testing.T, ns *s3test.Namespace, key string) bool {
	t.Helper()
	_, err := ns.Client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
	return err == nil
}

// staleScene is hazard 4's setting (PROTOCOL.md §7) on one lock: bob, who
// keeps one epoch of history, took and released epoch 1; a contender then
// read the lock (newest: 1, released) and is paused at its create of epoch
// 2, held at gate until the test opens it. Every write goes through the
// store's witness.
type staleScene struct {
	t      *testing.T
	name   string
	bob    *s3lock.Client
	gate   *gate
	result chan attemptResult // the contender's TryAcquire
}

type attemptResult struct {
	l   *s3lock.Lease
	err error
}

func newStaleScene(t *testing.T, ns *s3test.Namespace, name string) *staleScene {
	t.Helper()
	w := witnessed(t, ns)
	s := &staleScene{t: t, name: name, gate: newGate(), result: make(chan attemptResult, 1)}
	s.bob = newLockClient(t, ns, "bob", []s3lock.Option{s3lock.WithHistory(1)}, through(w, nil))
	a := newLockClient(t, ns, "paused", nil, through(w, func(next http.RoundTripper) http.RoundTripper {
		s.gate.next = next
		return s.gate
	}))
	s.release(s.take()) // epoch 1, released
	go func() {
		l, err := a.TryAcquire(context.Background(), name)
		s.result <- attemptResult{l, err}
	}()
	<-s.gate.reached // a listed (newest: 1, released) and is about to create epoch 2
	return s
}

// take acquires the next epoch for bob and waits for the history cleanup
// the acquisition started, if any.
func (s *staleScene) take() *s3lock.Lease {
	s.t.Helper()
	l, err := s.bob.TryAcquire(s.t.Context(), s.name)
	if err != nil {
		s.t.Fatal(err)
	}
	s.bob.WaitCleanup()
	return l
}

// takeUpTo4 has bob take and release epochs 2 and 3, then take epoch 4,
// whose cleanup deletes epochs 1 and 2 (cleanupAge after each), and
// returns bob's lease of epoch 4, held.
func (s *staleScene) takeUpTo4(ns *s3test.Namespace) *s3lock.Lease {
	t := s.t
	t.Helper()
	s.release(s.take()) // epoch 2
	time.Sleep(cleanupWait())
	s.release(s.take()) // epoch 3
	time.Sleep(cleanupWait())
	l4 := s.take() // epoch 4: its cleanup deletes epochs 1 and 2
	mustRelease(t, l4)
	if epochObjectExists(t, ns, s3lock.Token{Name: s.name, Epoch: 2}.Key()) {
		t.Fatal("cleanup did not delete epoch 2: the test did not set up the hazard")
	}
	return l4
}

func (s *staleScene) release(l *s3lock.Lease) {
	s.t.Helper()
	if err := l.Release(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
}

// contenderRefused lets the contender's create of epoch 2 through and checks
// that it got no lease but a *HeldError naming bob's epoch 4 (l4), which is
// still held and unharmed.
func (s *staleScene) contenderRefused(l4 *s3lock.Lease) {
	t := s.t
	t.Helper()
	close(s.gate.open)
	r := <-s.result
	if r.err == nil {
		_ = r.l.Release(t.Context())
		t.Fatalf("the paused contender got epoch %d although bob holds epoch 4", r.l.Token().Epoch)
	}
	var held *s3lock.HeldError
	if !errors.As(r.err, &held) || held.Epoch != 4 || held.Holder != "bob" {
		t.Fatalf("paused contender: %v; want ErrHeld naming bob's epoch 4", r.err)
	}
	st, err := s.bob.Current(t.Context(), s.name)
	if err != nil || st.Epoch != 4 || !st.Held {
		t.Fatalf("state after the stale create: %+v, %v; want epoch 4 held", st, err)
	}
	if err := l4.Renew(t.Context()); err != nil {
		t.Errorf("bob's lease suffered from the stale create: %v", err)
	}
}

// TestStaleContender_RecreatesDeletedEpoch is hazard 4 of the protocol notes:
// a contender reads "newest = 1", pauses; meanwhile epochs 2..4 are taken
// and cleanup deletes epoch 2; the contender's create of epoch 2 then
// succeeds. It must find out that a newer epoch exists and not use it.
func TestStaleContender_RecreatesDeletedEpoch(t *testing.T) {
	s3lock.SetTimingForTest(t, 300*time.Millisecond)
	ns := s3test.New(t)
	name := ns.Name("stale")
	s := newStaleScene(t, ns, name)
	l4 := s.takeUpTo4(ns)
	s.contenderRefused(l4) // a's create of epoch 2 lands on a free key
}

// TestAmbiguousCreate: a create whose outcome the client cannot see is
// resolved by reading the key back: never an orphaned lease, never a lost
// one.
func TestAmbiguousCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		fault   s3test.Fault
		noRetry bool
	}{
		{"response dropped after commit, SDK retries get 412", s3test.DropResponse, false},
		{"response dropped after commit, no SDK retry", s3test.DropResponse, true},
		{"500 after commit, SDK retries get 412", s3test.ServerErrorAfter, false},
		{"500 after commit, no SDK retry", s3test.ServerErrorAfter, true},
		{"503 before the store saw it, no SDK retry", s3test.ServerErrorBefore, true},
		{"409 conflict, no SDK retry", s3test.Conflict, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := s3test.New(t)
			f := s3test.NewFaults(1, s3test.Rule{Fault: tc.fault, Ops: []string{"PutObject"}, Probability: 1, Limit: 1})
			copts := []s3test.Option{through(witnessed(t, ns), f.Wrap)}
			if tc.noRetry {
				copts = append(copts, s3test.WithoutRetries())
			}
			c := newLockClient(t, ns, "creator", nil, copts...)
			l, err := c.TryAcquire(t.Context(), ns.Name("ambiguous"))
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if f.Injected()[tc.fault] != 1 {
				t.Fatalf("fault was not injected: %v", f.Injected())
			}
			if l.Token().Epoch != 1 {
				t.Errorf("epoch = %d; want 1 (the ambiguous write must not cost an epoch)", l.Token().Epoch)
			}
			st, err := c.Current(t.Context(), ns.Name("ambiguous"))
			if err != nil || !st.Held || st.Holder != "creator" || st.Epoch != 1 {
				t.Fatalf("state = %+v, %v; want epoch 1 held by creator", st, err)
			}
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// TestAmbiguousRenewAndRelease: renewals and releases whose answer is lost
// are confirmed by reading back, not mistaken for a lost lease.
func TestAmbiguousRenewAndRelease(t *testing.T) {
	t.Parallel()
	for _, fault := range []s3test.Fault{s3test.DropResponse, s3test.ServerErrorAfter, s3test.Conflict, s3test.ServerErrorBefore} {
		t.Run(fault.String(), func(t *testing.T) {
			ns := s3test.New(t)
			f := s3test.NewFaults(1)
			c := newLockClient(t, ns, "holder", nil, s3test.WithoutRetries(), through(witnessed(t, ns), f.Wrap))
			name := ns.Name("ambiguous")
			l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
			if err != nil {
				t.Fatal(err)
			}
			f.SetRules(s3test.Rule{Fault: fault, Ops: []string{"PutObject"}, Probability: 1, Limit: 1})
			if err := l.Renew(t.Context()); err != nil {
				t.Fatalf("Renew with a %s: %v", fault, err)
			}
			f.SetRules(s3test.Rule{Fault: fault, Ops: []string{"PutObject"}, Probability: 1, Limit: 1})
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("Release with a %s: %v", fault, err)
			}
			st, err := c.Current(t.Context(), name)
			if err != nil || !st.Released || st.Renewals != 2 {
				t.Fatalf("state = %+v, %v; want released after one renewal and the release", st, err)
			}
		})
	}
}

// TestReleaseAfterLost: releasing a lease that already lapsed says so and
// writes nothing, so it cannot disturb the new holder.
func TestReleaseAfterLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("lost")
	w := witnessed(t, ns)
	counter := &s3test.Counter{}
	a := newLockClient(t, ns, "late", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)}, through(w, counter.Wrap))
	b := newLockClient(t, ns, "next", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)}, through(w, nil))
	la, err := a.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, lb)
	before, err := b.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}

	counter.Reset()
	err = la.Release(t.Context())
	var lost *s3lock.LeaseLostError
	if !errors.Is(err, s3lock.ErrLeaseLost) || !errors.As(err, &lost) || lost.Epoch != 1 {
		t.Fatalf("Release of a lapsed lease = %v; want a LeaseLostError for epoch 1", err)
	}
	if n := counter.Count("PutObject"); n != 0 {
		t.Errorf("Release of a lost lease wrote %d objects; want none", n)
	}
	after, err := b.Current(t.Context(), name)
	if err != nil || after.Epoch != 2 || !after.Held || after.Renewals != before.Renewals {
		t.Errorf("new holder's state changed: before %+v, after %+v (%v)", before, after, err)
	}
}

// TestForceRelease acts only on the epoch named; the holder learns at its
// next renewal that its lease is gone.
func TestForceRelease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("force")
	holder := newLockClient(t, ns, "stuck", nil)
	op := newLockClient(t, ns, "operator", nil)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := op.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 99}); !errors.Is(err, s3lock.ErrNoSuchEpoch) {
		t.Errorf("ForceRelease of a missing epoch = %v; want ErrNoSuchEpoch", err)
	}
	if err := op.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	next, err := op.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire after ForceRelease: %v", err)
	}
	mustRelease(t, next)
	if err := op.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
		t.Errorf("ForceRelease of an already released epoch = %v; want nil", err)
	}
	st, err := op.Current(t.Context(), name)
	if err != nil || st.Epoch != 2 || !st.Held || st.Holder != "operator" {
		t.Fatalf("ForceRelease of epoch 1 disturbed epoch 2: %+v, %v", st, err)
	}
	err = l.Renew(t.Context())
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Renew after ForceRelease = %v; want ErrLeaseLost", err)
	}
	wantLost(t, "Renew after ForceRelease", err, s3lock.LostForceReleased)
	select {
	case <-l.Done():
	default:
		t.Error("Done not closed after the lease was found lost")
	}
	if err := l.Release(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Errorf("Release after loss = %v; want ErrLeaseLost", err)
	}
}

// TestLostLease_DoneClosesInBackground: an auto-renewing lease that is
// force-released ends on its own at its next renewal.
func TestLostLease_DoneClosesInBackground(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("bg-lost")
	c := newLockClient(t, ns, "holder", []s3lock.Option{
		s3lock.WithLeaseDuration(3 * time.Second), s3lock.WithRenewInterval(100 * time.Millisecond)})
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: l.Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease did not notice it was force-released")
	}
	if !errors.Is(l.Err(), s3lock.ErrLeaseLost) {
		t.Errorf("Err = %v; want ErrLeaseLost", l.Err())
	}
}

// lateCreate lets the first create through only after its caller gave up:
// the client sees its context end, and the request reaches the store later.
type lateCreate struct {
	next    http.RoundTripper
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
	landed  chan error
}

func (g *lateCreate) RoundTrip(req *http.Request) (*http.Response, error) {
	first := false
	if req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*" {
		g.once.Do(func() { first = true })
	}
	if !first {
		return g.next.RoundTrip(req)
	}
	late := req.Clone(context.Background())
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		late.Body = io.NopCloser(bytes.NewReader(body))
	}
	close(g.reached)
	<-req.Context().Done()
	go func() {
		<-g.open
		resp, err := g.next.RoundTrip(late)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		g.landed <- err
	}()
	return nil, req.Context().Err()
}

// TestAbandon_LateCreateLeavesNoOrphan: a create that reaches the store only
// after its caller gave up must not hold the lock for nobody.
func TestAbandon_LateCreateLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("late-create")
	g := &lateCreate{reached: make(chan struct{}), open: make(chan struct{}), landed: make(chan error, 1)}
	a := newLockClient(t, ns, "gives-up", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		g.next = next
		return g
	}))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := a.TryAcquire(ctx, name)
		errc <- err
	}()
	<-g.reached // the create is on its way
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire after cancel = %v; want context.Canceled", err)
	}
	close(g.open) // the create arrives late: the abandoned key refuses it
	if err := <-g.landed; err == nil {
		t.Fatal("the late create was accepted after the attempt was abandoned")
	}
	b := newLockClient(t, ns, "next", nil)
	l, err := b.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("the abandoned epoch holds the lock for nobody: %v", err)
	}
	mustRelease(t, l)
	if l.Token().Epoch != 2 {
		t.Errorf("epoch = %d; want 2 (epoch 1 was abandoned)", l.Token().Epoch)
	}
}
