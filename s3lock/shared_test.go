package s3lock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Shared leases (WithShared, PROTOCOL.md §17): any number of shared holders
// at once, or one exclusive holder alone; an exclusive acquirer that waits
// for shared holders keeps new ones out.

// timeline records when each holder trusted its lease: from Acquire's
// return to just before Release; Check finds an exclusive holder that
// overlapped anyone.
type timeline struct {
	mu    sync.Mutex
	spans []holdSpan
}

type holdSpan struct {
	who      string
	shared   bool
	from, to time.Time
	epoch    uint64
	share    string
}

func (tl *timeline) add(s holdSpan) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.spans = append(tl.spans, s)
}

// check reports every exclusive span that overlaps another span, and
// returns the most shared spans that were open at one moment.
func (tl *timeline) check(t *testing.T) (maxShared int) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i, a := range tl.spans {
		open := 0
		for j, b := range tl.spans {
			if i == j || !a.from.Before(b.to) || !b.from.Before(a.to) {
				continue
			}
			if !a.shared || !b.shared {
				if i < j || a.shared {
					t.Errorf("%s (shared %t, epoch %d) and %s (shared %t, epoch %d) held the lock at once: an exclusive holder overlapped",
						a.who, a.shared, a.epoch, b.who, b.shared, b.epoch)
				}
				continue
			}
			if b.from.Before(a.from) || b.from.Equal(a.from) && j < i {
				open++ // b was open when a began
			}
		}
		if a.shared {
			maxShared = max(maxShared, open+1)
		}
	}
	return maxShared
}

// hold acquires name with opts through c, records the span, holds it for
// work and releases it.
func (tl *timeline) hold(ctx context.Context, t *testing.T, c *s3lock.Client, who, name string, work time.Duration, opts ...s3lock.Option) {
	t.Helper()
	l, err := c.Acquire(ctx, name, opts...)
	if err != nil {
		t.Errorf("%s: Acquire: %v", who, err)
		return
	}
	from := time.Now()
	time.Sleep(work)
	to := time.Now()
	if err := l.Err(); err != nil {
		t.Errorf("%s: the lease ended while held: %v", who, err)
	}
	tok := l.Token()
	tl.add(holdSpan{who: who, shared: tok.Share != "", from: from, to: to, epoch: tok.Epoch, share: tok.Share})
	if err := l.Release(ctx); err != nil {
		t.Errorf("%s: Release: %v", who, err)
	}
}

// heldShared returns a namespace, the lock "state" in it, and reader's
// shared lease of it, released at the end of the test if it is still held.
func heldShared(t *testing.T, reader string) (*s3test.Namespace, string, *s3lock.Lease) {
	t.Helper()
	ns := s3test.New(t)
	name := ns.Name("state")
	r, err := sharedClient(t, ns, reader).TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, r)
	return ns, name, r
}

func sharedClient(t *testing.T, ns *s3test.Namespace, holder string, copts ...s3test.Option) *s3lock.Client {
	t.Helper()
	return newLockClient(t, ns, holder, []s3lock.Option{s3lock.WithLeaseDuration(10 * time.Second), s3lock.WithRequestTimeout(5 * time.Second)}, copts...)
}

