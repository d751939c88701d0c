package s3test

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Counter is an http.RoundTripper that counts the requests that reach the
// wire, by S3 operation. Counts include the SDK's own retries. They leave
// out CreateSession: on a directory bucket the SDK asks for a session
// before a client's first request and again when it runs out (every five
// minutes), whatever s3lock does; Sessions counts them.
type Counter struct {
	Next http.RoundTripper

	mu       sync.Mutex
	counts   map[string]int
	statuses map[string]int // "op status", e.g. "GetObject 304"
	sessions int
}

// Counting returns a new Counter and the client option that installs it.
func Counting() (*Counter, Option) {
	c := &Counter{}
	return c, WithTransport(func(next http.RoundTripper) http.RoundTripper { return c.Wrap(next) })
}

// Wrap makes c count the requests sent through next.
func (c *Counter) Wrap(next http.RoundTripper) http.RoundTripper {
	c.Next = next
	return c
}

// RoundTrip implements http.RoundTripper.
func (c *Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	op := Operation(req)
	if op == "CreateSession" {
		c.mu.Lock()
		c.sessions++
		c.mu.Unlock()
		return c.Next.RoundTrip(req)
	}
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
	c.mu.Unlock()
	resp, err := c.Next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		if c.statuses == nil {
			c.statuses = map[string]int{}
		}
		c.statuses[op+" "+strconv.Itoa(resp.StatusCode)]++
		c.mu.Unlock()
	}
	return resp, err
}

// CountStatus returns the number of requests for op that were answered with
// the HTTP status.
func (c *Counter) CountStatus(op string, status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statuses[op+" "+strconv.Itoa(status)]
}

// Sessions returns the number of CreateSession requests since the last
// Reset.
func (c *Counter) Sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions
}

// Total returns the number of requests counted since the last Reset.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Count returns the number of requests for one operation, e.g. "PutObject".
func (c *Counter) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Reset zeroes the counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
	c.statuses = nil
	c.sessions = 0
}

// String lists the counts, e.g. "GetObject=1 ListObjectsV2=1 PutObject=1".
func (c *Counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]string, 0, len(c.counts))
	for k, v := range c.counts {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Operation names the S3 operation of an SDK request from its method and
// query (the SDK tags most operations with an x-id parameter).
func Operation(req *http.Request) string {
	q := req.URL.Query()
	if id := q.Get("x-id"); id != "" {
		return id
	}
	switch {
	case q.Has("session") && req.Method == http.MethodGet:
		return "CreateSession"
	case q.Get("list-type") == "2":
		return "ListObjectsV2"
	case q.Has("delete") && req.Method == http.MethodPost:
		return "DeleteObjects"
	}
	switch req.Method {
	case http.MethodHead:
		return "HeadObject"
	case http.MethodDelete:
		return "DeleteObject"
	case http.MethodPut:
		if strings.Count(strings.Trim(req.URL.Path, "/"), "/") == 0 {
			return "CreateBucket"
		}
		return "PutObject"
	}
	return req.Method
}
