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

// Shared leases (WithShared, PROTOCOL.md §16): any number of shared holders
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

func sharedClient(t *testing.T, ns *s3test.Namespace, holder string, copts ...s3test.Option) *s3lock.Client {
	t.Helper()
	return newLockClient(t, ns, holder, []s3lock.Option{s3lock.WithLeaseDuration(10 * time.Second), s3lock.WithRequestTimeout(5 * time.Second)}, copts...)
}

// TestShared_ManyHoldersAtOnce: eight shared holders hold the lock at once,
// all with the one shared epoch as their token, each with a share of its
// own; an exclusive TryAcquire finds them and names one; Current lists all
// eight; once they release, an exclusive acquirer gets a greater epoch.
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
// a reader, a new reader waits too (no writer starvation, PROTOCOL.md §16
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
	if !errors.As(err, &held) || held.Holder != "writer" {
		t.Fatalf("a new reader's TryAcquire while a writer waits = %v; want a *HeldError naming the writer", err)
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
// (PROTOCOL.md §16: a pending epoch stays pending until a write after its
// wait).
func TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	r, err := sharedClient(t, ns, "reader").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, r)
	w1 := sharedClient(t, ns, "writer-1")
	_, err = w1.Acquire(t.Context(), name, s3lock.WithWait(time.Second))
	if !errors.Is(err, s3lock.ErrHeld) && !errors.Is(err, context.DeadlineExceeded) {
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
	ns := s3test.New(t)
	name := ns.Name("state")
	r1, err := sharedClient(t, ns, "reader-1").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, r1)
	_, err = sharedClient(t, ns, "writer-1").Acquire(t.Context(), name, s3lock.WithWait(time.Second))
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

// TestShared_AWriterWhoseWaitRunsOutIsToldWhoHoldsIt: an exclusive Acquire
// with WithWait that waits for shared holders is told of them (its wait
// observer), and when its wait runs out the error matches ErrHeld and names
// a shared holder — not a store that answered too slowly (it said so, after
// at least minAttemptWait, whatever the wait).
func TestShared_AWriterWhoseWaitRunsOutIsToldWhoHoldsIt(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("state")
	r, err := sharedClient(t, ns, "reader").TryAcquire(t.Context(), name, s3lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, r)
	var mu sync.Mutex
	var told []*s3lock.HeldError
	_, err = sharedClient(t, ns, "writer").Acquire(t.Context(), name, s3lock.WithWait(time.Second),
		s3lock.WithWaitObserver(func(h *s3lock.HeldError) { mu.Lock(); told = append(told, h); mu.Unlock() }))
	var held *s3lock.HeldError
	if !errors.Is(err, s3lock.ErrHeld) || !errors.As(err, &held) || !held.Shared || held.Holder != "reader" || held.Share != r.Token().Share {
		t.Fatalf("the writer's Acquire whose wait ran out: %v; want an error matching ErrHeld naming the reader's share", err)
	}
	if strings.Contains(err.Error(), "too slowly") {
		t.Errorf("the error blames the store: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) == 0 || !told[0].Shared || told[0].Waiting != 1 || told[0].Holder != "reader" {
		t.Errorf("the wait observer was told %v; want the reader's share, 1 shared holder", told)
	}
}
