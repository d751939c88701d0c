package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// seedHistory writes released epochs 1..n of name directly, as a lock that
// has had n epochs would have them (before any cleanup).
func seedHistory(tb testing.TB, ns *s3test.Namespace, name string, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 1)
	for range 32 {
		wg.Go(func() {
			for e := range work {
				_, err := ns.Client.PutObject(tb.Context(), &s3.PutObjectInput{
					Bucket: aws.String(ns.Bucket),
					Key:    aws.String(s3lock.Token{Name: name, Epoch: uint64(e)}.Key()),
					Body:   bytes.NewReader(s3lock.EncodeReleasedForTest("seed", uint64(e), time.Minute)),
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for e := 1; e <= n; e++ {
		work <- e
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatalf("seeding history: %v", err)
	default:
	}
}

// prepareHistory gives the lock name `prior` earlier epochs, and lets the
// protocol's own cleanup bring a long history back to one LIST page, as it
// does for any lock that has had that many epochs.
func prepareHistory(tb testing.TB, ns *s3test.Namespace, c *s3lock.Client, name string, prior int) {
	tb.Helper()
	switch {
	case prior == 0:
	case prior < 100:
		for range prior {
			l, err := c.TryAcquire(tb.Context(), name)
			if err != nil {
				tb.Fatal(err)
			}
			if err := l.Release(tb.Context()); err != nil {
				tb.Fatal(err)
			}
		}
	default:
		seedHistory(tb, ns, name, prior-1)
		// Old epochs may only be deleted once their successors are older
		// than the cleanup age (PROTOCOL.md, "Cleanup").
		time.Sleep(cleanupWait())
		l, err := c.TryAcquire(tb.Context(), name)
		if err != nil {
			tb.Fatal(err)
		}
		if err := l.Release(tb.Context()); err != nil {
			tb.Fatal(err)
		}
		c.WaitCleanup() // the acquisition's sweep
		if keys := s3test.Keys(tb, ns.Client, ns.Bucket, name+"/"); len(keys) > s3lock.DefaultHistory {
			tb.Fatalf("after the sweep %d epoch objects remain; want at most %d", len(keys), s3lock.DefaultHistory)
		}
	}
}

// TestRequestCounts checks, at the transport, what acquisition and release
// cost: constant however many epochs the lock has had.
func TestRequestCounts(t *testing.T) {
	const window = 500 * time.Millisecond
	s3lock.SetTimingForTest(t, window)
	type cost struct{ acquire, release int }
	costs := map[int]cost{}
	for _, prior := range []int{0, 1, 5000} {
		ns := s3test.New(t)
		counter, withCounter := counting()
		c := newLockClient(t, ns, "counted", nil, withCounter)
		name := ns.Name("counted")
		prepareHistory(t, ns, c, name, prior)

		counter.Reset()
		began := time.Now()
		l, err := c.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		acq := counter.String()
		got := cost{acquire: counter.Total()}
		lists := 1 // the LIST of step 2; a first epoch is listed once more (§5)
		if prior == 0 {
			lists = 2
		}
		if took := time.Since(began); took > window && counter.Count("ListObjectsV2") > lists {
			// An attempt slower than the attempt window lists again to
			// make sure its epoch is still the newest (PROTOCOL.md §5,
			// step 5): a slow store's conditional write (SeaweedFS's
			// waits on a lock that retries once a second) costs that LIST.
			t.Logf("prior epochs %d: the attempt took %v, more than the %v window: one LIST more", prior, took, window)
			got.acquire--
		}
		if l.Token().Epoch != uint64(prior+1) {
			t.Errorf("prior=%d: epoch %d; want %d", prior, l.Token().Epoch, prior+1)
		}
		counter.Reset()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		got.release = counter.Total()
		t.Logf("prior epochs %d: acquire %d requests (%s), release %d (%s)", prior, got.acquire, acq, got.release, counter)
		costs[prior] = got
	}
	// A lock's first epoch is listed once more: a store whose listing hid
	// it would show every later acquirer a free lock (PROTOCOL.md §5).
	if c := costs[0]; c.acquire != 3 || c.release != 1 {
		t.Errorf("a lock that never existed: acquire %d, release %d requests; want 3 (LIST, PUT, LIST) and 1", c.acquire, c.release)
	}
	if c := costs[1]; c.acquire != 3 || c.release != 1 {
		t.Errorf("one prior epoch: acquire %d, release %d requests; want 3 (LIST, GET, PUT) and 1", c.acquire, c.release)
	}
	if costs[5000] != costs[1] {
		t.Errorf("5,000 prior epochs cost %+v; want the same as one prior epoch, %+v", costs[5000], costs[1])
	}
}

// TestRequestCounts_Handoff: once a waiter's poll reads the holder's epoch
// released, taking the lock costs one LIST and one PUT: the LIST shows the
// same ETag it just read, so it need not read the object again.
func TestRequestCounts_Handoff(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("handoff")
	holder := newLockClient(t, ns, "holder", nil)
	counter, withCounter := counting()
	waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)}, withCounter)
	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	observed := make(chan struct{}, 1)
	got := make(chan *s3lock.Lease, 1)
	go func() {
		wl, err := waiter.Acquire(t.Context(), name, s3lock.WithWaitObserver(func(*s3lock.HeldError) {
			select {
			case observed <- struct{}{}:
			default:
			}
		}))
		if err != nil {
			t.Error(err)
		}
		got <- wl
	}()
	<-observed
	counter.Reset()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wl := <-got
	if wl == nil {
		t.FailNow()
	}
	mustRelease(t, wl)
	t.Logf("from release to acquisition: %s (GET 200: %d)", counter, counter.CountStatus("GetObject", 200))
	if counter.CountStatus("GetObject", 200) != 1 || counter.Count("ListObjectsV2") != 1 || counter.Count("PutObject") != 1 {
		t.Errorf("handoff cost %s with %d full GETs; want the poll's GET, one LIST and one PUT", counter, counter.CountStatus("GetObject", 200))
	}
}

// TestNestedLockNames_DoNotInflateListing: a lock nested under another
// lock's key prefix ("jobs" and "jobs/lock-cleanup") with a long history
// must not make acquiring the outer lock page through the inner one's keys.
func TestNestedLockNames_DoNotInflateListing(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	outer, inner := ns.Name("jobs"), ns.Name("jobs/lock-cleanup")
	seedHistory(t, ns, inner, 1200)
	counter, withCounter := counting()
	c := newLockClient(t, ns, "x", nil, withCounter)
	l, err := c.TryAcquire(t.Context(), outer)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	// One LIST for the newest epoch, one that confirms the first epoch is
	// listed: a page each, not 1,200 keys' worth.
	if n := counter.Count("ListObjectsV2"); n != 2 || l.Token().Epoch != 1 {
		t.Fatalf("acquiring %s beside %s's 1,200 epochs took %d LISTs (epoch %d); want 2 (epoch 1)", outer, inner, n, l.Token().Epoch)
	}
	states, err := c.List(t.Context(), ns.Name("jobs"))
	if err != nil || len(states) != 2 {
		t.Fatalf("List = %+v, %v; want both locks", states, err)
	}
}

// TestRequestCounts_OrderedFastPath: waiting in order costs nothing when
// nobody waits. An ordered acquisition of a free lock is the three requests
// of any acquisition (the step-2 LIST would show a line), also after a line
// was used and emptied; the handoff to the head of a line is the same LIST
// and PUT as without one.
func TestRequestCounts_OrderedFastPath(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("ordered")
	counter, withCounter := counting()
	c := newLockClient(t, ns, "counted", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)}, withCounter)
	prepareHistory(t, ns, c, name, 1)

	acquire := func(what string, want int) {
		t.Helper()
		counter.Reset()
		l, err := c.Acquire(t.Context(), name, s3lock.WithOrder(s3lock.OrderFIFO))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", what, counter)
		if counter.Total() != want {
			t.Errorf("%s cost %s; want %d requests", what, counter, want)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	acquire("ordered acquisition of a free lock, nobody waiting", 3)

	// A line forms and empties: a holder, and this client waiting in order.
	holder := newLockClient(t, ns, "holder", nil)
	hl, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *s3lock.Lease, 1)
	joined := make(chan struct{}, 1)
	go func() {
		l, err := c.Acquire(t.Context(), name, s3lock.WithOrder(s3lock.OrderFIFO), s3lock.WithWaitObserver(func(*s3lock.HeldError) {
			select {
			case joined <- struct{}{}:
			default:
			}
		}))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	<-joined
	time.Sleep(200 * time.Millisecond) // a few polls at the head
	counter.Reset()
	if err := hl.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	t.Logf("handoff to the head of the line: %s", counter)
	if counter.Count("ListObjectsV2") != 1 || counter.Count("PutObject") != 1 {
		t.Errorf("handoff to the head cost %s; want the polls, one LIST and one PUT", counter)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A store that keeps listing the emptied line's prefix (SeaweedFS keeps
	// the directory) costs one LIST of the line, which shows nobody waits.
	want := 3
	if listsEmptyPrefix(t, ns, name+"/", name+"/lock-line/") {
		want++
	}
	acquire("ordered acquisition after the line emptied", want)

	// A stray key under the line shows its prefix too: one LIST of the
	// line finds no ticket, and the lock is taken at once (no joining).
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(name + "/lock-line/README"), Body: bytes.NewReader([]byte("not a ticket"))}); err != nil {
		t.Fatal(err)
	}
	acquire("ordered acquisition of a free lock with a stray key in its line", 4)
}

// listsEmptyPrefix reports whether a LIST of prefix with delimiter "/" shows
// the common prefix sub although no key is under sub.
func listsEmptyPrefix(t *testing.T, ns *s3test.Namespace, prefix, sub string) bool {
	t.Helper()
	list := func(prefix, delimiter string) *s3.ListObjectsV2Output {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(ns.Bucket), Prefix: aws.String(prefix)}
		if delimiter != "" {
			in.Delimiter = aws.String(delimiter)
		}
		out, err := ns.Client.ListObjectsV2(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if keys := list(sub, "").Contents; len(keys) > 0 {
		t.Fatalf("%d keys left under %s, the first %s", len(keys), sub, aws.ToString(keys[0].Key))
	}
	for _, cp := range list(prefix, "/").CommonPrefixes {
		if aws.ToString(cp.Prefix) == sub {
			t.Logf("the store lists %s with no key under it", sub)
			return true
		}
	}
	return false
}

// TestRequestCounts_Slots: a TryAcquire of a slot lock costs at most four
// requests whatever its number of slots (PROTOCOL.md §14): on a full lock
// the LIST of the lock, the GET of its marker, one LIST of every slot's
// epochs, and a GET of the slot that may lapse first (to name its holder);
// on a lock with a released slot the same three and the PUT that takes it.
// A waiter on a full lock lists the slots once per poll interval, as a
// mutex's waiter reads the holder's epoch once per poll interval.
func TestRequestCounts_Slots(t *testing.T) {
	for _, n := range []int{1, 8, 64} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			name := ns.Name("pool")
			holders := newLockClient(t, ns, "holders", []s3lock.Option{s3lock.WithLeaseDuration(time.Minute)})
			leases := make([]*s3lock.Lease, n)
			for i := range leases {
				l, err := holders.TryAcquire(t.Context(), name, s3lock.WithSlots(n))
				if err != nil {
					t.Fatalf("taking slot %d of %d: %v", i+1, n, err)
				}
				leases[i] = l
				mustRelease(t, l)
			}

			counter, withCounter := counting()
			cold := newLockClient(t, ns, "cold", nil, withCounter)
			_, err := cold.TryAcquire(t.Context(), name, s3lock.WithSlots(n))
			var held *s3lock.HeldError
			if !errors.As(err, &held) || held.Holder != "holders" {
				t.Fatalf("TryAcquire of a full lock = %v; want a *HeldError naming a holder", err)
			}
			if got := counter.Total(); got > 4 {
				t.Errorf("TryAcquire of a full %d-slot lock made %d requests (%s); want at most 4", n, got, counter)
			}
			t.Logf("full, %d slots: %s", n, counter)

			if err := leases[n/2].Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			counter.Reset()
			fresh := newLockClient(t, ns, "fresh", nil, withCounter)
			l, err := fresh.TryAcquire(t.Context(), name, s3lock.WithSlots(n))
			if err != nil {
				t.Fatalf("TryAcquire with slot %d released = %v; want the slot", n/2+1, err)
			}
			mustRelease(t, l)
			if got := counter.Total(); got > 4 {
				t.Errorf("TryAcquire of a released slot of %d made %d requests (%s); want at most 4", n, got, counter)
			}
			t.Logf("a released slot, %d slots: %s", n, counter)

			// The lock is full again: a waiter's requests over a while.
			counter.Reset()
			const poll, window = 100 * time.Millisecond, 2 * time.Second
			waiter := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithPollInterval(poll)}, withCounter)
			ctx, cancel := context.WithTimeout(t.Context(), window)
			defer cancel()
			if _, err := waiter.Acquire(ctx, name, s3lock.WithSlots(n)); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire of a full lock for %s = %v; want it still waiting", window, err)
			}
			// One request per poll interval (±20 % jitter), after the
			// first attempt's four.
			if got, most := counter.Total(), 4+int(window/(poll*8/10))+1; got > most {
				t.Errorf("a waiter on a full %d-slot lock made %d requests in %s (%s); want at most %d, one per poll interval", n, got, window, counter, most)
			}
			t.Logf("waiting on %d slots for %s: %s", n, window, counter)
		})
	}
}
