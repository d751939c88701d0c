package s3lock

import (
	"bytes"
	"net/http"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// TestFindNewest_LongHistory: when a lock's epoch objects do not fit one
// LIST page (history written without cleanup), the newest epoch is still
// found, with gaps and foreign keys in the way, in O(log n) LISTs.
func TestFindNewest_LongHistory(t *testing.T) {
	t.Parallel()
	counter := &s3test.Counter{}
	ns := s3test.New(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return counter.Wrap(next) }))
	c, err := New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name("long")
	const newest = 2345
	var keys []string
	for e := uint64(1); e <= newest; e++ {
		if e%7 == 0 && e != newest { // gaps, as partial cleanups leave
			continue
		}
		keys = append(keys, epochKey(name, e))
	}
	keys = append(keys, name+"/lock-0000001000.json.bak", name+"/lock-zzz.json")
	var wg sync.WaitGroup
	work := make(chan string)
	for range 32 {
		wg.Go(func() {
			for k := range work {
				if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{
					Bucket: aws.String(ns.Bucket), Key: aws.String(k), Body: bytes.NewReader([]byte("{}")),
				}); err != nil {
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

	counter.Reset()
	got, found, first, err := c.findNewest(t.Context(), name)
	if err != nil || !found || got.epoch != newest {
		t.Fatalf("findNewest = %d, %v, %v; want %d", got.epoch, found, err, newest)
	}
	n := counter.Count("ListObjectsV2")
	switch {
	case ns.Target.Directory:
		// A directory bucket is listed whole: a LIST per thousand keys.
		if want := (len(keys) + 999) / 1000; n != want || first.truncated {
			t.Errorf("findNewest used %d LISTs (truncated %v) for %d keys on a directory bucket; want %d, not truncated", n, first.truncated, len(keys), want)
		}
	case !first.truncated:
		t.Error("the first page was not truncated: the test did not exercise the long path")
	case n > 8:
		t.Errorf("findNewest used %d LISTs for %d epochs; want O(log n)", n, newest)
	}
	t.Logf("found epoch %d in %d LISTs", got.epoch, counter.Count("ListObjectsV2"))
}
