package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The line (PROTOCOL.md §13): ordered waiters are served in the order they
// joined, crashed waiters leave it, newest-wins waiters give way.

// lineFixture is a lock held by one client while waiters queue on it.
type lineFixture struct {
	ns     *s3test.Namespace
	name   string
	holder *s3lock.Lease
	viewer *s3lock.Client
}

func newLineFixture(t *testing.T, lock string) *lineFixture {
	t.Helper()
	ns := s3test.New(t)
	f := &lineFixture{ns: ns, name: ns.Name(lock), viewer: newLockClient(t, ns, "viewer", nil)}
	l, err := newLockClient(t, ns, "holder", nil).TryAcquire(t.Context(), f.name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	f.holder = l
	return f
}

// waitLine waits until the line shows exactly n waiters and returns them.
func (f *lineFixture) waitLine(t *testing.T, n int) []s3lock.Waiter {
	t.Helper()
	var ws []s3lock.Waiter
	testkit.Eventually(t, waitLimit, fmt.Sprintf("%d waiters in line", n), func() bool {
		var err error
		ws, err = f.viewer.Line(t.Context(), f.name)
		if err != nil {
			t.Fatalf("Line: %v", err)
		}
		return len(ws) == n
	})
	return ws
}

// waitJoined waits until who has a ticket in the line.
func (f *lineFixture) waitJoined(t *testing.T, who string) {
	t.Helper()
	testkit.Eventually(t, waitLimit, who+" in line", func() bool {
		ws, err := f.viewer.Line(t.Context(), f.name)
		if err != nil {
			t.Fatalf("Line: %v", err)
		}
		return slices.ContainsFunc(ws, func(w s3lock.Waiter) bool { return w.Holder == who })
	})
}

// served runs waiters that each acquire the lock with opts, note their turn
// and release it at once; it returns the order in which they were served.
type served struct {
	mu    sync.Mutex
	order []string
	errs  map[string]error
	wg    sync.WaitGroup
}

func (s *served) start(ctx context.Context, t *testing.T, c *s3lock.Client, name, who string, opts ...s3lock.Option) {
	t.Helper()
	s.wg.Go(func() {
		l, err := c.Acquire(ctx, name, opts...)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			if s.errs == nil {
				s.errs = map[string]error{}
			}
			s.errs[who] = err
			return
		}
		s.order = append(s.order, who)
		if err := l.Release(ctx); err != nil {
			t.Errorf("%s: Release: %v", who, err)
		}
	})
}