// TestShared_ManyHoldersAtOnce: eight shared holders hold the lock at once,
// all with the one shared epoch as their token, each with a share of its
// own; an exclusive TryAcquire finds them and names one; Current and List
// list all eight; once they release, an exclusive acquirer gets a greater epoch.
func TestShared_ManyHoldersAtOnce(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("plans")
	var leases []*s3lock.Lease
	for i := range 8 {
		l, err := sharedClient(t, ns, fmt.Sprintf("reader-%d", i)).TryAcquire(t.Context(), name, s3lock.WithShared())
		if err != nil {
			t.Fatalf("reader %d: TryAcquire shared: %v", i, err)
		}
		leases = append(leases, l)
	}
	shares := map[string]bool{}
	for i, l := range leases {
		tok := l.Token()
		if tok.Epoch != leases[0].Token().Epoch || tok.Share == "" || shares[tok.Share] {
			t.Errorf("reader %d: token %+v; want epoch %d and a share of its own", i, tok, leases[0].Token().Epoch)
		}
		shares[tok.Share] = true
		if err := l.Err(); err != nil {
			t.Errorf("reader %d: lease ended: %v", i, err)
		}
	}
	writer := sharedClient(t, ns, "writer")
	_, err := writer.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.As(err, &held) || !held.Shared || held.Waiting != 8 || !slices.Contains([]string{"reader-0", "reader-1", "reader-2",
		"reader-3", "reader-4", "reader-5", "reader-6", "reader-7"}, held.Holder) {
		t.Fatalf("exclusive TryAcquire over 8 shared holders = %v (%+v); want a *HeldError, Shared, Waiting 8, naming a reader", err, held)
	}
	st, err := writer.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Shared || len(st.Holders) != 8 || !st.Held {
		t.Errorf("Current = shared %t, held %t, %d holders; want shared, held, 8 holders", st.Shared, st.Held, len(st.Holders))
	}
	for _, h := range st.Holders {
		if h.Share == "" || !shares[h.Share] || h.Key != (s3lock.Token{Name: name, Epoch: h.Epoch, Share: h.Share}).Key() {
			t.Errorf("Current's holder %+v; want one of the readers' shares, with its id and key", h)
		}
	}
	states, err := writer.List(t.Context(), ns.Name(""))
	if err != nil || len(states) != 1 || !states[0].Shared || len(states[0].Holders) != 8 || !states[0].Held {
		t.Errorf("List = %+v, %v; want the lock, shared, held by 8", states, err)
	}
	for _, l := range leases {
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	w, err := writer.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("exclusive TryAcquire after every reader released: %v", err)
	}
	mustRelease(t, w)
	if w.Token().Epoch <= leases[0].Token().Epoch || w.Token().Share != "" {
		t.Errorf("exclusive token %+v after readers of epoch %d; want a greater epoch and no share", w.Token(), leases[0].Token().Epoch)
	}
}

// TestShared_ExclusiveExcludesEveryone: readers and writers contend for one
// lock, through dropped answers, 5xx and 409s; no writer's span overlaps
// anyone's, and readers do overlap.
func TestShared_ExclusiveExcludesEveryone(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var tl timeline
	var wg sync.WaitGroup
	var injectors []*s3test.Faults
	for w := range 8 {
		f := s3test.NewFaults(uint64(w+700),
			s3test.Rule{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 0.05},
			s3test.Rule{Fault: s3test.ServerErrorAfter, Ops: []string{"PutObject"}, Probability: 0.03},
			s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 0.03},
			s3test.Rule{Fault: s3test.Conflict, Probability: 0.05},
		)
		injectors = append(injectors, f)
		c := sharedClient(t, ns, fmt.Sprintf("worker-%d", w), s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
		wg.Go(func() {
			for round := range 4 {
				var opts []s3lock.Option
				if (w+round)%3 != 0 { // two in three are readers
					opts = append(opts, s3lock.WithShared())
				}
				tl.hold(ctx, t, c, fmt.Sprintf("worker-%d round %d", w, round), name, 150*time.Millisecond, opts...)
			}
		})
	}
	wg.Wait()
	for _, f := range injectors {
		f.Disable()
	}
	if most := tl.check(t); most < 2 {
		t.Errorf("at most %d shared holder held at once: readers never overlapped", most)
	}
	if n := len(tl.spans); n != 32 {
		t.Errorf("%d holds; want 32", n)
	}
}

// TestShared_NewReadersWaitBehindAPendingWriter: while a writer waits for
// a reader, a new reader waits too (no writer starvation, PROTOCOL.md §17
// G2); the writer is served when the first reader leaves, and the new
// reader after the writer.
func TestShared_NewReadersWaitBehindAPendingWriter(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	r1, err := sharedClient(t, ns, "reader-1").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	writer := sharedClient(t, ns, "writer")
	got := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := writer.Acquire(t.Context(), name)
		if err != nil {
			t.Errorf("writer: Acquire: %v", err)
		}
		got <- l
	}()
	viewer := sharedClient(t, ns, "viewer")
	testkit.Eventually(t, waitLimit, "the writer's pending epoch to appear", func() bool {
		st, err := viewer.Current(t.Context(), name)
		return err == nil && st.Pending
	})
	_, err = sharedClient(t, ns, "reader-2").TryAcquire(t.Context(), name, s3lock.WithShared())
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "writer" || !held.Pending {
		t.Fatalf("a new reader's TryAcquire while a writer waits = %v; want a *HeldError naming the writer, Pending", err)
	}
	r2got := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := sharedClient(t, ns, "reader-2").Acquire(t.Context(), name, s3lock.WithShared())
		if err != nil {
			t.Errorf("reader 2: Acquire: %v", err)
		}
		r2got <- l
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("the writer acquired while reader 1 still held its share")
	case <-r2got:
		t.Fatal("reader 2 acquired while the writer waited: a writer must not be starved by new readers")
	default:
	}
	if err := r1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		return
	}
	select {
	case <-r2got:
		t.Fatal("reader 2 acquired while the writer held the lock")
	case <-time.After(300 * time.Millisecond):
	}
	wEpoch := w.Token().Epoch
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r2 := <-r2got
	if r2 == nil {
		return
	}
	mustRelease(t, r2)
	if r2.Token().Epoch <= wEpoch || wEpoch <= r1.Token().Epoch {
		t.Errorf("epochs reader 1 %d, writer %d, reader 2 %d; want them increasing", r1.Token().Epoch, wEpoch, r2.Token().Epoch)
	}
}

// TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares: a writer
// that gave up waiting for a reader leaves its epoch pending; the next
// writer finds the reader's share still held, and does not take the lock
// (PROTOCOL.md §17: a pending epoch stays pending until a write after its
// wait).
func TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares(t *testing.T) {
	t.Parallel()
	ns, name, r := heldShared(t, "reader")
	w1 := sharedClient(t, ns, "writer-1")
	_, err := w1.Acquire(t.Context(), name, s3lock.WithWait(time.Second))
	if !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("writer 1's Acquire within 1s while a reader holds = %v; want it to give up", err)
	}
	w2, err := sharedClient(t, ns, "writer-2").TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if err == nil {
		mustRelease(t, w2)
		t.Fatalf("writer 2 acquired epoch %d while the reader holds its share (epoch %d)", w2.Token().Epoch, r.Token().Epoch)
	}
	if !errors.As(err, &held) || !held.Shared || held.Holder != "reader" {
		t.Errorf("writer 2's TryAcquire = %v; want a *HeldError naming the reader's share", err)
	}
	if err := r.Err(); err != nil {
		t.Errorf("the reader's lease ended: %v", err)
	}
}

// TestShared_WriterWaitsForSharesOfOlderSharedEpochs: reader 1 holds a
// share of epoch 1; a writer gives up at epoch 2 (pending); reader 2
// creates shared epoch 3 above it. The next writer must find reader 1's
// share, not only epoch 3's.
func TestShared_WriterWaitsForSharesOfOlderSharedEpochs(t *testing.T) {
	t.Parallel()
	ns, name, r1 := heldShared(t, "reader-1")
	_, err := sharedClient(t, ns, "writer-1").Acquire(t.Context(), name, s3lock.WithWait(time.Second))
	if err == nil {
		t.Fatal("writer 1 acquired while reader 1 holds")
	}
	r2, err := sharedClient(t, ns, "reader-2").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatalf("reader 2 over a given-up pending epoch: %v", err)
	}
	if r2.Token().Epoch <= r1.Token().Epoch+1 {
		t.Errorf("reader 2's epoch %d; want a shared epoch above writer 1's (reader 1's is %d)", r2.Token().Epoch, r1.Token().Epoch)
	}
	if err := r2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	w2, err := sharedClient(t, ns, "writer-2").TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if err == nil {
		mustRelease(t, w2)
		t.Fatalf("writer 2 acquired epoch %d while reader 1 holds a share of epoch %d", w2.Token().Epoch, r1.Token().Epoch)
	}
	if !errors.As(err, &held) || held.Holder != "reader-1" {
		t.Errorf("writer 2's TryAcquire = %v; want a *HeldError naming reader 1", err)
	}
}

