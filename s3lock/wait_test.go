package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestAcquire_WaitsForRelease: Acquire shows the wait observer the lease it waits on, and takes the lock once it is released.
func TestAcquire_WaitsForRelease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a := newLockClient(t, ns, "alice", nil)
	b := newLockClient(t, ns, "bob", []s3lock.Option{s3lock.WithPollInterval(20 * time.Millisecond)})
	name := ns.Name("wait")

	la, err := a.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	observed := make(chan *s3lock.HeldError, 16)
	got := make(chan *s3lock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := b.Acquire(t.Context(), name, s3lock.WithWaitObserver(func(h *s3lock.HeldError) {
			select {
			case observed <- h:
			default:
			}
		}))
		got <- l
		errc <- err
	}()
	h := <-observed // the waiter saw alice's lease before anything was released
	if h.Holder != "alice" || h.Epoch != 1 {
		t.Errorf("wait observer saw %+v; want alice at epoch 1", h)
	}
	if err := la.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if err := <-errc; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	mustRelease(t, lb)
	if lb.Token().Epoch != 2 {
		t.Errorf("epoch = %d; want 2", lb.Token().Epoch)
	}
}

// TestAcquire_GivesUpWhenContextEnds: Acquire on a lock that stays held returns when ctx ends, wrapping the holder's *HeldError.
func TestAcquire_GivesUpWhenContextEnds(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	a := newLockClient(t, ns, "alice", nil)
	b := newLockClient(t, ns, "bob", nil)
	name := ns.Name("busy")
	la, err := a.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, la)

	// Long enough for a first attempt on a loaded machine (under the race
	// detector, 500 ms ran out before any attempt found the lock held).
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = b.Acquire(ctx, name)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("Acquire with a short deadline = %v; want DeadlineExceeded wrapping ErrHeld", err)
	}
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "alice" {
		t.Errorf("last cause = %v; want alice's HeldError", err)
	}
}

// TestAcquire_WithWaitReportsAFailingStoreAtOnce: with WithWait, a store
// that fails the first attempt is reported at once, not waited out: the
// error is the store's (ErrUnavailable), not a timed-out wait at the end of
// ctx, and the attempt made no more requests than TryAcquire would.
func TestAcquire_WithWaitReportsAFailingStoreAtOnce(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1, s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 1})
	counter := &s3test.Counter{}
	c := newLockClient(t, ns, "impatient", nil, s3test.WithoutRetries(),
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return counter.Wrap(f.Wrap(next)) }))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := c.Acquire(ctx, ns.Name("down"), s3lock.WithWait(time.Minute))
	if !errors.Is(err, s3lock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Acquire(WithWait) against a failing store = %v (ctx: %v); want its ErrUnavailable at once", err, ctx.Err())
	}
	// On a directory bucket the SDK's CreateSession comes first, and fails.
	if n := counter.Total() + counter.Sessions(); n != 1 {
		t.Errorf("Acquire(WithWait) made %d requests (%v, %d sessions); want the first attempt's one LIST", n, counter, counter.Sessions())
	}
}

// TestAcquire_WithWaitWaitsOnceHeld: once WithWait's Acquire has found the
// lock held it waits as Acquire does, riding out transient failures, and
// takes the lock when its holder releases it.
func TestAcquire_WithWaitWaitsOnceHeld(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("busy")
	holder := newLockClient(t, ns, "holder", nil)
	f := s3test.NewFaults(2)
	waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(20 * time.Millisecond)}, s3test.WithoutRetries(),
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))

	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var observed atomic.Int32
	sawHeld := make(chan struct{})
	observe := func(*s3lock.HeldError) {
		if observed.Add(1) == 1 {
			close(sawHeld)
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got, err := waiter.Acquire(ctx, name, s3lock.WithWait(time.Minute), s3lock.WithWaitObserver(observe))
		if err == nil {
			err = got.Release(ctx)
		}
		done <- err
	}()
	<-sawHeld
	// The store fails the next three attempts' LISTs (the polls are GETs):
	// a waiter that still failed fast would return the first of them.
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Ops: []string{"ListObjectsV2"}, Probability: 1, Limit: 3})
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Acquire(WithWait) after finding the lock held = %v; want the lock once it was released", err)
	}
	if n := f.Injected()[s3test.ServerErrorBefore]; n != 3 {
		t.Errorf("%d of the attempts' LISTs failed; want 3 ridden out", n)
	}
}