func TestLine_ServedInJoiningOrder(t *testing.T) {
	f := newLineFixture(t, "fifo")
	var s served
	var want []string
	for i := range 10 {
		who := fmt.Sprintf("waiter-%d", i)
		want = append(want, who)
		c := newLockClient(t, f.ns, who, []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
		s.start(t.Context(), t, c, f.name, who, s3lock.WithOrder(s3lock.OrderFIFO))
		f.waitLine(t, i+1) // joined: the next one starts 100 ms later
		time.Sleep(100 * time.Millisecond)
	}
	ws := f.waitLine(t, 10)
	if st, err := f.viewer.Current(t.Context(), f.name); err != nil || st.Waiters != 10 {
		t.Errorf("Current = %+v, %v; want 10 waiters", st, err)
	}
	if states, err := f.viewer.List(t.Context(), f.ns.Name("")); err != nil || len(states) != 1 || states[0].Waiters != 10 {
		t.Errorf("List = %+v, %v; want the lock, with 10 waiters", states, err)
	}
	for i, w := range ws {
		if w.Holder != want[i] || w.Position != i+1 || w.Order != s3lock.OrderFIFO || w.JoinedAt.IsZero() {
			t.Errorf("Line()[%d] = %+v; want %s at position %d, order fifo, with its join time", i, w, want[i], i+1)
		}
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if !slices.Equal(s.order, want) || len(s.errs) > 0 {
		t.Errorf("served in order %v (errors %v); want %v", s.order, s.errs, want)
	}
	if ws, err := f.viewer.Line(t.Context(), f.name); err != nil || len(ws) != 0 {
		t.Errorf("line after every waiter was served: %+v, %v; want empty", ws, err)
	}
}

func TestLine_CrashedWaiterLeavesTheLine(t *testing.T) {
	f := newLineFixture(t, "crash")
	var s served
	// The first waiter "crashes": its store becomes unreachable after it
	// joined, so it neither renews nor deletes its ticket.
	if !f.ns.Target.Local {
		t.Skip("needs the local server behind a proxy of the test's own")
	}
	proxy := s3test.NewProxy(t, f.ns.Target.Endpoint)
	tg := f.ns.Target
	tg.Endpoint = proxy.URL
	crashed, err := s3lock.New(s3test.NewClient(t, tg, s3test.WithoutRetries()), f.ns.Bucket,
		s3lock.WithHolder("crashed"), s3lock.WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	crashCtx, crash := context.WithCancel(t.Context())
	defer crash()
	go func() { _, _ = crashed.Acquire(crashCtx, f.name, s3lock.WithOrder(s3lock.OrderFIFO)) }()
	f.waitLine(t, 1)
	proxy.Blackhole()
	want := []string{"second", "third"}
	for i, who := range want {
		c := newLockClient(t, f.ns, who, nil)
		s.start(t.Context(), t, c, f.name, who, s3lock.WithOrder(s3lock.OrderFIFO))
		f.waitLine(t, i+2)
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The lock is free, but the line holds: until the crashed waiter's
	// ticket lapses, the others wait behind it (they renewed theirs all
	// along, so they keep their places past the lapse).
	time.Sleep(2 * time.Second)
	if st, err := f.viewer.Current(t.Context(), f.name); err != nil || st.Held {
		t.Fatalf("Current = %+v, %v; want the lock still free while the crashed waiter heads the line", st, err)
	}
	released := time.Now()
	s.wg.Wait()
	took := time.Since(released) + 2*time.Second
	if !slices.Equal(s.order, want) || len(s.errs) > 0 {
		t.Errorf("served %v (errors %v); want %v", s.order, s.errs, want)
	}
	// The bound: the ticket's validity plus serverSlack by the store's
	// clock (8 s), plus its one-second resolution and a line poll.
	if limit := 11 * time.Second; took > limit {
		t.Errorf("the line moved on %s after the release; want within %s", took.Round(time.Millisecond), limit)
	}
	t.Logf("the line moved past the crashed waiter %s after the release", took.Round(time.Millisecond))
}

func TestLine_SupersededWaitersGiveWay(t *testing.T) {
	f := newLineFixture(t, "newest")
	var s served
	for _, who := range []string{"run-1", "fifo-run", "run-2", "run-3"} {
		c := newLockClient(t, f.ns, who, nil)
		opt := s3lock.WithOrder(s3lock.OrderNewest)
		if who == "fifo-run" {
			opt = s3lock.WithOrder(s3lock.OrderFIFO)
		}
		s.start(t.Context(), t, c, f.name, who, opt)
		// Joined (the next one joins after it). Not "i+1 in line": run-1
		// may give way as soon as run-2 has joined, before run-3 joins (a
		// regression test: under load it did, and the count never
		// reached 4).
		f.waitJoined(t, who)
	}
	// run-1 and run-2 leave the line without the holder doing anything.
	testkit.Eventually(t, waitLimit, "the superseded runs to give up", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.errs) == 2
	})
	// Each names a newer Supersede run (run-1 the next one, unless it looked
	// only after run-2 had left already).
	for who, by := range map[string][]string{"run-1": {"run-2", "run-3"}, "run-2": {"run-3"}} {
		var se *s3lock.SupersededError
		err := s.errs[who]
		if !errors.Is(err, s3lock.ErrSuperseded) || !errors.As(err, &se) || !slices.Contains(by, se.By) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", se.By)) {
			t.Errorf("%s: %v; want ErrSuperseded naming %s", who, err, strings.Join(by, " or "))
		}
	}
	if ws := f.waitLine(t, 2); ws[0].Holder != "fifo-run" || ws[1].Holder != "run-3" {
		t.Errorf("line %+v; want fifo-run, then run-3", ws)
	}
	if f.holder.Err() != nil {
		t.Errorf("the holder's lease: %v; a Supersede waiter must not affect the holder", f.holder.Err())
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if want := []string{"fifo-run", "run-3"}; !slices.Equal(s.order, want) {
		t.Errorf("served %v; want %v", s.order, want)
	}
}

func TestLine_FreeLockGoesToTheLine(t *testing.T) {
	f := newLineFixture(t, "free")
	c := newLockClient(t, f.ns, "waiter", nil)
	var s served
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	// A waiter queues behind a holder with a very long poll interval: it
	// is at the head, but slow to notice the release.
	slow := newLockClient(t, f.ns, "slow-head", []s3lock.Option{s3lock.WithPollInterval(time.Minute)})
	s.start(ctx, t, slow, f.name, "slow-head", s3lock.WithOrder(s3lock.OrderFIFO))
	f.waitLine(t, 1)
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The lock is free, but someone is in line: an ordered TryAcquire
	// leaves it to the line; one without order takes it.
	_, err := c.TryAcquire(t.Context(), f.name, s3lock.WithOrder(s3lock.OrderFIFO))
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) || held.Ahead != 1 || held.Holder != "" || held.Epoch != 0 {
		t.Fatalf("ordered TryAcquire of a free lock with a line: %v; want ErrHeld with Ahead 1", err)
	}
	t.Logf("ordered TryAcquire: %v", err)
	l, err := c.TryAcquire(t.Context(), f.name)
	if err != nil {
		t.Fatalf("TryAcquire without order: %v; want the free lock", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop()
	s.wg.Wait()
}

func TestLine_WaiterThatGivesUpLeavesAtOnce(t *testing.T) {
	f := newLineFixture(t, "give-up")
	c := newLockClient(t, f.ns, "impatient", nil)
	var seen []int
	_, err := c.Acquire(t.Context(), f.name, s3lock.WithOrder(s3lock.OrderFIFO), s3lock.WithWait(1500*time.Millisecond),
		s3lock.WithWaitObserver(func(h *s3lock.HeldError) { seen = append(seen, h.Ahead) }))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("Acquire = %v; want the wait timeout, wrapping the holder", err)
	}
	if len(seen) == 0 {
		t.Errorf("the wait observer was never called")
	}
	if ws, err := f.viewer.Line(t.Context(), f.name); err != nil || len(ws) != 0 {
		t.Errorf("line after the waiter gave up: %+v, %v; want empty at once", ws, err)
	}
	if keys := s3test.Keys(t, f.ns.Client, f.ns.Bucket, f.name+"/lock-line/"); len(keys) != 0 {
		t.Errorf("tickets left: %v", keys)
	}
}

func TestLine_ObserverSeesItsPlace(t *testing.T) {
	f := newLineFixture(t, "observer")
	first := newLockClient(t, f.ns, "first", nil)
	ctx, stop := context.WithCancel(t.Context())
	var s served
	s.start(ctx, t, first, f.name, "first", s3lock.WithOrder(s3lock.OrderFIFO))
	f.waitLine(t, 1)
	var mu sync.Mutex
	var aheads []int
	second := newLockClient(t, f.ns, "second", nil)
	s.start(ctx, t, second, f.name, "second", s3lock.WithOrder(s3lock.OrderFIFO), s3lock.WithWaitObserver(func(h *s3lock.HeldError) {
		mu.Lock()
		aheads = append(aheads, h.Ahead)
		mu.Unlock()
	}))
	testkit.Eventually(t, waitLimit, "the second waiter to hear it has one waiter ahead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(aheads, 1)
	})
	stop()
	s.wg.Wait()
}

func TestLine_NamesCannotUseTheLinesSegment(t *testing.T) {
	for _, name := range []string{"lock-line", "a/lock-line", "a/lock-line/b"} {
		if err := s3lock.ValidateName(name); !errors.Is(err, s3lock.ErrInvalidName) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("ValidateName(%q) = %v; want the reserved segment refused", name, err)
		}
	}
	if _, err := s3lock.ParseOrder("oldest"); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("ParseOrder(oldest) = %v; want ErrInvalidConfig", err)
	}
}

