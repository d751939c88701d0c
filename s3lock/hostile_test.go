package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The listing loops against stores that would keep them going forever
// (PROTOCOL.md §8: a listing makes progress or fails): each test puts an
// s3test.HostileStore in front of the local store and counts the LISTs it
// is sent. Under the directory bucket emulation the same tests exercise the
// whole listings of a directory bucket.

// hostile returns the test's namespace, a HostileStore in front of it and an
// s3lock client that reaches the namespace through it.
func hostile(t *testing.T, opts ...s3lock.Option) (*s3test.Namespace, *s3test.HostileStore, *s3lock.Client) {
	t.Helper()
	ns := s3test.New(t)
	h, tg := s3test.NewHostileStore(t, ns.Target)
	c, err := s3lock.New(s3test.NewClient(t, tg), ns.Bucket, append([]s3lock.Option{s3lock.WithHolder("hostile")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.WaitCleanup)
	return ns, h, c
}

// seedEpochs writes epochs 1 to n of the lock name as released leases, as
// its history would be without cleanup (by PUT, not by n acquisitions).
func seedEpochs(t *testing.T, ns *s3test.Namespace, name string, n uint64) {
	t.Helper()
	var wg sync.WaitGroup
	epochs := make(chan uint64)
	for range 8 {
		wg.Go(func() {
			for e := range epochs {
				key := s3lock.Token{Name: name, Epoch: e}.Key()
				if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key),
					Body: bytes.NewReader(s3lock.EncodeReleasedForTest("earlier", e, time.Minute))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for e := uint64(1); e <= n; e++ {
		epochs <- e
	}
	close(epochs)
	wg.Wait()
}

// wantListingError checks that err is a listing the store did not let move
// on: ErrUnorderedListing, naming the bucket, the prefix and says (what the
// store did), and pointing to s3lock verify.
func wantListingError(t *testing.T, what string, err error, ns *s3test.Namespace, prefix, says string) {
	t.Helper()
	if !errors.Is(err, s3lock.ErrUnorderedListing) {
		t.Fatalf("%s = %v; want ErrUnorderedListing", what, err)
	}
	for _, part := range []string{"s3://" + ns.Bucket + "/" + prefix, says, "s3lock verify"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%s = %q; want it to say %q", what, err, part)
		}
	}
}

// TestHostileStore_IgnoredStartAfterEndsTheSearchForTheNewestEpoch: on a
// store that ignores StartAfter, the search for the newest epoch of a lock
// whose epochs span more than a page (here pages of ten) used to go on
// forever: the gallop and the bisection took the newest epoch of a page
// that started over for their new lower bound, below the probe (s3lock
// status sent 2,100 LISTs in 20 s on 1,000 epochs, acquire --wait 5s ran
// until killed). Its second LIST now fails with ErrUnorderedListing, for
// Current, TryAcquire and a waiting Acquire alike.
func TestHostileStore_IgnoredStartAfterEndsTheSearchForTheNewestEpoch(t *testing.T) {
	t.Parallel()
	ns, h, c := hostile(t)
	if ns.Target.Directory {
		t.Skip("a directory bucket's listing is read whole, without StartAfter (TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing)")
	}
	name := ns.Name("team/app")
	const epochs = 25
	seedEpochs(t, ns, name, epochs)
	h.Set(s3test.Hostility{PageSize: 10})
	if st, err := c.Current(t.Context(), name); err != nil || st.Epoch != epochs {
		t.Fatalf("Current on a store that honours StartAfter = epoch %d, %v; want epoch %d", st.Epoch, err, epochs)
	}

	h.Set(s3test.Hostility{PageSize: 10, IgnoreStartAfter: true})
	prefix := name + "/lock-"
	for _, tc := range []struct {
		what string
		call func(ctx context.Context) error
	}{
		{"Current", func(ctx context.Context) error { _, err := c.Current(ctx, name); return err }},
		{"TryAcquire", func(ctx context.Context) error { _, err := c.TryAcquire(ctx, name); return err }},
		{"Acquire(WithWait(5s))", func(ctx context.Context) error {
			_, err := c.Acquire(ctx, name, s3lock.WithWait(5*time.Second))
			return err
		}},
	} {
		before := h.Lists()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safeguard: it used to list forever
		err := tc.call(ctx)
		cancel()
		wantListingError(t, tc.what, err, ns, prefix, "does not honour StartAfter")
		if n := h.Lists() - before; n > 2 {
			t.Errorf("%s sent %d LISTs; want 2: the first page, and the gallop's first probe that lists it again", tc.what, n)
		}
	}
}

// TestHostileStore_EndlessTruncationEndsTheSearchForTheNewestEpoch: on a
// store that says every page of a lock's epochs is truncated, the search
// for the newest epoch paged on from the start again whenever a page came
// back empty, forever. It now goes on from each empty page's continuation
// token, which must be new, and fails with ErrUnorderedListing once
// MaxListStalls pages in a row listed nothing new. The same pager reads the history
// cleanup's sweep and the acquisition's check for a newer epoch, and
// (under the directory bucket emulation) a directory bucket's whole
// listing, which fails at once on a repeated continuation token.
func TestHostileStore_EndlessTruncationEndsTheSearchForTheNewestEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		x    s3test.Hostility
	}{
		{"repeats a continuation token", s3test.Hostility{RepeatToken: true}},
		{"truncates forever", s3test.Hostility{TruncateForever: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, h, c := hostile(t)
			name := ns.Name("team/app")
			seedEpochs(t, ns, name, 3)
			prefix, says := name+"/lock-", "every page is truncated"
			if tc.x.RepeatToken {
				says = "repeats its continuation token"
			}
			if ns.Target.Directory {
				prefix = name + "/"
			}
			tc.x.Prefix = prefix
			h.Set(tc.x)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safeguard: it used to list forever
			defer cancel()
			_, err := c.Current(ctx, name)
			wantListingError(t, "Current", err, ns, prefix, says)
			if n, most := h.Lists(), s3lock.MaxListStalls+3; n > most {
				t.Errorf("Current sent %d LISTs; want at most %d: a first page, a probe, and MaxListStalls+1 that list nothing new", n, most)
			}
			t.Logf("%d LISTs: %v", h.Lists(), err)
		})
	}
}

// TestHostileStore_RepeatedTokenEndsTheLineListing: a lock's line listed on
// a store that answers every page as truncated, with the same continuation
// token or with a new one and nothing on it, was listed forever (s3lock
// status made 449 LISTs in 20 s): the line's listing stopped only on an
// empty token. Current, Line and an ordered Acquire now fail with
// ErrUnorderedListing: at the second page on a repeated token, after
// MaxListStalls empty pages otherwise.
func TestHostileStore_RepeatedTokenEndsTheLineListing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		x     s3test.Hostility
		says  string
		lists int // the most LISTs of the line a call may send
	}{
		{"repeats a continuation token", s3test.Hostility{RepeatToken: true}, "repeats its continuation token", 2},
		{"truncates forever", s3test.Hostility{TruncateForever: true}, "every page is truncated", s3lock.MaxListStalls + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, h, c := hostile(t)
			name := ns.Name("team/app")
			holder := newLockClient(t, ns, "holder", nil)
			l, err := holder.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			mustRelease(t, l)
			line := name + "/lock-line/"
			putRaw(t, ns, line+"0000000001-fifo-0123456789abcdef.json", []byte("{}")) // a waiter's ticket
			tc.x.Prefix = line
			h.Set(tc.x)
			for _, call := range []struct {
				what string
				call func(ctx context.Context) error
			}{
				{"Current", func(ctx context.Context) error { _, err := c.Current(ctx, name); return err }},
				{"Line", func(ctx context.Context) error { _, err := c.Line(ctx, name); return err }},
				{"Acquire(WithOrder(OrderFIFO), WithWait(30s))", func(ctx context.Context) error {
					_, err := c.Acquire(ctx, name, s3lock.WithOrder(s3lock.OrderFIFO), s3lock.WithWait(30*time.Second))
					return err
				}},
			} {
				before := h.Lists()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safeguard: it used to list forever
				err := call.call(ctx)
				cancel()
				wantListingError(t, call.what, err, ns, line, tc.says)
				// One LIST of the lock's epochs at most, besides the line's.
				if n := h.Lists() - before; n > tc.lists+1 {
					t.Errorf("%s sent %d LISTs; want at most %d of the line, and one of the epochs", call.what, n, tc.lists)
				}
			}
		})
	}
}