// TestAcquire_WaitTimeoutCountsFromFindingTheLockHeld: WithWait
// bounds the wait for a holder, not the first attempt: a free lock on a
// slow store is taken although the attempt outlasts the timeout, and a held
// lock is given up once the timeout has passed since it was found held,
// with ctx still far from its end.
func TestAcquire_WaitTimeoutCountsFromFindingTheLockHeld(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("patient")
	slow := s3test.NewFaults(3, s3test.Rule{Fault: s3test.Latency, Probability: 1, Delay: 100 * time.Millisecond, Fixed: true})
	c := newLockClient(t, ns, "slow-store", nil,
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return slow.Wrap(next) }))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l, err := c.Acquire(ctx, name, s3lock.WithWait(time.Millisecond), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Acquire of a free lock on a slow store with a 1ms wait timeout = %v; want the lock", err)
	}
	mustRelease(t, l)

	other := newLockClient(t, ns, "other", nil)
	_, err = other.Acquire(ctx, name, s3lock.WithWait(300*time.Millisecond))
	var held *s3lock.HeldError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &held) || held.Holder != "slow-store" || ctx.Err() != nil {
		t.Fatalf("Acquire of a held lock with a 300ms wait timeout = %v; want a timed-out wait for slow-store's lease", err)
	}
	if _, err := other.Acquire(ctx, name, s3lock.WithWait(0)); !errors.As(err, &held) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WithWait(0) = %v; want the held lock reported at once, as TryAcquire does", err)
	}
	if _, err := other.Acquire(ctx, name, s3lock.WithWait(-time.Second)); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("WithWait(-1s) = %v; want ErrInvalidConfig", err)
	}
}

// TestWait_SaysWhatEndedItInWords: a wait that ends says what ended it — its
// WithWait, the caller's deadline, or the caller's cancellation with the
// cause it gave — where it said Go's "context deadline exceeded" and
// "context canceled" (issue 36); the error still matches the context's.
func TestWait_SaysWhatEndedItInWords(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("ended")
	held, err := newLockClient(t, ns, "holder", nil).TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, held)
	c := newLockClient(t, ns, "waiter", nil)

	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context // a context that ends after the lock was found held
		opts []s3lock.Option
		says string
		is   error
	}{
		{"WithWait", func(t *testing.T) context.Context { t.Helper(); return t.Context() }, []s3lock.Option{s3lock.WithWait(time.Second)},
			"the wait (1s) ran out", context.DeadlineExceeded},
		{"the caller's deadline", func(t *testing.T) context.Context {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			t.Cleanup(cancel)
			return ctx
		}, nil, "the time the caller allowed ran out", context.DeadlineExceeded},
		{"the caller's cancellation", func(t *testing.T) context.Context {
			t.Helper()
			ctx, stop := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { stop(errors.New("interrupted by SIGINT")) })
			return ctx
		}, nil, "the caller stopped waiting: interrupted by SIGINT", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Acquire(tc.ctx(t), name, tc.opts...)
			if !errors.Is(err, tc.is) || !errors.Is(err, s3lock.ErrHeld) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Acquire = %v; want it to match %v and ErrHeld, saying %q", err, tc.is, tc.says)
			}
			if msg := err.Error(); strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "context canceled") {
				t.Errorf("Acquire's error %q speaks Go", msg)
			}
		})
	}
}

// steppingClock is a clock whose time moves only when it is told to: After
// records the wait asked for, moves the time on by it and fires at once.
type steppingClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
	// enough is called with the number of waits so far, after each.
	enough func(n int)
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	n, now := len(c.waits), c.now
	c.mu.Unlock()
	c.enough(n)
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

func (c *steppingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A waiter's polls start one poll interval apart at most, start to start,
// however long each GET takes (and at least 90% of it, so that waiters do
// not poll in step): a release is read within one interval and a GET. On a
// clock that moves only by the waits asked for and by each GET's time,
// every wait plus the GET before it is within [0.9, 1] poll intervals.
func TestWait_PollsStartOneIntervalApartWhateverTheStoresLatency(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("poll-schedule")
	holder := newLockClient(t, ns, "holder", nil)
	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	const poll, getTakes, polls = 200 * time.Millisecond, 80 * time.Millisecond, 20
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clk := &steppingClock{now: time.Now(), enough: func(n int) {
		if n >= polls {
			cancel()
		}
	}}
	slowGets := s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			if q := r.URL.Query(); r.Method == http.MethodGet && !q.Has("list-type") && !q.Has("session") {
				clk.advance(getTakes) // an object GET (the poll) takes getTakes
			}
			return next.RoundTrip(r)
		})
	})
	waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithClock(clk), s3lock.WithPollInterval(poll)}, slowGets)
	if _, err := waiter.Acquire(ctx, name); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire of a held lock = %v; want it still waiting when cancelled", err)
	}
	clk.mu.Lock()
	defer clk.mu.Unlock()
	if len(clk.waits) < polls {
		t.Fatalf("%d waits; want %d", len(clk.waits), polls)
	}
	// The first wait follows the attempt, whose requests differ by store
	// (a directory bucket's session, its listing); the others follow a poll.
	for i, w := range clk.waits[1:polls] {
		if start := w + getTakes; start < poll*9/10 || start > poll {
			t.Errorf("wait %d: %s after a %s GET: polls %s apart, start to start; want within [%s, %s]",
				i, w, getTakes, start, poll*9/10, poll)
		}
	}
}