// TestLine_WaitersKeepTheirPlaceLongerThanATicketLives: a ticket lapses 8 s
// after its last write by the store's clock, so waiters that wait longer
// keep their place only by their heartbeats; and since lapse is judged by
// the store's clock alone, waiters whose clocks are hours off neither lose
// their place nor make others lose theirs.
func TestLine_WaitersKeepTheirPlaceLongerThanATicketLives(t *testing.T) {
	f := newLineFixture(t, "long-wait")
	var s served
	want := []string{"clock-ahead", "clock-behind", "clock-right"}
	offsets := []time.Duration{time.Hour, -time.Hour, 0}
	for i, who := range want {
		c := newLockClient(t, f.ns, who, []s3lock.Option{s3lock.WithClock(s3test.OffsetClock{Offset: offsets[i]})})
		s.start(t.Context(), t, c, f.name, who, s3lock.WithOrder(s3lock.OrderFIFO))
		f.waitLine(t, i+1)
	}
	time.Sleep(10 * time.Second) // longer than a ticket lives without heartbeats
	ws, err := f.viewer.Line(t.Context(), f.name)
	var got []string
	for _, w := range ws {
		got = append(got, w.Holder)
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("line after 10 s: %v, %v; want %v still in line", got, err, want)
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if !slices.Equal(s.order, want) || len(s.errs) > 0 {
		t.Errorf("served %v (errors %v); want %v", s.order, s.errs, want)
	}
}

func TestLine_ServedWaiterLeavesTheLineBeforeAcquireReturns(t *testing.T) {
	f := newLineFixture(t, "leave")
	c := newLockClient(t, f.ns, "short-lived", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	got := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := c.Acquire(t.Context(), f.name, s3lock.WithOrder(s3lock.OrderFIFO))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	f.waitLine(t, 1)
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	mustRelease(t, l)
	// A process that exits right after acquiring (s3lock acquire) must not
	// leave its ticket to hold up the line until it lapses.
	if keys := s3test.Keys(t, f.ns.Client, f.ns.Bucket, f.name+"/lock-line/"); len(keys) != 0 {
		t.Errorf("tickets left when Acquire returned: %v", keys)
	}
}

func TestLine_SupersedeHeadLooksBeforeItTakesTheLock(t *testing.T) {
	f := newLineFixture(t, "newest-head")
	var s served
	fast := []s3lock.Option{s3lock.WithPollInterval(20 * time.Millisecond)}
	s.start(t.Context(), t, newLockClient(t, f.ns, "old", fast), f.name, "old", s3lock.WithOrder(s3lock.OrderNewest))
	f.waitLine(t, 1)
	s.start(t.Context(), t, newLockClient(t, f.ns, "new", fast), f.name, "new", s3lock.WithOrder(s3lock.OrderNewest))
	testkit.Eventually(t, waitLimit, "new to join", func() bool {
		ws, err := f.viewer.Line(t.Context(), f.name)
		return err == nil && len(ws) > 0 && ws[len(ws)-1].Holder == "new"
	})
	// Released at once: the head sees the release before its next
	// once-a-second look at the line, and must look before it attempts.
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if !slices.Equal(s.order, []string{"new"}) || !errors.Is(s.errs["old"], s3lock.ErrSuperseded) {
		t.Errorf("served %v, errors %v; want only new served and old superseded", s.order, s.errs)
	}
}

// flaky fails every request while down is set, as a network that is gone.
type flaky struct {
	next http.RoundTripper
	down atomic.Bool
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, errors.New("flaky: network is down")
	}
	return f.next.RoundTrip(req)
}

// TestLine_SupersedeWaiterThatLostItsPlaceGivesWay: an older Supersede
// waiter cut off for longer than its place is trusted must not come back
// behind a newer one as "the newest" and supersede it.
func TestLine_SupersedeWaiterThatLostItsPlaceGivesWay(t *testing.T) {
	f := newLineFixture(t, "newest-rejoin")
	var s served
	net := &flaky{}
	old := newLockClient(t, f.ns, "old", []s3lock.Option{s3lock.WithRequestTimeout(time.Second)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { net.next = next; return net }))
	s.start(t.Context(), t, old, f.name, "old", s3lock.WithOrder(s3lock.OrderNewest))
	f.waitLine(t, 1)
	net.down.Store(true)
	s.start(t.Context(), t, newLockClient(t, f.ns, "new", nil), f.name, "new", s3lock.WithOrder(s3lock.OrderNewest))
	time.Sleep(7 * time.Second) // old's place is no longer trusted (6 s less the margin)
	net.down.Store(false)
	testkit.Eventually(t, waitLimit, "old to give way", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.errs["old"] != nil
	})
	var se *s3lock.SupersededError
	if err := s.errs["old"]; !errors.As(err, &se) || se.By != "new" {
		t.Errorf("old: %v; want ErrSuperseded by new", err)
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if !slices.Equal(s.order, []string{"new"}) || s.errs["new"] != nil {
		t.Errorf("served %v, errors %v; want new served", s.order, s.errs)
	}
}

// lateBeat holds back a waiter's first heartbeat (a PUT with If-Match of a
// ticket) until the client gives up on it, and lands it after the client's
// read-back, as a slow network does.
type lateBeat struct {
	next   http.RoundTripper
	mu     sync.Mutex
	held   *http.Request
	body   []byte
	landed chan struct{}
}

func (lb *lateBeat) RoundTrip(req *http.Request) (*http.Response, error) {
	isBeat := req.Method == http.MethodPut && req.Header.Get("If-Match") != "" && strings.Contains(req.URL.Path, "/lock-line/")
	lb.mu.Lock()
	first := isBeat && lb.landed == nil
	if first {
		lb.body, _ = io.ReadAll(req.Body)
		lb.held, lb.landed = req.Clone(context.Background()), make(chan struct{})
	}
	landed := lb.landed
	lb.mu.Unlock()
	if first {
		<-req.Context().Done() // the request timeout
		return nil, req.Context().Err()
	}
	resp, err := lb.next.RoundTrip(req)
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/lock-line/") && landed != nil {
		lb.mu.Lock()
		held := lb.held
		lb.held = nil
		lb.mu.Unlock()
		if held != nil { // after the read-back: land it now
			held.Body = io.NopCloser(bytes.NewReader(lb.body))
			if r, err := lb.next.RoundTrip(held); err == nil {
				r.Body.Close()
			}
			close(landed)
		}
	}
	return resp, err
}

