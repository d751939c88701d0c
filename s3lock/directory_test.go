package s3lock

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// emulatedDirectoryBucket starts the directory bucket emulation in front of
// the local store, makes a bucket named as a directory bucket on it, and
// returns the emulation, the bucket and a client (with the AWS SDK's
// sessions, as for a real directory bucket) whose requests counter counts.
func emulatedDirectoryBucket(t *testing.T, counter *s3test.Counter) (*s3test.DirectoryBuckets, string, *s3.Client) {
	t.Helper()
	d, tg, bucket := s3test.NewDirectoryBucket(t)
	return d, bucket, s3test.NewClient(t, tg, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return counter.Wrap(next) }))
}

// putKeys writes each key (32 at a time), with the body body gives it.
func putKeys(t *testing.T, api *s3.Client, bucket string, keys []string, body func(key string) []byte) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan string)
	for range 32 {
		wg.Go(func() {
			for k := range work {
				if _, err := api.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k),
					Body: bytes.NewReader(body(k))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
}

// TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing: on a store
// that lists as AWS documents directory buckets to (no key order, no
// StartAfter, prefixes that end in "/"), a lock whose 2,344 epochs span
// three LIST pages is taken at the right epoch and then found held, in a
// LIST per thousand keys. The key-order reading of the listing that
// general purpose buckets get (PROTOCOL.md §8) fails there: the store
// refuses its prefix, and on a store that accepted it and ignored
// StartAfter it could never find the newest epoch (it searched without
// end, until a listing had to list only keys after its StartAfter: now it
// fails at its second LIST with ErrUnorderedListing).
func TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing(t *testing.T) {
	t.Parallel()
	counter := &s3test.Counter{}
	d, bucket, api := emulatedDirectoryBucket(t, counter)
	name := "team/app"
	const prior = 2344
	keys := []string{name + "/notes.txt", name + "/sub/lock-0000000001.json"} // a foreign key, a nested lock
	for e := uint64(1); e <= prior; e++ {
		if e%7 != 0 || e == prior { // gaps, as partial cleanups leave
			keys = append(keys, epochKey(name, e))
		}
	}
	putKeys(t, api, bucket, keys, func(k string) []byte {
		if _, e, ok := parseKey(k); ok {
			return EncodeReleasedForTest("earlier", e, time.Minute) // every earlier holder released
		}
		return []byte("{}")
	})

	// Today's reading of the listing for general purpose buckets, on the
	// same store, before anyone acquires (so no cleanup shortens the
	// history): the store refuses its prefix, and on a store that accepted
	// it and ignored StartAfter the search fails (it used to go on without
	// end).
	keyOrder, err := New(api, bucket, WithHolder("key-order"))
	if err != nil {
		t.Fatal(err)
	}
	keyOrder.directory = false
	var held *HeldError
	if _, err := keyOrder.TryAcquire(t.Context(), name); err == nil || errors.As(err, &held) || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Errorf("a key-order TryAcquire on the directory bucket = %v; want the store's refusal of its prefix", err)
	}
	d.SetLeniency(s3test.IgnoringStartAfter)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var spun int
	spin := &stopAfter{next: counter, lists: &spun, limit: 50, stop: stop}
	spinning, err := New(s3.New(api.Options(), func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: spin} }), bucket)
	if err != nil {
		t.Fatal(err)
	}
	spinning.directory = false
	newest, found, _, err := spinning.findNewest(ctx, name)
	if !errors.Is(err, ErrUnorderedListing) || found || spun > 2 {
		t.Errorf("the key-order search on a lenient store = epoch %d (found %v), %v after %d LISTs; want ErrUnorderedListing at the second LIST", newest.epoch, found, err, spun)
	}
	t.Logf("key-order search: failed after %d LISTs: %v", spun, err)
	d.SetLeniency(s3test.Strict)

	holder, err := New(api, bucket, WithHolder("holder"))
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire on the directory bucket: %v", err)
	}
	// Counted before the acquisition's history cleanup (in the background,
	// from the listing it has) deletes what it may.
	lists, gets := counter.Count("ListObjectsV2"), counter.Count("GetObject")
	defer func() { _ = l.Release(context.Background()) }()
	if l.Token().Epoch != prior+1 {
		t.Fatalf("the holder took epoch %d; want %d, after the newest listed", l.Token().Epoch, prior+1)
	}
	// One LIST per thousand keys; twice that if the attempt took longer
	// than attemptWindow and listed again for a newer epoch (§5 step 5).
	if want := (len(keys) + 999) / 1000; lists != want && lists != 2*want || gets != 1 {
		t.Errorf("the TryAcquire made %d LISTs and %d GETs; want %d LISTs (one per thousand keys; %d with step 5) and one GET", lists, gets, want, 2*want)
	}

	other, err := New(api, bucket, WithHolder("other"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.TryAcquire(t.Context(), name)
	if !errors.As(err, &held) || held.Epoch != prior+1 || held.Holder != "holder" {
		t.Fatalf("a second TryAcquire = %v; want a *HeldError naming holder at epoch %d", err, prior+1)
	}
}

// TestDirectoryBuckets_KeyOrderWouldMissTheHolder: on a store that lists in
// its own order and takes StartAfter as a position in that order (as
// s3test.StartAfterInListingOrder does; AWS documents directory buckets to
// support neither key order nor StartAfter, and the emulation refuses
// StartAfter by default), the key-order reading of a lock whose 1,094
// epochs span two pages would report epoch 1,093, released, while epoch
// 1,094 is held: its gallop lands on a page that does not hold the newest
// epoch (the layout is one the hash order hides the newest epoch in: about
// one lock in twenty of this size, found by trying names). That page lists
// keys before its StartAfter, so the key-order reading now fails closed
// instead (ErrUnorderedListing, PROTOCOL.md §8): Current and TryAcquire
// both, and no second lease is taken. s3lock's reading of a directory
// bucket finds the holder.
func TestDirectoryBuckets_KeyOrderWouldMissTheHolder(t *testing.T) {
	t.Parallel()
	d, bucket, api := emulatedDirectoryBucket(t, &s3test.Counter{})
	const name, newest = "team/app", 1094
	var keys []string
	for e := uint64(1); e <= newest; e++ {
		keys = append(keys, epochKey(name, e))
	}
	putKeys(t, api, bucket, keys, func(k string) []byte {
		_, e, _ := parseKey(k)
		if e == newest {
			return encodeHeld(t, "holder", e, time.Hour)
		}
		return EncodeReleasedForTest("earlier", e, time.Minute)
	})

	d.SetLeniency(s3test.StartAfterInListingOrder)
	keyOrder, err := New(api, bucket, WithHolder("key-order"))
	if err != nil {
		t.Fatal(err)
	}
	keyOrder.directory = false
	st, err := keyOrder.Current(t.Context(), name)
	if !errors.Is(err, ErrUnorderedListing) {
		t.Fatalf("the key-order Current = epoch %d, held %t by %q, released %t, %v; want ErrUnorderedListing, not a reading that misses the holder of epoch %d",
			st.Epoch, st.Held, st.Holder, st.Released, err, newest)
	}
	t.Logf("the key-order Current: %v", err)
	l, err := keyOrder.TryAcquire(t.Context(), name)
	if err == nil {
		_ = l.Release(context.Background())
		t.Fatalf("the key-order TryAcquire took epoch %d while epoch %d is held", l.Token().Epoch, newest)
	}
	if !errors.Is(err, ErrUnorderedListing) {
		t.Errorf("the key-order TryAcquire = %v; want ErrUnorderedListing", err)
	}
	d.SetLeniency(s3test.Strict)

	c, err := New(api, bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Current(t.Context(), name)
	if err != nil || st.Epoch != newest || !st.Held || st.Holder != "holder" {
		t.Errorf("Current on the directory bucket = epoch %d, held %t by %q, %v; want epoch %d held by holder", st.Epoch, st.Held, st.Holder, err, newest)
	}
	if _, err := api.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(epochKey(name, newest+1))}); classify(err) != failNotFound {
		t.Errorf("HEAD of epoch %d = %v; want not found: no second lease may be granted", newest+1, err)
	}
}

// encodeHeld returns the payload of a lease of holder at epoch that its
// holder acquired now, as the protocol writes it.
func encodeHeld(t *testing.T, holder string, epoch uint64, validity time.Duration) []byte {
	t.Helper()
	p := payload{owner: owner{Holder: holder, ValidityMs: validity.Milliseconds()}, Format: formatVersion, Epoch: epoch,
		Nonce: randomHex(16), AcquiredAt: time.Now().UTC()}
	b, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stopAfter is a transport that ends a search (stop) once it has made
// limit LISTs.
type stopAfter struct {
	next  http.RoundTripper
	lists *int
	limit int
	stop  context.CancelFunc
	mu    sync.Mutex
}

func (s *stopAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if s3test.Operation(r) == "ListObjectsV2" {
		if *s.lists++; *s.lists >= s.limit {
			s.stop()
		}
	}
	s.mu.Unlock()
	return s.next.RoundTrip(r)
}