// TestLine_SharedWaitersBehindAWriterWait: in line (OrderFIFO), a writer
// that joined before two readers is served before them, although the
// readers could share — each reader counts the writer, and only the writer,
// ahead of it — then the two readers are served together.
func TestLine_SharedWaitersBehindAWriterWait(t *testing.T) {
	f := newLineFixture(t, "fifo-shared")
	fifo := s3lock.WithOrder(s3lock.OrderFIFO)
	var tl timeline
	var wg sync.WaitGroup
	var mu sync.Mutex
	ahead := map[string]int{} // the most waiters each reader was told were ahead of it
	start := func(who string, opts ...s3lock.Option) {
		c := newLockClient(t, f.ns, who, []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
		observe := s3lock.WithWaitObserver(func(h *s3lock.HeldError) {
			mu.Lock()
			defer mu.Unlock()
			ahead[who] = max(ahead[who], h.Ahead)
		})
		wg.Go(func() { tl.hold(t.Context(), t, c, who, f.name, 400*time.Millisecond, append(opts, fifo, observe)...) })
		f.waitJoined(t, who)
	}
	start("writer")
	start("reader-1", s3lock.WithShared())
	start("reader-2", s3lock.WithShared())
	testkit.Eventually(t, waitLimit, "each reader to count the writer ahead of it", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ahead["reader-1"] >= 1 && ahead["reader-2"] >= 1
	})
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, r := range []string{"reader-1", "reader-2"} {
		if ahead[r] != 1 {
			t.Errorf("%s was told of %d waiters ahead of it; want 1, the writer (a shared waiter does not wait for shared ones)", r, ahead[r])
		}
	}
	if most := tl.check(t); most != 2 {
		t.Errorf("at most %d readers held at once; want the two readers together", most)
	}
	var writer holdSpan
	for _, s := range tl.spans {
		if s.who == "writer" {
			writer = s
		}
	}
	for _, s := range tl.spans {
		if s.shared && s.from.Before(writer.to) {
			t.Errorf("%s was served at epoch %d before the writer (epoch %d), which joined the line before it", s.who, s.epoch, writer.epoch)
		}
	}
}

// TestRequestCounts_Shared: a shared acquire costs a constant number of
// requests whatever the number of shared holders (PROTOCOL.md §17): 4 for
// a lock never held (LIST, the shared epoch's create, the share's create,
// the check's LIST), 5 over a released exclusive epoch (and its GET), 4 to
// join a shared epoch held by 8 or 64; its release 2 (the release and
// the share's delete). An exclusive acquire of a free lock stays 3.
func TestRequestCounts_Shared(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	counter, withCounter := counting()
	c := newLockClient(t, ns, "counted", nil, withCounter)
	want := func(what string, n int) {
		t.Helper()
		if got := counter.Total(); got != n {
			t.Errorf("%s: %d requests (%s); want %d", what, got, counter.String(), n)
		}
		counter.Reset()
	}
	never := ns.Name("never-held")
	l, err := c.TryAcquire(t.Context(), never, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	want("shared acquire of a lock never held", 4)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	want("shared release", 2)

	unheld := ns.Name("unheld")
	x, err := c.TryAcquire(t.Context(), unheld)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	first, err := c.TryAcquire(t.Context(), unheld, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, first)
	want("shared acquire over a released exclusive epoch", 5)

	holders := 1
	for _, n := range []int{8, 64} {
		for holders < n {
			l, err := newLockClient(t, ns, fmt.Sprintf("reader-%d", holders), nil).TryAcquire(t.Context(), unheld, s3lock.WithShared())
			if err != nil {
				t.Fatal(err)
			}
			mustRelease(t, l)
			holders++
		}
		counter.Reset()
		l, err := c.TryAcquire(t.Context(), unheld, s3lock.WithShared())
		if err != nil {
			t.Fatal(err)
		}
		mustRelease(t, l)
		holders++
		want(fmt.Sprintf("shared acquire beside %d shared holders", n), 4)
	}

	free := ns.Name("free")
	e, err := c.TryAcquire(t.Context(), free)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, e)
	want("exclusive acquire of a lock never held", 3)
}