// TestLine_LateHeartbeatKeepsThePlace: a heartbeat that lands after its
// read-back found the ticket unchanged is still the waiter's own write: the
// next heartbeat's read-back must count it, not take the ticket for someone
// else's and give up the place.
func TestLine_LateHeartbeatKeepsThePlace(t *testing.T) {
	f := newLineFixture(t, "late-beat")
	lb := &lateBeat{}
	var s served
	first := newLockClient(t, f.ns, "first", []s3lock.Option{s3lock.WithRequestTimeout(500 * time.Millisecond)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { lb.next = next; return lb }))
	s.start(t.Context(), t, first, f.name, "first", s3lock.WithOrder(s3lock.OrderFIFO))
	f.waitLine(t, 1)
	s.start(t.Context(), t, newLockClient(t, f.ns, "second", nil), f.name, "second", s3lock.WithOrder(s3lock.OrderFIFO))
	f.waitLine(t, 2)
	time.Sleep(4 * time.Second) // the first heartbeat (2 s), held back, and the next
	lb.mu.Lock()
	landed := lb.landed
	lb.mu.Unlock()
	select {
	case <-landed: // (a nil channel: never held back, never landed)
	default:
		t.Fatal("the held-back heartbeat never landed: the test did not exercise it")
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if want := []string{"first", "second"}; !slices.Equal(s.order, want) || len(s.errs) > 0 {
		t.Errorf("served %v (errors %v); want %v", s.order, s.errs, want)
	}
}

// TestLine_AmbiguousJoinKeepsOneTicket: the store creates a waiter's ticket
// and the answer is lost; the SDK's retry gets 412. The waiter reads the
// ticket back, finds its nonce, and holds that one ticket — no second
// ticket, no error.
func TestLine_AmbiguousJoinKeepsOneTicket(t *testing.T) {
	f := newLineFixture(t, "ambiguous-join")
	faults := s3test.NewFaults(1, s3test.Rule{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 1, Limit: 1})
	c := newLockClient(t, f.ns, "waiter", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return faults.Wrap(next)
	}))
	var s served
	s.start(t.Context(), t, c, f.name, "waiter", s3lock.WithOrder(s3lock.OrderFIFO)) // its first PUT is the ticket's create
	ws := f.waitLine(t, 1)
	if faults.Injected()[s3test.DropResponse] != 1 || ws[0].Holder != "waiter" {
		t.Fatalf("line %+v after %v faults; want the waiter's ticket after a dropped answer", ws, faults.Injected())
	}
	time.Sleep(500 * time.Millisecond)
	if keys := s3test.Keys(t, f.ns.Client, f.ns.Bucket, f.name+"/lock-line/"); len(keys) != 1 {
		t.Errorf("tickets %v; want exactly one", keys)
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	if !slices.Equal(s.order, []string{"waiter"}) {
		t.Errorf("served %v, errors %v; want the waiter", s.order, s.errs)
	}
}

