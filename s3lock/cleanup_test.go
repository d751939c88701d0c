package s3lock_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
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
	testkit.Eventually(t, waitLimit, "the slow cleanup to start", func() bool { return slow.Injected()[s3test.Latency] > 0 })
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
	s := newStaleScene(t, ns, name)
	s.release(s.take()) // epoch 2
	s.release(s.take()) // epoch 3
	l4 := s.take()      // epoch 4, held
	mustRelease(t, l4)
	for e := uint64(1); e <= 4; e++ {
		if !epochObjectExists(t, ns, s3lock.Token{Name: name, Epoch: e}.Key()) {
			t.Errorf("epoch %d was deleted although its successor is younger than the cleanup age (%s)", e, s3lock.CleanupAge())
		}
	}
	s.contenderRefused(l4) // a's create of epoch 2 must find the key taken
}
