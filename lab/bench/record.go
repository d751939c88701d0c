package main

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// event is one S3 request as a recorder saw it: when it was sent and
// answered, which operation on which key, and the HTTP status (0 when no
// answer came).
type event struct {
	sent, done time.Time
	op         string // e.g. "PutObject" (s3test.Operation)
	key        string // the object key, without the bucket
	status     int
}

// ok reports whether the request succeeded (2xx).
func (e event) ok() bool { return e.status >= 200 && e.status < 300 }

// recorder collects events from concurrent requests.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// take returns the events so far, in the order they were sent.
func (r *recorder) take() []event {
	r.mu.Lock()
	evs := slices.Clone(r.events)
	r.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b event) int { return a.sent.Compare(b.sent) })
	return evs
}

// reset forgets the events so far.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

// recordingClient is the HTTP client of an in-process SDK client: it records
// each request (every attempt, the SDK's retries included) as it leaves.
type recordingClient struct {
	next aws.HTTPClient
	rec  *recorder
}

// Do implements aws.HTTPClient.
func (c recordingClient) Do(req *http.Request) (*http.Response, error) {
	e := event{sent: time.Now(), op: s3test.Operation(req), key: objectKey(req.URL.Path)}
	resp, err := c.next.Do(req)
	e.done = time.Now()
	if err == nil {
		e.status = resp.StatusCode
	}
	c.rec.add(e)
	return resp, err
}

// objectKey returns the key of a path-style request path (/bucket/key).
func objectKey(path string) string {
	_, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return key
}

// counts are requests by how S3 Standard prices them; fractional when they
// are averages.
type counts struct {
	writes float64 // PUT, COPY, POST and LIST: PutObject, ListObjectsV2, DeleteObjects
	reads  float64 // GET and every other priced request: GetObject, HeadObject
	free   float64 // DELETE: DeleteObject
}

// countOf tallies events by price class.
func countOf(evs []event) counts {
	var c counts
	for _, e := range evs {
		switch e.op {
		case "GetObject", "HeadObject":
			c.reads++
		case "DeleteObject":
			c.free++
		default:
			c.writes++
		}
	}
	return c
}

func (c counts) total() float64 { return c.writes + c.reads + c.free }

// scale multiplies every count by f.
func (c counts) scale(f float64) counts {
	return counts{writes: c.writes * f, reads: c.reads * f, free: c.free * f}
}

// per divides every count by n (zero counts when n is zero).
func (c counts) per(n float64) counts {
	if n == 0 {
		return counts{}
	}
	return c.scale(1 / n)
}

// filter returns the events that match keep.
func filter(evs []event, keep func(event) bool) []event {
	var out []event
	for _, e := range evs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// sentBetween reports the events sent in [from, to).
func sentBetween(evs []event, from, to time.Time) []event {
	return filter(evs, func(e event) bool { return !e.sent.Before(from) && e.sent.Before(to) })
}

// opTimes collects how long answered requests took at the taps, by request
// class: what the store and the latency profile made of them together.
type opTimes struct {
	mu    sync.Mutex
	byCls [latency.NumClasses][]time.Duration
}

// add notes e's time; a nil opTimes notes nothing.
func (o *opTimes) add(e event) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	c := latency.ClassOf(e.op)
	o.byCls[c] = append(o.byCls[c], e.done.Sub(e.sent))
}

// of returns the times noted for class c.
func (o *opTimes) of(c latency.Class) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.byCls[c])
}
