package s3lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// Slot locks (Slots, PROTOCOL.md §14): at most n holders at once, each with
// a fencing token of its slot; holders that disagree on n get an error, never
// a slot.

// slotRun is a run of workers that each take a slot of one lock rounds
// times, count how many are inside at once, and increment their slot's
// counter object (a read-modify-write that loses an update if two holders
// of one slot ever overlap).
type slotRun struct {
	workers, rounds, slots int
	faults                 func(worker int) *s3test.Faults
	opts                   []s3lock.Option
}

// slotResult is what a slotRun saw.
type slotResult struct {
	ns        *s3test.Namespace
	name      string
	maxInside int32
	perSlot   map[int]int // acquisitions per slot
}

func (r slotRun) run(t *testing.T) slotResult {
	t.Helper()
	ns := s3test.New(t)
	res := slotResult{ns: ns, name: ns.Name("pool"), perSlot: map[int]int{}}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var inside atomic.Int32
	var mu sync.Mutex
	lastEpoch := map[int]uint64{}
	opts := append([]s3lock.Option{s3lock.WithSlots(r.slots)}, r.opts...)
	var wg sync.WaitGroup
	for w := range r.workers {
		var copts []s3test.Option
		if r.faults != nil {
			f := r.faults(w)
			copts = append(copts, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
		}
		c := newLockClient(t, ns, fmt.Sprintf("worker-%02d", w), []s3lock.Option{
			s3lock.WithLeaseDuration(10 * time.Second), s3lock.WithRequestTimeout(5 * time.Second),
		}, copts...)
		wg.Go(func() {
			for round := range r.rounds {
				l, err := c.Acquire(ctx, res.name, opts...)
				if err != nil {
					t.Errorf("worker %d round %d: Acquire: %v", w, round, err)
					return
				}
				now := inside.Add(1)
				mu.Lock()
				res.maxInside = max(res.maxInside, now)
				if prev := lastEpoch[l.Token().Slot]; l.Token().Epoch <= prev {
					t.Errorf("slot %d: epoch %d after epoch %d; a slot's epochs must increase", l.Token().Slot, l.Token().Epoch, prev)
				}
				lastEpoch[l.Token().Slot] = l.Token().Epoch
				res.perSlot[l.Token().Slot]++
				mu.Unlock()
				if l.Token().Slot < 1 || l.Token().Slot > r.slots || max(l.Token().Slots, 1) != r.slots || l.Token().Name != res.name {
					t.Errorf("lease slot %d of %d, name %q; want a slot in [1, %d] of %q", l.Token().Slot, max(l.Token().Slots, 1), l.Token().Name, r.slots, res.name)
				}
				key := fmt.Sprintf("%scounter-%d", ns.Prefix, l.Token().Slot)
				n, err := getCounter(ctx, ns, key)
				if err != nil && !isNoSuchKey(err) {
					t.Errorf("worker %d: counter: %v", w, err)
				}
				time.Sleep(30 * time.Millisecond) // a little work, so that holders overlap
				if err := putCounterCtx(ctx, ns, key, n+1); err != nil {
					t.Errorf("worker %d: counter: %v", w, err)
				}
				if lost := l.Err(); lost != nil {
					t.Errorf("worker %d: lease of slot %d epoch %d ended while held: %v", w, l.Token().Slot, l.Token().Epoch, lost)
				}
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("worker %d: Release slot %d epoch %d: %v", w, l.Token().Slot, l.Token().Epoch, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return res
	}
	total := 0
	for slot, n := range res.perSlot {
		total += n
		got, err := getCounter(t.Context(), ns, fmt.Sprintf("%scounter-%d", ns.Prefix, slot))
		if err != nil || got != n {
			t.Errorf("slot %d counter = %d (%v); want %d: two holders of the slot overlapped", slot, got, err, n)
		}
	}
	if want := r.workers * r.rounds; total != want {
		t.Errorf("%d acquisitions; want %d: some worker was not served", total, want)
	}
	if res.maxInside > int32(r.slots) {
		t.Errorf("%d holders were inside at once; the lock admits %d", res.maxInside, r.slots)
	}
	if res.maxInside < 2 {
		t.Errorf("at most %d holder was inside at once: the %d slots were never used together", res.maxInside, r.slots)
	}
	return res
}

func isNoSuchKey(err error) bool {
	var nsk interface{ ErrorCode() string }
	return errors.As(err, &nsk) && nsk.ErrorCode() == "NoSuchKey"
}

// TestSlots_AtMostNHoldersAndEveryWorkerServed: 12 workers share a 3-slot
// lock: never more than 3 inside, every worker served, each slot's fencing
// token strictly increasing, no slot's counter losing an update.
func TestSlots_AtMostNHoldersAndEveryWorkerServed(t *testing.T) {
	t.Parallel()
	slotRun{workers: 12, rounds: 4, slots: 3}.run(t)
}

// TestSlots_FaultsKeepTheBoundAndOrphanNoSlot: the same under dropped
// responses after commit, 5xx before and after, conflicts and latency; and
// afterwards no slot stays held for nobody.
func TestSlots_FaultsKeepTheBoundAndOrphanNoSlot(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var injectors []*s3test.Faults
	// Each kind of fault is certain to happen at least once (the first
	// matching request of worker k%4 gets kind k), then at random: with
	// random faults alone, a run with fewer requests than usual sometimes
	// drew no 5xx-after at all.
	certain := []s3test.Rule{
		{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 1, Limit: 1},
		{Fault: s3test.ServerErrorAfter, Ops: []string{"PutObject"}, Probability: 1, Limit: 1},
		{Fault: s3test.ServerErrorBefore, Probability: 1, Limit: 1},
		{Fault: s3test.Conflict, Probability: 1, Limit: 1},
	}
	res := slotRun{workers: 12, rounds: 3, slots: 3, faults: func(w int) *s3test.Faults {
		f := s3test.NewFaults(uint64(w+100),
			certain[w%len(certain)],
			s3test.Rule{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 0.06},
			s3test.Rule{Fault: s3test.ServerErrorAfter, Ops: []string{"PutObject"}, Probability: 0.04},
			s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 0.04},
			s3test.Rule{Fault: s3test.Conflict, Probability: 0.06},
		)
		mu.Lock()
		injectors = append(injectors, f)
		mu.Unlock()
		return f
	}}.run(t)
	total := map[s3test.Fault]int{}
	for _, f := range injectors {
		f.Disable()
		for k, v := range f.Injected() {
			total[k] += v
		}
	}
	t.Logf("faults injected: %v", total)
	for _, k := range []s3test.Fault{s3test.DropResponse, s3test.ServerErrorAfter, s3test.ServerErrorBefore, s3test.Conflict} {
		if total[k] == 0 {
			t.Errorf("no %s fault was injected; the test did not exercise it", k)
		}
	}
	// Every worker released: no slot may still be held (an orphan would
	// stay held until it lapses).
	st, err := newLockClient(t, res.ns, "viewer", nil).Current(t.Context(), res.name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 3 || len(st.Holders) != 0 {
		t.Errorf("after every worker released: slots %d, holders %+v; want 3 slots and no holder", st.Slots, st.Holders)
	}
}

// TestSlots_DisagreementIsAnError: once a lock has 3 slots, acquirers that
// ask for a mutex or another n get ErrSlotsMismatch at once, never a slot;
// Adopt of the marker is refused too.
func TestSlots_DisagreementIsAnError(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	a := newLockClient(t, ns, "a", nil)
	l, err := a.TryAcquire(t.Context(), name, s3lock.WithSlots(3))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	b := newLockClient(t, ns, "b", nil)
	// A mismatch is reported at once: a waiting Acquire must not wait for it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		what string
		try  func() error
	}{
		{"TryAcquire without Slots", func() error { _, err := b.TryAcquire(t.Context(), name); return err }},
		{"TryAcquire with WithSlots(1)", func() error { _, err := b.TryAcquire(t.Context(), name, s3lock.WithSlots(1)); return err }},
		{"TryAcquire with WithSlots(2)", func() error { _, err := b.TryAcquire(t.Context(), name, s3lock.WithSlots(2)); return err }},
		{"Acquire with WithSlots(5)", func() error { _, err := b.Acquire(ctx, name, s3lock.WithSlots(5)); return err }},
		{"Acquire without Slots", func() error { _, err := b.Acquire(ctx, name); return err }},
		{"Acquire FIFO without Slots", func() error { _, err := b.Acquire(ctx, name, s3lock.WithOrder(s3lock.OrderFIFO)); return err }},
		{"Adopt of the marker", func() error {
			st, err := b.Current(t.Context(), name)
			if err != nil {
				return err
			}
			_, err = b.Resume(t.Context(), s3lock.Token{Name: name, Epoch: st.Epoch})
			return err
		}},
	} {
		err := tc.try()
		var se *s3lock.SlotsError
		if !errors.Is(err, s3lock.ErrSlotsMismatch) || !errors.As(err, &se) || se.Slots != 3 {
			t.Errorf("%s: %v; want a *SlotsError saying the lock has 3 slots", tc.what, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, ns.Bucket) || !strings.Contains(msg, "use 3") {
			t.Errorf("%s: the error %q should name the lock, the bucket and the remedy", tc.what, msg)
		}
	}
}

// TestSlots_RacingAcquirersWithDifferentNAgree: acquirers asking for 2 and
// for 3 slots race for a fresh lock: one n wins, every acquirer of the other
// gets ErrSlotsMismatch, and never more holders than the winner's n.
func TestSlots_RacingAcquirersWithDifferentNAgree(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	for round := range 5 {
		name := ns.Name(fmt.Sprintf("race-%d", round))
		var mu sync.Mutex
		won := map[int]int{}  // n → leases
		lost := map[int]int{} // n → mismatches
		var wg sync.WaitGroup
		for w := range 6 {
			n := 2 + w%2
			c := newLockClient(t, ns, fmt.Sprintf("w%d", w), nil)
			wg.Go(func() {
				l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(n))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won[n]++
					mustRelease(t, l)
				case errors.Is(err, s3lock.ErrSlotsMismatch):
					lost[n]++
				case errors.Is(err, s3lock.ErrHeld):
				default:
					t.Errorf("WithSlots(%d): %v", n, err)
				}
			})
		}
		wg.Wait()
		if won[2] > 0 && won[3] > 0 {
			t.Errorf("round %d: acquirers of 2 and of 3 slots both got leases (%v)", round, won)
		}
		for n, k := range won {
			if k > n {
				t.Errorf("round %d: %d holders of a %d-slot lock", round, k, n)
			}
			if lost[n] > 0 {
				t.Errorf("round %d: WithSlots(%d) both won and got a mismatch", round, n)
			}
		}
		if won[2]+won[3] == 0 {
			t.Errorf("round %d: nobody got a slot (%v mismatches)", round, lost)
		}
	}
}

// TestSlots_MutexHolderIsWaitedForThenTheLockBecomesASlotLock: a Slots
// acquirer waits for a mutex's holder like any waiter; once it is free, the
// lock becomes a slot lock whose marker older s3lock versions cannot read
// (a newer format), and a mutex acquirer gets ErrSlotsMismatch.
func TestSlots_MutexHolderIsWaitedForThenTheLockBecomesASlotLock(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("converted")
	mutex, err := newLockClient(t, ns, "mutex", nil).TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	c := newLockClient(t, ns, "pool", nil)
	if _, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2)); !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("TryAcquire(WithSlots(2)) of a held mutex: %v; want ErrHeld", err)
	}
	got := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := c.Acquire(t.Context(), name, s3lock.WithSlots(2))
		if err != nil {
			t.Errorf("Acquire(WithSlots(2)): %v", err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case l := <-got:
		t.Fatalf("Acquire(WithSlots(2)) returned (%v) while the mutex's lease was held", l)
	default:
	}
	if err := mutex.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	mustRelease(t, l)
	if max(l.Token().Slots, 1) != 2 || l.Token().Slot < 1 || l.Token().Slot > 2 {
		t.Errorf("lease slot %d of %d; want a slot of 2", l.Token().Slot, max(l.Token().Slots, 1))
	}
	// The marker is epoch 2 of the lock itself, in a format a reader of
	// leases only refuses.
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(s3lock.Token{Name: name, Epoch: 2}.Key())})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	raw, _ := io.ReadAll(out.Body)
	var m struct {
		Format int `json:"s3lock"`
		Slots  int `json:"slots"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Format != 3 || m.Slots != 2 {
		t.Errorf("marker %s = %s; want format 3 (slots with size codes) with slots 2", s3lock.Token{Name: name, Epoch: 2}.Key(), raw)
	}
	if _, err := newLockClient(t, ns, "late", nil).TryAcquire(t.Context(), name); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("a mutex TryAcquire of the slot lock: %v; want ErrSlotsMismatch", err)
	}
}

// TestSlots_AllHeld: with every slot held, TryAcquire says so (the slot that
// runs out first), and Current and List show every holder with its slot.
func TestSlots_AllHeld(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("jobs/pool")
	seen := map[int]string{}
	for i := range 3 {
		holder := fmt.Sprintf("h%d", i)
		l, err := newLockClient(t, ns, holder, nil).TryAcquire(t.Context(), name, s3lock.WithSlots(3))
		if err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		mustRelease(t, l)
		if _, dup := seen[l.Token().Slot]; dup {
			t.Fatalf("slot %d granted twice", l.Token().Slot)
		}
		seen[l.Token().Slot] = holder
	}
	viewer := newLockClient(t, ns, "viewer", nil)
	_, err := viewer.TryAcquire(t.Context(), name, s3lock.WithSlots(3))
	var he *s3lock.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryAcquire of a full 3-slot lock: %v; want a *HeldError for one of its slots", err)
	}
	if slot, slots := s3lock.HeldSlot(he); slots != 3 || slot < 1 || he.Name != name || seen[slot] != he.Holder {
		t.Fatalf("TryAcquire of a full 3-slot lock: %v; want a *HeldError for one of its slots", err)
	}
	if !strings.Contains(err.Error(), "all 3 slots") {
		t.Errorf("the error %q should say that all 3 slots are held", err)
	}
	check := func(what string, st s3lock.State) {
		t.Helper()
		if st.Slots != 3 || !st.Held || st.Phase() != s3lock.PhaseHeld || len(st.Holders) != 3 {
			t.Fatalf("%s: slots %d, held %v, phase %s, %d holders; want 3 slots, all held", what, st.Slots, st.Held, st.Phase(), len(st.Holders))
		}
		for k, h := range st.Holders {
			if h.Slot != k+1 || seen[h.Slot] != h.Holder || !h.Held || h.Epoch != 1 || h.Name != name {
				t.Errorf("%s: holder %d = slot %d %q (held %v, epoch %d, name %q); want slot %d held by %q at epoch 1",
					what, k, h.Slot, h.Holder, h.Held, h.Epoch, h.Name, k+1, seen[k+1])
			}
		}
	}
	st, err := viewer.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	check("Current", st)
	all, err := viewer.List(t.Context(), ns.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != name {
		t.Fatalf("List = %+v; want the one slot lock %q (its slots are not locks of their own)", all, name)
	}
	check("List", all[0])
}

// TestSlots_TokenResumesItsSlot: a slot lease's token names its slot; Resume
// takes that slot's lease over, Lookup reads it, and ForceRelease of its token frees
// it for the next acquirer.
func TestSlots_TokenResumesItsSlot(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	c := newLockClient(t, ns, "a", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s3lock.ParseToken(l.Detach().String())
	if err != nil || tok.Slot < 1 || tok.Slot > 2 || tok.Slot != l.Token().Slot || tok.Slots != 2 || tok.Name != name {
		t.Fatalf("token %+v (%v); want slot %d (1 or 2) of 2 of %q", tok, err, l.Token().Slot, name)
	}
	st, err := c.Lookup(t.Context(), tok)
	if err != nil || st.Slot != l.Token().Slot || st.Name != name || !st.Held {
		t.Fatalf("Lookup = %+v, %v; want slot %d held", st, err, l.Token().Slot)
	}
	r, err := newLockClient(t, ns, "b", nil).Resume(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token().Slot != l.Token().Slot || max(r.Token().Slots, 1) != 2 || r.Token().Name != name || r.Token().Epoch != l.Token().Epoch {
		t.Errorf("resumed slot %d of %d of %q epoch %d; want slot %d of 2 of %q epoch %d", r.Token().Slot, max(r.Token().Slots, 1), r.Token().Name, r.Token().Epoch, l.Token().Slot, name, l.Token().Epoch)
	}
	if err := r.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A crashed holder's slot: an operator frees it.
	l2, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	l2.Detach()
	if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Slot: l2.Token().Slot, Epoch: l2.Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	st, err = c.Current(t.Context(), name)
	if err != nil || st.Held || st.Phase() != s3lock.PhaseFree {
		t.Errorf("after releasing every slot: %+v (%v); want a free slot lock", st, err)
	}
	for _, bad := range []string{`{"bucket":"b","name":"n","slot":3,"slots":2,"epoch":1,"nonce":"x"}`,
		`{"bucket":"b","name":"n","slot":1,"epoch":1,"nonce":"x"}`} {
		if _, err := s3lock.ParseToken(bad); !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("ParseToken(%s) = %v; want ErrInvalidConfig", bad, err)
		}
	}
}

// TestSlots_HeadOfTheLineTakesTheFirstFreeSlot: with every slot held, FIFO
// waiters are served in the order they joined, each by whichever slot
// frees.
func TestSlots_HeadOfTheLineTakesTheFirstFreeSlot(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	held := holdEverySlot(t, ns, name, 2)
	viewer := newLockClient(t, ns, "viewer", nil)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i := range 3 {
		who := fmt.Sprintf("w%d", i)
		c := newLockClient(t, ns, who, nil)
		wg.Go(func() {
			l, err := c.Acquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithOrder(s3lock.OrderFIFO))
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			if err := l.Release(t.Context()); err != nil {
				t.Errorf("%s: release: %v", who, err)
			}
		})
		testkit.Eventually(t, waitLimit, fmt.Sprintf("%d waiters in line", i+1), func() bool {
			ws, err := viewer.Line(t.Context(), name)
			return err == nil && len(ws) == i+1
		})
	}
	if err := held[1].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if strings.Join(order, ",") != "w0,w1,w2" {
		t.Errorf("served %v; want the order they joined: w0, w1, w2", order)
	}
}

// TestSlots_CrashedHolderLapsesByTheStoresClock: a holder that stops renewing
// frees its slot once its lease has lapsed, judged by the store's clock.
func TestSlots_CrashedHolderLapsesByTheStoresClock(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	opts := []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)}
	crashed, err := newLockClient(t, ns, "crashed", opts).TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	crashed.Detach()
	other, err := newLockClient(t, ns, "other", opts).TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, other)
	l, err := newLockClient(t, ns, "next", opts).Acquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	if l.Token().Slot != crashed.Token().Slot || l.Token().Epoch != crashed.Token().Epoch+1 {
		t.Errorf("the waiter got slot %d epoch %d; want the crashed holder's slot %d at epoch %d",
			l.Token().Slot, l.Token().Epoch, crashed.Token().Slot, crashed.Token().Epoch+1)
	}
}

// TestSlots_MarkerIsResetOnlyOnceNoSlotIsHeld: force-releasing a slot lock's
// marker while a slot is held is refused; once none is, it makes the lock
// free for a mutex again.
func TestSlots_MarkerIsResetOnlyOnceNoSlotIsHeld(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	c := newLockClient(t, ns, "a", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	marker := st.Epoch
	err = c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: marker})
	if !errors.Is(err, s3lock.ErrHeld) || !strings.Contains(err.Error(), "force-release the slots first") {
		t.Fatalf("ForceRelease of the marker with a slot held: %v; want ErrHeld saying to release the slots first", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: marker}); err != nil {
		t.Fatalf("ForceRelease of the marker with no slot held: %v", err)
	}
	m, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("a mutex TryAcquire after the marker's release: %v", err)
	}
	mustRelease(t, m)
	if max(m.Token().Slots, 1) != 1 || m.Token().Slot != 0 || m.Token().Epoch != marker+1 {
		t.Errorf("mutex lease slot %d of %d at epoch %d; want a mutex's lease at epoch %d", m.Token().Slot, max(m.Token().Slots, 1), m.Token().Epoch, marker+1)
	}
}

// TestSlots_WatchRefusesASlotLock: Watch follows a mutex; on a slot lock it
// yields one error, before any state.
func TestSlots_WatchRefusesASlotLock(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	c := newLockClient(t, ns, "a", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	n := 0
	for st, err := range c.Watch(t.Context(), name) {
		n++
		if n == 1 && (!errors.Is(err, s3lock.ErrSlotsMismatch) || st.Epoch != 0) {
			t.Errorf("first yield of Watch on a slot lock: %+v, %v; want only ErrSlotsMismatch", st, err)
		}
	}
	if n != 1 {
		t.Errorf("Watch yielded %d times; want once (the error)", n)
	}
}

// TestSlots_ObserverEventsNameTheLockAndSlot: a slot lease's events name the
// lock (not the slot's internal name) and carry the slot.
func TestSlots_ObserverEventsNameTheLockAndSlot(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	var mu sync.Mutex
	var events []observe.Event
	c := newLockClient(t, ns, "a", []s3lock.Option{s3lock.WithObserver(observerFunc(func(e observe.Event) {
		if e.Op == "" {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	}))})
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	kinds := map[observe.Kind]bool{}
	for _, e := range events {
		kinds[e.Kind] = true
		if e.Lock != name || e.Slot != l.Token().Slot || e.Epoch != l.Token().Epoch || e.Key != l.Token().Key() {
			t.Errorf("%s event: lock %q slot %d epoch %d key %s; want lock %q slot %d epoch %d key %s",
				e.Kind, e.Lock, e.Slot, e.Epoch, e.Key, name, l.Token().Slot, l.Token().Epoch, l.Token().Key())
		}
	}
	for _, k := range []observe.Kind{observe.Acquired, observe.Renewed, observe.Released} {
		if !kinds[k] {
			t.Errorf("no %s event", k)
		}
	}
}

// TestSlots_AdoptAndLookupASlotByItsEpoch: a slot's lease can be read and
// taken over by lock, slot and epoch (an import), and a slot that the lock
// does not have, or a lock that has no slots, is refused.
func TestSlots_AdoptAndLookupASlotByItsEpoch(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	c := newLockClient(t, ns, "a", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	want := fmt.Sprintf("%s/lock-slots/%d/lock-%010d.json", name, l.Token().Slot, l.Token().Epoch)
	if got := (s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch}).Key(); got != want {
		t.Errorf("a slot token's Key = %s; want the slot's epoch object %s", got, want)
	}
	st, err := c.Lookup(t.Context(), s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch})
	if err != nil || st.Slot != l.Token().Slot || st.Name != name || !st.Held || st.Holder != "a" {
		t.Fatalf("Lookup of the slot by epoch = %+v, %v; want slot %d held by a", st, err, l.Token().Slot)
	}
	a, err := newLockClient(t, ns, "operator", nil).Resume(t.Context(), s3lock.Token{Name: name, Slot: l.Token().Slot, Epoch: l.Token().Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if a.Token().Slot != l.Token().Slot || max(a.Token().Slots, 1) != 2 || a.Token().Name != name {
		t.Errorf("adopted slot %d of %d of %q; want slot %d of 2 of %q", a.Token().Slot, max(a.Token().Slots, 1), a.Token().Name, l.Token().Slot, name)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(t.Context(), s3lock.Token{Name: name, Slot: 3, Epoch: 1}); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("Resume of slot 3 of a 2-slot lock: %v; want ErrSlotsMismatch", err)
	}
	mutex := ns.Name("mutex")
	m, err := c.TryAcquire(t.Context(), mutex)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, m)
	if _, err := c.Lookup(t.Context(), s3lock.Token{Name: mutex, Slot: 1, Epoch: m.Token().Epoch}); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("Lookup of a slot of a mutex: %v; want ErrSlotsMismatch", err)
	}
}

// TestSlots_MarkerNeverLapses: a marker has no lease to lapse; long after
// it was written, a mutex acquirer still gets ErrSlotsMismatch.
func TestSlots_MarkerNeverLapses(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	c := newLockClient(t, ns, "a", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Older than any lease of validity 0 could be, by the store's clock
	// (serverSlack, plus a second of resolution and of Date's lag).
	time.Sleep(4500 * time.Millisecond)
	if _, err := newLockClient(t, ns, "m", nil).TryAcquire(t.Context(), name); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("a mutex TryAcquire of a 4.5 s old marker: %v; want ErrSlotsMismatch", err)
	}
}

// TestSlots_AbandonNeverReleasesAMarker: the marker's writer, whose create
// was answered too late and whose check of it then failed, gives up — but
// does not release the marker that another acquirer already took a slot
// under: a mutex and another n stay out.
func TestSlots_AbandonNeverReleasesAMarker(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("pool")
	markerKey := s3lock.Token{Name: name, Epoch: 1}.Key()
	var failLists atomic.Bool
	landed := make(chan struct{}) // the writer's marker is in the store
	var landedOnce sync.Once
	slow := s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, markerKey) && !failLists.Load() {
				resp, err := next.RoundTrip(req) // it lands; the answer comes after attemptWindow
				landedOnce.Do(func() { close(landed) })
				time.Sleep(2500 * time.Millisecond)
				failLists.Store(true)
				return resp, err
			}
			if failLists.Load() && req.Method == http.MethodGet && req.URL.Query().Get("list-type") == "2" {
				return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Request: req,
					Header: http.Header{"Content-Type": {"application/xml"}},
					Body:   io.NopCloser(strings.NewReader(`<Error><Code>InternalError</Code><Message>injected</Message></Error>`))}, nil
			}
			return next.RoundTrip(req)
		})
	})
	writer := newLockClient(t, ns, "writer", []s3lock.Option{s3lock.WithRequestTimeout(5 * time.Second)}, slow, s3test.WithoutRetries())
	done := make(chan error, 1)
	go func() {
		l, err := writer.TryAcquire(t.Context(), name, s3lock.WithSlots(3))
		if l != nil {
			mustRelease(t, l)
		}
		done <- err
	}()
	// Only once the writer's marker is there: had b written the marker
	// itself, the writer would find it and never abandon one of its own.
	select {
	case <-landed:
	case err := <-done:
		t.Fatalf("the writer's TryAcquire ended (%v) before its marker reached the store", err)
	}
	b := newLockClient(t, ns, "b", nil)
	var held *s3lock.Lease
	testkit.Eventually(t, waitLimit, "another acquirer takes a slot under the marker", func() bool {
		l, err := b.TryAcquire(t.Context(), name, s3lock.WithSlots(3))
		held = l
		return err == nil
	})
	mustRelease(t, held)
	if err := <-done; err == nil {
		t.Log("the writer got a slot after all")
	}
	st, err := b.Current(t.Context(), name)
	if err != nil || st.Slots != 3 || st.Released {
		t.Errorf("after the writer gave up: %+v, %v; want the 3-slot marker in force", st, err)
	}
	if l, err := newLockClient(t, ns, "mutex", nil).TryAcquire(t.Context(), name); err == nil {
		mustRelease(t, l)
		t.Errorf("a mutex acquired epoch %d while slot %d is held", l.Token().Epoch, held.Token().Slot)
	} else if !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("a mutex TryAcquire: %v; want ErrSlotsMismatch", err)
	}
	if l, err := newLockClient(t, ns, "two", nil).TryAcquire(t.Context(), name, s3lock.WithSlots(2)); err == nil {
		mustRelease(t, l)
		t.Errorf("a WithSlots(2) acquirer got slot %d while slot %d of 3 is held", l.Token().Slot, held.Token().Slot)
	}
}

// TestSlots_HiddenListingIsDetected: on a store whose listing hides the
// lock's objects, a slot acquirer reports ErrNameCollision within a few
// requests instead of writing the marker again and again.
func TestSlots_HiddenListingIsDetected(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("hidden/pool")
	l, err := newLockClient(t, ns, "holder", nil).TryAcquire(t.Context(), name, s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	counter, withCounter := counting()
	blind := newLockClient(t, ns, "blind", nil, withCounter, hidingListings(ns.Name("hidden/")))
	if _, err := blind.TryAcquire(t.Context(), name, s3lock.WithSlots(2)); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("TryAcquire(WithSlots(2)) of a lock whose listing is hidden: %v; want ErrNameCollision", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := blind.Acquire(ctx, name, s3lock.WithSlots(2)); !errors.Is(err, s3lock.ErrNameCollision) || ctx.Err() != nil {
		t.Errorf("Acquire(WithSlots(2)) of a lock whose listing is hidden: %v; want ErrNameCollision at once", err)
	}
	if n := counter.Total(); n > 20 {
		t.Errorf("%d requests (%s); want a few", n, counter)
	}

	if ns.Target.Directory {
		return // a directory bucket lists a lock's epochs and its slots' directory in one listing: none hides one but not the other
	}
	// A lock never held, whose own epochs the listing hides but not its
	// slots' (MinIO, with an object at the lock's name): the marker the
	// first acquirer writes would be seen by nobody after it. It is
	// refused at once; the marker stays (a landed marker is never
	// released) and tells every later acquirer the same.
	fresh := ns.Name("fresh-pool")
	onlyEpochs := newLockClient(t, ns, "blind", nil, hidingListingsOf(func(p string) bool { return p == fresh+"/lock-" }))
	if l, err := onlyEpochs.TryAcquire(t.Context(), fresh, s3lock.WithSlots(2)); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("TryAcquire(WithSlots(2)) of a never-held lock whose epochs the listing hides: %v; want ErrNameCollision", err)
		if l != nil {
			mustRelease(t, l)
		}
	}
	if _, err := onlyEpochs.TryAcquire(t.Context(), fresh); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("a mutex TryAcquire after it: %v; want ErrNameCollision", err)
	}
}

// TestSlots_OrderedAttemptLeavesAFreeSlotToTheLine: while a waiter is in
// the lock's line, an ordered TryAcquire does not take a slot that just
// freed: it says the line comes first.
func TestSlots_OrderedAttemptLeavesAFreeSlotToTheLine(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	held := holdEverySlot(t, ns, name, 2)
	// A waiter in line that polls the slots only every few seconds.
	slowPoll := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(5 * time.Second)})
	served := make(chan error, 1)
	go func() {
		l, err := slowPoll.Acquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithOrder(s3lock.OrderFIFO))
		if err == nil {
			err = l.Release(t.Context())
		}
		served <- err
	}()
	viewer := newLockClient(t, ns, "viewer", nil)
	testkit.Eventually(t, waitLimit, "the waiter in line", func() bool {
		ws, err := viewer.Line(t.Context(), name)
		return err == nil && len(ws) == 1
	})
	if err := held[0].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := viewer.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithOrder(s3lock.OrderFIFO))
	if err == nil {
		_ = l.Release(t.Context()) // so the waiter is served anyway
	}
	var he *s3lock.HeldError
	if !errors.As(err, &he) || he.Ahead != 1 {
		t.Errorf("an ordered TryAcquire of a freed slot with a waiter in line: %v; want a *HeldError with 1 ahead", err)
	}
	if err := <-served; err != nil {
		t.Errorf("the waiter in line: %v", err)
	}
}

// holdEverySlot fills every slot of an n-slot lock, each with a holder of
// its own ("h0", "h1", ...), released at the end of the test.
func holdEverySlot(t *testing.T, ns *s3test.Namespace, name string, n int) []*s3lock.Lease {
	t.Helper()
	var held []*s3lock.Lease
	for i := range n {
		l, err := newLockClient(t, ns, fmt.Sprintf("h%d", i), nil).TryAcquire(t.Context(), name, s3lock.WithSlots(n))
		if err != nil {
			t.Fatal(err)
		}
		mustRelease(t, l)
		held = append(held, l)
	}
	return held
}

// A slot lease's own State reads as the lease it is: held, then released,
// never as the slot lock's "free" (that is the lock's State, with no Slot).
func TestSlots_ALeasesOwnStateReadsAsALease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "slot-holder", nil)
	l, err := c.TryAcquire(t.Context(), ns.Name("slot-state"), s3lock.WithSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.Phase() != s3lock.PhaseHeld || st.Slot == 0 {
		t.Errorf("a held slot lease's State = %+v (%s); want held, with its slot", st, st.Phase())
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.Phase() != s3lock.PhaseReleased {
		t.Errorf("a released slot lease's State says %s; want released", st.Phase())
	}
	lock, err := c.Current(t.Context(), ns.Name("slot-state"))
	if err != nil || lock.Phase() != s3lock.PhaseFree {
		t.Errorf("the slot lock's State = %+v, %v (%s); want free", lock, err, lock.Phase())
	}
}