// TestLine_OrderedAcquireLeavesAFreeLockToTheLine: an ordered Acquire that
// finds the lock free while someone waits in line queues behind them, even
// if the head is slow to notice the release.
func TestLine_OrderedAcquireLeavesAFreeLockToTheLine(t *testing.T) {
	f := newLineFixture(t, "free-acquire")
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var s served
	slow := newLockClient(t, f.ns, "slow-head", []s3lock.Option{s3lock.WithPollInterval(time.Minute)})
	s.start(ctx, t, slow, f.name, "slow-head", s3lock.WithOrder(s3lock.OrderFIFO))
	f.waitLine(t, 1)
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newLockClient(t, f.ns, "newcomer", nil)
	_, err := c.Acquire(t.Context(), f.name, s3lock.WithOrder(s3lock.OrderFIFO), s3lock.WithWait(time.Second))
	var held *s3lock.HeldError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &held) || !held.Queued {
		t.Errorf("ordered Acquire of a free lock behind a waiter: %v; want it to wait its turn (and time out)", err)
	}
	if st, err := f.viewer.Current(t.Context(), f.name); err != nil || st.Held {
		t.Errorf("Current = %+v, %v; want the lock left free for the head of the line", st, err)
	}
	stop()
	s.wg.Wait()
}

// TestLine_CrashedWaiterLeavesTheLineWithoutADate: on a store that sends no
// Date header, waiters judge a ticket lapsed once they have seen it
// unchanged for its validity plus slack on their own clocks.
func TestLine_CrashedWaiterLeavesTheLineWithoutADate(t *testing.T) {
	f := newLineFixture(t, "no-date")
	// The crashed waiter: a ticket nobody renews, as a waiter SIGKILLed
	// right after it joined leaves.
	crashed := newLockClient(t, f.ns, "crashed", nil)
	ctx, crash := context.WithCancel(t.Context())
	go func() { _, _ = crashed.Acquire(ctx, f.name, s3lock.WithOrder(s3lock.OrderFIFO)) }()
	ws := f.waitLine(t, 1)
	crash() // it deletes its ticket as it leaves: put one back, unrenewed
	testkit.Eventually(t, waitLimit, "the crashed waiter to leave", func() bool {
		ws, err := f.viewer.Line(t.Context(), f.name)
		return err == nil && len(ws) == 0
	})
	putRaw(t, f.ns, ws[0].Key, []byte(`{"leaderId":"crashed","validityMs":6000,"s3lock":1,"line":true,"order":"fifo","nonce":"n","write":"w","renewals":0}`))

	var s served
	c := newLockClient(t, f.ns, "next", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return noDate{next} }))
	s.start(t.Context(), t, c, f.name, "next", s3lock.WithOrder(s3lock.OrderFIFO))
	time.Sleep(500 * time.Millisecond)
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter still waits behind a ticket nobody renews, 30 s after the release")
	}
	if !slices.Equal(s.order, []string{"next"}) {
		t.Fatalf("served %v, errors %v; want next", s.order, s.errs)
	}
	// Its own clock: validity plus slack after it first saw the ticket,
	// which was before the release.
	if took := time.Since(released); took < 5*time.Second {
		t.Errorf("served %s after the release: it cannot have judged the ticket lapsed (8 s unchanged) so soon", took)
	}
}