// TestHostileStore_RepeatedTokenEndsListingEveryLock: List, which pages
// through every key under a prefix, fails with ErrUnorderedListing on a
// store that repeats its continuation token (at once) or says every page is
// truncated (after MaxListStalls empty pages) instead of listing forever.
func TestHostileStore_RepeatedTokenEndsListingEveryLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		x     s3test.Hostility
		says  string
		lists int
	}{
		{"repeats a continuation token", s3test.Hostility{RepeatToken: true}, "repeats its continuation token", 2},
		{"truncates forever", s3test.Hostility{TruncateForever: true}, "every page is truncated", s3lock.MaxListStalls + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, h, c := hostile(t)
			prefix := ns.Name("locks/")
			seedEpochs(t, ns, prefix+"a", 1)
			h.Set(tc.x)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safeguard: it used to list forever
			defer cancel()
			_, err := c.List(ctx, prefix)
			wantListingError(t, "List", err, ns, prefix, tc.says)
			if n := h.Lists(); n > tc.lists {
				t.Errorf("List sent %d LISTs; want at most %d", n, tc.lists)
			}
		})
	}
}

// TestHostileStore_SlowStoreEndsAcquireWithinTheWait: WithWait bounded only
// the wait for a holder, so an Acquire whose first attempt a store kept
// going (or answered too slowly) ran as long as the store liked. The
// attempts before the lock is found held are now bounded by the wait too,
// never by less than ten seconds (a wait shorter than a slow store's round
// trips must not turn a free lock into a timeout): a store that takes 30s
// to answer a LIST ends a WithWait(1ms) Acquire after ten seconds, with an
// error that says no attempt finished.
func TestHostileStore_SlowStoreEndsAcquireWithinTheWait(t *testing.T) {
	t.Parallel()
	ns, h, c := hostile(t, s3lock.WithRequestTimeout(time.Minute))
	h.Set(s3test.Hostility{Delay: 30 * time.Second})
	start := time.Now()
	_, err := c.Acquire(t.Context(), ns.Name("slow"), s3lock.WithWait(time.Millisecond))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no attempt to acquire it finished within 10s") {
		t.Fatalf("Acquire(WithWait(1ms)) on a store that answers after 30s = %v; want it to end after 10s, saying no attempt finished", err)
	}
	if took > 25*time.Second { // a bound proving that it ended, not a measure of speed
		t.Errorf("Acquire(WithWait(1ms)) took %s; want it to end at the 10s bound on its attempts", took)
	}
	if n := h.Lists(); n > 1 { // none on a directory bucket, whose session is asked for first
		t.Errorf("Acquire sent %d LISTs; want the first attempt's one", n)
	}
}