// TestShared_ReaderWithdrawsWhenAWriterCameBeforeItsShareLanded: a reader
// that read the lock shared is paused before its share's create; a writer
// takes the lock meanwhile (it finds no share to wait for). When the
// reader's share lands, its check lists the writer's epoch above it: it
// withdraws the share and does not get the lock (PROTOCOL.md §17, the
// check).
func TestShared_ReaderWithdrawsWhenAWriterCameBeforeItsShareLanded(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	first, err := sharedClient(t, ns, "reader-0").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(t.Context()); err != nil { // the shared epoch stays open, with no share
		t.Fatal(err)
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reader := sharedClient(t, ns, "reader", s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/lock-shared/") {
				once.Do(func() { close(paused); <-resume })
			}
			return next.RoundTrip(req)
		})
	}))
	type result struct {
		l   *s3lock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := reader.TryAcquire(t.Context(), name, s3lock.WithShared())
		got <- result{l, err}
	}()
	<-paused
	w, err := sharedClient(t, ns, "writer").TryAcquire(t.Context(), name)
	close(resume)
	if err != nil {
		t.Fatalf("writer: TryAcquire while the reader's share had not landed: %v", err)
	}
	mustRelease(t, w)
	r := <-got
	if r.err == nil {
		mustRelease(t, r.l)
		t.Fatalf("the reader got share %s of epoch %d while the writer holds epoch %d", r.l.Token().Share, r.l.Token().Epoch, w.Token().Epoch)
	}
	var held *s3lock.HeldError
	if !errors.As(r.err, &held) || held.Holder != "writer" {
		t.Errorf("reader's TryAcquire = %v; want a *HeldError naming the writer", r.err)
	}
	if err := w.Err(); err != nil {
		t.Errorf("the writer's lease ended: %v", err)
	}
	st, err := sharedClient(t, ns, "viewer").Current(t.Context(), name)
	if err != nil || st.Shared || len(st.Holders) != 0 {
		t.Errorf("Current = %+v, %v; want the writer's exclusive lease and no share left", st, err)
	}
}

// TestShared_WatchFollowsSharedHoldersAndAWaitingWriter: Watch yields a
// state when a shared holder joins or leaves, one when a writer waits for
// them (Pending), and the writer's once it holds the lock.
func TestShared_WatchFollowsSharedHoldersAndAWaitingWriter(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	states := make(chan s3lock.State, 64)
	viewer := newLockClient(t, ns, "viewer", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	go func() {
		for st, err := range viewer.Watch(ctx, name) {
			if err != nil {
				t.Errorf("Watch: %v", err)
				return
			}
			states <- st
		}
	}()
	next := func(what string, ok func(s3lock.State) bool) {
		t.Helper()
		for {
			select {
			case st := <-states:
				if ok(st) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("Watch never yielded %s", what)
			}
		}
	}
	next("the free lock", func(st s3lock.State) bool { return st.Epoch == 0 })
	r1, err := sharedClient(t, ns, "reader-1").TryAcquire(ctx, name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	next("one shared holder", func(st s3lock.State) bool {
		return st.Shared && len(st.Holders) == 1 && st.Holders[0].Holder == "reader-1"
	})
	r2, err := sharedClient(t, ns, "reader-2").TryAcquire(ctx, name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	next("two shared holders", func(st s3lock.State) bool { return st.Shared && len(st.Holders) == 2 })
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next("one shared holder again", func(st s3lock.State) bool { return st.Shared && len(st.Holders) == 1 })
	got := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := sharedClient(t, ns, "writer").Acquire(ctx, name)
		if err != nil {
			t.Errorf("writer: %v", err)
		}
		got <- l
	}()
	next("the writer waiting for reader 1", func(st s3lock.State) bool {
		return st.Pending && st.Holder == "writer" && len(st.Holders) == 1 && st.Holders[0].Holder == "reader-1"
	})
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		return
	}
	mustRelease(t, w)
	next("the writer holding the lock", func(st s3lock.State) bool {
		return st.Held && !st.Pending && !st.Shared && st.Holder == "writer" && len(st.Holders) == 0
	})
}

// TestShared_AmbiguousShareCreate: the store applies a share's create but
// its answer is lost; the reader reads the key back, finds its own write,
// and holds the share: one share, trusted, and nothing left behind after
// its release.
func TestShared_AmbiguousShareCreate(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	var once sync.Once
	dropped := false
	reader := sharedClient(t, ns, "reader", s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err == nil && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/lock-shared/") {
				once.Do(func() {
					resp.Body.Close()
					resp, err, dropped = nil, errors.New("connection reset by peer (the test dropped the answer)"), true
				})
			}
			return resp, err
		})
	}))
	l, err := reader.TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatalf("shared TryAcquire whose share's create answer was lost: %v", err)
	}
	if !dropped {
		t.Fatal("the test dropped no answer")
	}
	viewer := sharedClient(t, ns, "viewer")
	st, err := viewer.Current(t.Context(), name)
	if err != nil || !st.Shared || len(st.Holders) != 1 || st.Holders[0].Key != l.Token().Key() {
		t.Fatalf("Current = %+v, %v; want one shared holder, the reader's share %s", st, err, l.Token().Key())
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := viewer.Current(t.Context(), name); err != nil || st.Held || len(st.Holders) != 0 || st.Phase() != s3lock.PhaseFree {
		t.Errorf("Current after the release = %+v, %v; want no holder", st, err)
	}
}

