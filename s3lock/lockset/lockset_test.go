package lockset_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/lockset"
)

func TestMain(m *testing.M) { os.Exit(s3test.MainCheckingLeaks(m)) }

// newLockClient returns an s3lock client of holder on ns (with copts, a
// fresh S3 client).
func newLockClient(tb testing.TB, ns *s3test.Namespace, holder string, opts []s3lock.Option, copts ...s3test.Option) *s3lock.Client {
	tb.Helper()
	api := ns.Client
	if len(copts) > 0 {
		api = ns.NewClient(tb, copts...)
	}
	c, err := s3lock.New(api, ns.Bucket, append([]s3lock.Option{s3lock.WithHolder(holder)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// lostFor is the reason of a lost lease's error, or "" for any other error.
func lostFor(err error) s3lock.LossReason {
	var lost *s3lock.LeaseLostError
	if errors.Is(err, s3lock.ErrLeaseLost) && errors.As(err, &lost) {
		return lost.Reason
	}
	return ""
}

// Two jobs that take the same locks in opposite orders, {a, b} and {b, a},
// round after round, never deadlock (every round ends within its bound) and
// never hold a lock at the same time (a checker counts the holders of each
// lock while a set is held).
func TestAcquire_OppositeOrdersNeverDeadlockNorOverlap(t *testing.T) {
	t.Parallel()
	const rounds = 50
	ns := s3test.New(t)
	a, b := ns.Name("set/a"), ns.Name("set/b")
	var inUse [2]atomic.Int32
	var overlaps atomic.Int32
	job := func(who string, names []string) error {
		c := newLockClient(t, ns, who, []s3lock.Option{s3lock.WithPollInterval(20 * time.Millisecond)})
		for round := range rounds {
			// A round takes milliseconds; a deadlock would wait out this bound.
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			set, err := lockset.Acquire(ctx, c, names)
			cancel()
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", who, round, err)
			}
			for i := range inUse {
				if inUse[i].Add(1) > 1 {
					overlaps.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
			for i := range inUse {
				inUse[i].Add(-1)
			}
			if err := set.Release(t.Context()); err != nil {
				return fmt.Errorf("%s, round %d: release: %w", who, round, err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, names := range [][]string{{a, b}, {b, a}} {
		wg.Go(func() { errs[i] = job(fmt.Sprintf("job-%d", i), names) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times a lock was held by both jobs' sets at once", n)
	}
}

// A set that finds one of its locks held takes nothing it cannot keep: when
// its wait ends it has released what it took, and its error names the held
// lock.
func TestAcquire_AllOrNone(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a, b := ns.Name("aon/a"), ns.Name("aon/b")
	holder := newLockClient(t, ns, "holder", nil)
	l, err := holder.TryAcquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	c := newLockClient(t, ns, "set", nil)
	_, err = lockset.Acquire(t.Context(), c, []string{b, a}, s3lock.WithWait(time.Second))
	if !errors.Is(err, s3lock.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fmt.Sprintf("lock %q", b)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("what it had taken (%s) is released", a)) {
		t.Errorf("Acquire of {a, b} with b held = %v; want ErrHeld after the wait, naming b, saying what it released", err)
	}
	if st, err := holder.Current(t.Context(), a); err != nil || st.Phase() != s3lock.PhaseReleased {
		t.Errorf("a after the set gave up: %+v, %v; want released", st, err)
	}
}

// While it waits for a held lock, a set holds the locks before it in the
// global order and none after it; it takes the rest when the lock frees.
func TestAcquire_WaitsHoldingOnlyTheLocksBefore(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a, b, c := ns.Name("wait/a"), ns.Name("wait/b"), ns.Name("wait/c")
	holder := newLockClient(t, ns, "holder", nil)
	held, err := holder.TryAcquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	sets := newLockClient(t, ns, "set", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	type result struct {
		set *lockset.Set
		err error
	}
	got := make(chan result, 1)
	go func() {
		set, err := lockset.Acquire(t.Context(), sets, []string{c, b, a})
		got <- result{set, err}
	}()
	testkit.Eventually(t, 20*time.Second, "the set to take a", func() bool {
		st, err := holder.Current(t.Context(), a)
		return err == nil && st.Held && st.Holder == "set"
	})
	if st, err := holder.Current(t.Context(), c); err != nil || st.Epoch != 0 {
		t.Errorf("c while the set waits for b: %+v, %v; want never taken", st, err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	var names []string
	for _, l := range r.set.Leases() {
		names = append(names, l.Token().Name)
	}
	if strings.Join(names, " ") != strings.Join([]string{a, b, c}, " ") || r.set.Err() != nil {
		t.Errorf("set of %v (err %v); want a, b, c held in that order", names, r.set.Err())
	}
	if err := r.set.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r.set.Err(), s3lock.ErrReleased) {
		t.Errorf("Err after Release = %v; want ErrReleased", r.set.Err())
	}
}

// One lost lease ends the set (Done, Err), while its other leases stay held
// until Release, which reports the loss and frees them.
func TestAcquire_OneLostLeaseEndsTheSet(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a, b := ns.Name("lost/a"), ns.Name("lost/b")
	c := newLockClient(t, ns, "set", nil)
	set, err := lockset.Acquire(t.Context(), c, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	ops := newLockClient(t, ns, "ops", nil)
	if err := ops.ForceRelease(t.Context(), s3lock.Token{Name: b, Epoch: set.Leases()[1].Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := set.Leases()[1].Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Renew of the force-released lease = %v; want ErrLeaseLost", err)
	}
	select {
	case <-set.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the set did not end when one of its leases was lost")
	}
	if r := lostFor(set.Err()); r != s3lock.LostForceReleased {
		t.Errorf("the set's Err = %v; want a lease lost by a force-release", set.Err())
	}
	if st, err := ops.Current(t.Context(), a); err != nil || !st.Held {
		t.Errorf("a after b was lost: %+v, %v; want still held until Release", st, err)
	}
	if err := set.Release(t.Context()); lostFor(err) != s3lock.LostForceReleased {
		t.Errorf("Release of the set = %v; want it to report the lease lost by a force-release", err)
	}
	if st, err := ops.Current(t.Context(), a); err != nil || st.Phase() != s3lock.PhaseReleased {
		t.Errorf("a after Release: %+v, %v; want released", st, err)
	}
}

// A lease the set took ends its wait for the others as soon as it is lost:
// the set can no longer be held whole, so Acquire gives up at once, saying
// which lock ended, instead of waiting on for the rest.
func TestAcquire_ALeaseLostWhileWaitingEndsTheWait(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a, b := ns.Name("early/a"), ns.Name("early/b")
	ops := newLockClient(t, ns, "ops", nil)
	held, err := ops.TryAcquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	sets := newLockClient(t, ns, "set", nil)
	got := make(chan error, 1)
	go func() {
		set, err := lockset.Acquire(t.Context(), sets, []string{a, b}, s3lock.WithLeaseDuration(3*time.Second), s3lock.WithWait(time.Minute))
		if err == nil {
			_ = set.Release(context.Background())
		}
		got <- err
	}()
	var epoch uint64
	testkit.Eventually(t, 20*time.Second, "the set to take a", func() bool {
		st, err := ops.Current(t.Context(), a)
		epoch = st.Epoch
		return err == nil && st.Held && st.Holder == "set"
	})
	if err := ops.ForceRelease(t.Context(), s3lock.Token{Name: a, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if r := lostFor(err); r != s3lock.LostForceReleased || !strings.Contains(err.Error(), a) {
			t.Errorf("Acquire = %v; want the set given up, naming %s, lost by a force-release", err, a)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the set kept waiting for b after its lease of a was lost")
	}
	if st, err := ops.Current(t.Context(), b); err != nil || st.Holder != "ops" || !st.Held {
		t.Errorf("b after the set gave up: %+v, %v; want still held by ops", st, err)
	}
}

// Bad sets are refused before any request: no name, a name twice, an
// invalid name, a client option.
func TestAcquire_RefusesBadSetsBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	counter, copt := s3test.Counting()
	c := newLockClient(t, ns, "set", nil, copt)
	a := ns.Name("bad/a")
	for _, tc := range []struct {
		names []string
		opts  []s3lock.Option
		want  error
		says  string
	}{
		{nil, nil, s3lock.ErrInvalidConfig, "at least one lock name"},
		{[]string{a, a}, nil, s3lock.ErrInvalidConfig, "named twice"},
		{[]string{a, "bad//name"}, nil, s3lock.ErrInvalidName, "bad//name"},
		{[]string{a}, []s3lock.Option{s3lock.WithHolder("x")}, s3lock.ErrInvalidConfig, "WithHolder configures the client"},
	} {
		if _, err := lockset.Acquire(t.Context(), c, tc.names, tc.opts...); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Acquire(%q) = %v; want %v saying %q", tc.names, err, tc.want, tc.says)
		}
	}
	if n := counter.Total(); n != 0 {
		t.Errorf("refused sets made %d requests; want none", n)
	}
}

// A set of n free locks costs n acquisitions: 3 requests each.
func TestAcquire_CostsOneAcquisitionPerLock(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	counter, copt := s3test.Counting()
	c := newLockClient(t, ns, "set", nil, copt)
	set, err := lockset.Acquire(t.Context(), c, []string{ns.Name("cost/a"), ns.Name("cost/b"), ns.Name("cost/c")})
	if err != nil {
		t.Fatal(err)
	}
	if n := counter.Total(); n != 9 {
		t.Errorf("Acquire of a set of 3 free locks made %d requests (%s); want 9", n, counter)
	}
	if err := set.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Check refuses what Acquire refuses, with the same errors, and returns a
// set's names in the order its leases are taken.
func TestCheck_IsAcquiresRuleAndOrder(t *testing.T) {
	t.Parallel()
	got, err := lockset.Check([]string{"net/prod", "db/prod", "app"})
	if err != nil || strings.Join(got, " ") != "app db/prod net/prod" {
		t.Errorf("Check(net/prod, db/prod, app) = %q, %v; want app db/prod net/prod", got, err)
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("l%d", i)
	}
	for _, tc := range []struct {
		names []string
		want  error
		says  string
	}{
		{nil, s3lock.ErrInvalidConfig, "at least one lock name"},
		{[]string{"a", "a"}, s3lock.ErrInvalidConfig, "named twice"},
		{[]string{"a", "bad//name"}, s3lock.ErrInvalidName, "bad//name"},
		{many, s3lock.ErrInvalidConfig, "more than 64"},
	} {
		if _, err := lockset.Check(tc.names); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Check(%d names) = %v; want %v saying %q", len(tc.names), err, tc.want, tc.says)
		}
	}
}

// A detached set stops its goroutines (TestMain's leak check) and leaves
// its leases held, in its order, for whoever resumes them by their tokens.
func TestSet_DetachHandsTheLeasesOver(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a, b := ns.Name("detach/a"), ns.Name("detach/b")
	c := newLockClient(t, ns, "set", nil)
	set, err := lockset.Acquire(t.Context(), c, []string{b, a})
	if err != nil {
		t.Fatal(err)
	}
	tokens := set.Detach()
	if len(tokens) != 2 || tokens[0].Name != a || tokens[1].Name != b {
		t.Fatalf("Detach = %+v; want the tokens of a, b in that order", tokens)
	}
	for _, tok := range tokens {
		l, err := c.Resume(t.Context(), tok)
		if err != nil {
			t.Fatalf("Resume of %s after Detach: %v", tok.Name, err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("Release of %s after Detach: %v", tok.Name, err)
		}
	}
}
