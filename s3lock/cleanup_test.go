package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestSlowCleanup_DoesNotStallRenewal: a history cleanup that hangs on a slow
// store must not keep the lease from renewing (it used to run before the
// renewal loop, on the same goroutine, longer than the lease).
func TestSlowCleanup_DoesNotStallRenewal(t *testing.T) {
	s3lock.SetTimingForTest(t, 300*time.Millisecond)
	ns := s3test.New(t)
	name := ns.Name("slow-cleanup")
	setup := newLockClient(t, ns, "setup", []s3lock.Option{s3lock.WithHistory(1)})
	for range 2 {
		l, err := setup.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(cleanupWait()) // epoch 1 is now old enough to delete

	slow := s3test.NewFaults(1, s3test.Rule{Fault: s3test.Latency, Ops: []string{"DeleteObjects"}, Probability: 1, Delay: 6 * time.Second, Fixed: true})
	c := newLockClient(t, ns, "holder", []s3lock.Option{
		s3lock.WithHistory(1), s3lock.WithLeaseDuration(2 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond),
	}, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return slow.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the slow cleanup to start", func() bool { return slow.Injected()[s3test.Latency] > 0 })
	time.Sleep(3 * time.Second) // longer than the lease, while DeleteObjects hangs
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended while a cleanup was slow: %v", err)
	}
	st, err := c.Current(t.Context(), name)
	if err != nil || st.Renewals < 5 {
		t.Fatalf("state %+v, %v; want at least 5 renewals during the slow cleanup", st, err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.WaitCleanup()
}

// TestCleanup_StaleContenderFindsItsEpochStillThere: history cleanup never
// deletes the newest epoch it listed, and deletes an older one only once its
// successor is cleanupAge old by the store's clock (PROTOCOL.md §7). Until
// then a contender that listed before the successor existed may still send
// its create of the epoch's key, and an attempt that quick skips step 5's
// second look: the key must still be taken.
//
// A contender reads "newest = 1, released" and pauses before it creates
// epoch 2. Meanwhile another client, keeping a history of one epoch, takes
// epochs 2, 3 and 4, well within the contender's attempt window. The
// contender's create of epoch 2 then finds the key taken and reports epoch
// 4's holder; had cleanup deleted epoch 2, the create would land, and the
// contender would hold epoch 2 beside epoch 4's holder.
func TestCleanup_StaleContenderFindsItsEpochStillThere(t *testing.T) {
	const window = 20 * time.Second // longer than the whole test: no attempt lists twice
	s3lock.SetTimingForTest(t, window)
	ns := s3test.New(t)
	name := ns.Name("stale-in-window")
	b := newLockClient(t, ns, "bob", []s3lock.Option{s3lock.WithHistory(1)})
	g := newGate()
	a := newLockClient(t, ns, "paused", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		g.next = next
		return g
	}))
	take := func() *s3lock.Lease {
		t.Helper()
		l, err := b.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		b.WaitCleanup() // the cleanup this acquisition started, if any, is done
		return l
	}
	release := func(l *s3lock.Lease) {
		t.Helper()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	release(take()) // epoch 1, released

	type result struct {
		l   *s3lock.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := a.TryAcquire(context.Background(), name)
		res <- result{l, err}
	}()
	<-g.reached // a listed (newest: 1, released) and is about to create epoch 2

	release(take()) // epoch 2
	release(take()) // epoch 3
	l4 := take()    // epoch 4, held
	mustRelease(t, l4)
	for e := uint64(1); e <= 4; e++ {
		if !epochObjectExists(t, ns, s3lock.Key(name, e)) {
			t.Errorf("epoch %d was deleted although its successor is younger than the cleanup age (%s)", e, s3lock.CleanupAge())
		}
	}

	close(g.open) // a's create of epoch 2 reaches the store
	r := <-res
	if r.err == nil {
		_ = r.l.Release(t.Context())
		t.Fatalf("the paused contender got epoch %d although bob holds epoch 4", r.l.Epoch())
	}
	var held *s3lock.HeldError
	if !errors.As(r.err, &held) || held.Epoch != 4 || held.Holder != "bob" {
		t.Fatalf("paused contender: %v; want ErrHeld naming bob's epoch 4", r.err)
	}
	if err := l4.Renew(t.Context()); err != nil {
		t.Errorf("bob's lease suffered from the stale create: %v", err)
	}
}