// TestShared_CrashedReaderLapsesByTheStoresClock: a reader that stops
// renewing keeps a writer out until its share lapsed by the store's clock —
// its validity plus serverSlack after its last write, less the store's
// one-second resolution — and not before; then the writer takes the lock.
func TestShared_CrashedReaderLapsesByTheStoresClock(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	const lease = 3 * time.Second
	reader := newLockClient(t, ns, "reader", []s3lock.Option{s3lock.WithLeaseDuration(lease)})
	sent := time.Now()
	if _, err := reader.TryAcquire(t.Context(), name, s3lock.WithShared(), s3lock.WithoutAutoRenew()); err != nil {
		t.Fatal(err)
	}
	w, err := sharedClient(t, ns, "writer").Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	got := time.Since(sent)
	mustRelease(t, w)
	// serverSlack (1 s) less Last-Modified's resolution (up to 1 s): the
	// writer may not come before the lease itself has passed.
	if got < lease {
		t.Errorf("the writer took the lock %s after the crashed reader's share was created; a share of %s may not lapse before %s",
			got.Round(time.Millisecond), lease, lease)
	}
	if tok := w.Token(); tok.Share != "" || tok.Epoch < 2 {
		t.Errorf("the writer's token %+v; want an exclusive epoch above the shared one", tok)
	}
}

// TestSlots_AndSharedDoNotMix: WithShared with WithSlots is refused before
// any request; a shared acquirer that finds a slot lock, and a slot
// acquirer that finds a lock with shared holders, get a *SlotsError that
// says so.
func TestSlots_AndSharedDoNotMix(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := sharedClient(t, ns, "x")
	if _, err := c.TryAcquire(t.Context(), ns.Name("a"), s3lock.WithShared(), s3lock.WithSlots(3)); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("WithShared and WithSlots(3) = %v; want ErrInvalidConfig", err)
	}
	slots := ns.Name("slots")
	l, err := c.TryAcquire(t.Context(), slots, s3lock.WithSlots(3))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	_, err = c.TryAcquire(t.Context(), slots, s3lock.WithShared())
	if !errors.Is(err, s3lock.ErrSlotsMismatch) || !strings.Contains(err.Error(), "WithShared") {
		t.Errorf("a shared acquire of a slot lock = %v; want ErrSlotsMismatch naming WithShared", err)
	}
	shared := ns.Name("shared")
	r, err := c.TryAcquire(t.Context(), shared, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, r)
	_, err = c.Acquire(t.Context(), shared, s3lock.WithSlots(3), s3lock.WithWait(time.Second))
	if !errors.Is(err, s3lock.ErrSlotsMismatch) || !strings.Contains(err.Error(), "shared") {
		t.Errorf("a slot acquire of a lock with shared holders = %v; want ErrSlotsMismatch saying it has shared holders", err)
	}
}

// TestShared_AWritersWaitForSharesIsAWait: an exclusive Acquire that waits
// for shared holders waits as it would for a holder: WithWait bounds it
// (not the bound on attempts), the error says who held the lock, and the
// wait observer hears of the shared holders.
func TestShared_AWritersWaitForSharesIsAWait(t *testing.T) {
	t.Parallel()
	ns, name, r := heldShared(t, "reader")
	var seen []*s3lock.HeldError
	began := time.Now()
	_, err := sharedClient(t, ns, "writer").Acquire(t.Context(), name, s3lock.WithWait(2*time.Second),
		s3lock.WithWaitObserver(func(h *s3lock.HeldError) { seen = append(seen, h) }))
	took := time.Since(began)
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) || !held.Shared || held.Holder != "reader" || held.Share != r.Token().Share ||
		!strings.Contains(err.Error(), "wait (2s) ran out") || strings.Contains(err.Error(), "too slowly") {
		t.Errorf("a writer's Acquire with WithWait(2s) over a shared holder = %v; want the wait to run out, naming the reader's share", err)
	}
	if took > 8*time.Second {
		t.Errorf("the writer gave up after %s; WithWait(2s) bounds its wait for the shares", took.Round(time.Millisecond))
	}
	if len(seen) == 0 || !seen[0].Shared || seen[0].Waiting != 1 || seen[0].Holder != "reader" {
		t.Errorf("the wait observer heard %+v; want the reader's share, 1 shared holder", seen)
	}
	if err := r.Err(); err != nil {
		t.Errorf("the reader's lease ended: %v", err)
	}
}