// TestHostileStore_EmptyPagesOfASoundStoreAreListedThrough: S3 may answer
// a page that lists nothing and says more follow (over delete markers,
// which a versioned bucket keeps for every deleted epoch): a listing goes
// on from its continuation token. The rule that ends listings which would
// never end must not fail such a store: with more empty pages in a row
// than a listing once took for a stall, before every page, the newest
// epoch is found, a lease taken and every lock listed.
func TestHostileStore_EmptyPagesOfASoundStoreAreListedThrough(t *testing.T) {
	t.Parallel()
	ns, h, c := hostile(t)
	name := ns.Name("team/app")
	seedEpochs(t, ns, name, 25)
	h.Set(s3test.Hostility{EmptyPages: 15, PageSize: 10})
	st, err := c.Current(t.Context(), name)
	if err != nil || st.Epoch != 25 {
		t.Fatalf("Current = epoch %d, %v; want epoch 25", st.Epoch, err)
	}
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil || l.Token().Epoch != 26 {
		t.Fatalf("TryAcquire = %v; want epoch 26", err)
	}
	mustRelease(t, l)
	locks, err := c.List(t.Context(), ns.Name("team/"))
	if err != nil || len(locks) != 1 || locks[0].Epoch != 26 {
		t.Fatalf("List = %+v, %v; want team/app at epoch 26", locks, err)
	}
}