// TestShared_AdoptingAPendingEpochOrAShareCannotBypassTheWait: a writer's
// pending epoch, adopted by its epoch alone (no nonce, as an import or an
// operator does), is refused while the shares it waits for are held — it
// would be trusted beside them — and a share adopted by its id alone is
// refused while that writer waits above it (it may be a share its reader
// withdrew, which the writer does not wait for). With the share's nonce
// (its holder's token) it is still its holder's.
func TestShared_AdoptingAPendingEpochOrAShareCannotBypassTheWait(t *testing.T) {
	t.Parallel()
	ns, name, r := heldShared(t, "reader")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := sharedClient(t, ns, "writer").Acquire(ctx, name); err == nil {
			mustRelease(t, l)
		}
	}()
	op := sharedClient(t, ns, "operator")
	var pending s3lock.State
	testkit.Eventually(t, waitLimit, "the writer's pending epoch", func() bool {
		st, err := op.Current(t.Context(), name)
		pending = st
		return err == nil && st.Pending
	})
	_, err := op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: pending.Epoch}, s3lock.WithoutAutoRenew())
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) || !held.Shared || held.Holder != "reader" {
		t.Errorf("Resume of the pending epoch %d by its epoch alone = %v; want ErrHeld naming the reader's share", pending.Epoch, err)
	}
	if _, err := op.Lookup(t.Context(), s3lock.Token{Name: name, Epoch: pending.Epoch}); !errors.Is(err, s3lock.ErrHeld) {
		t.Errorf("Lookup of the pending epoch by its epoch alone = %v; want ErrHeld", err)
	}
	tok := r.Token()
	_, err = op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: tok.Epoch, Share: tok.Share}, s3lock.WithoutAutoRenew())
	if !errors.Is(err, s3lock.ErrHeld) || !strings.Contains(err.Error(), "writer") {
		t.Errorf("Resume of a share by its id alone while a writer waits above it = %v; want ErrHeld naming the writer", err)
	}
	if st, err := op.Lookup(t.Context(), tok); err != nil || st.Share != tok.Share || !st.Held {
		t.Errorf("Lookup of the reader's own token = %+v, %v; want its share, held", st, err)
	}
	cancel()
	<-done
}

// TestShared_OrderNewestSharedWaitersDoNotDisplaceOlderOnes: two shared
// OrderNewest waiters behind an exclusive holder: only a *newer* waiter
// displaces an older one; the newer is never superseded by the older.
func TestShared_OrderNewestSharedWaitersDoNotDisplaceOlderOnes(t *testing.T) {
	f := newLineFixture(t, "newest-shared")
	newest := []s3lock.Option{s3lock.WithShared(), s3lock.WithOrder(s3lock.OrderNewest)}
	type result struct {
		l   *s3lock.Lease
		err error
	}
	older, newer := make(chan result, 1), make(chan result, 1)
	start := func(who string, out chan result) {
		c := newLockClient(t, f.ns, who, []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
		go func() {
			l, err := c.Acquire(t.Context(), f.name, newest...)
			out <- result{l, err}
		}()
		f.waitJoined(t, who)
	}
	start("older", older)
	start("newer", newer)
	o := <-older
	if !errors.Is(o.err, s3lock.ErrSuperseded) {
		t.Errorf("the older shared OrderNewest waiter = %v; want ErrSuperseded by the newer", o.err)
	}
	if err := f.holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := <-newer
	if n.err != nil {
		t.Fatalf("the newer shared OrderNewest waiter = %v; want the lock", n.err)
	}
	mustRelease(t, n.l)
}

// TestShared_ReleaseOfAForceReleasedShareIsLost: a share an operator
// force-released (marked released) is lost to its holder: its Release says
// so rather than report a release.
func TestShared_ReleaseOfAForceReleasedShareIsLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	r, err := newLockClient(t, ns, "reader", []s3lock.Option{s3lock.WithLeaseDuration(10 * time.Second)}).
		TryAcquire(t.Context(), name, s3lock.WithShared(), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := sharedClient(t, ns, "operator").ForceRelease(t.Context(), r.Token()); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "Release of a force-released share", r.Release(t.Context()), s3lock.LostForceReleased)
}
