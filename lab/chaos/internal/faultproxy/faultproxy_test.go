package faultproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// store stands in for the S3 server: it counts the requests that reach it
// and answers with the Host header it saw.
func store(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, r.Host)
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func put(t *testing.T, client *http.Client, url string) (string, error) {
	t.Helper()
	return send(t, client, http.MethodPut, url+"/bucket/key")
}

// send sends one request with a small body and returns the answer's body.
func send(t *testing.T, client *http.Client, method, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestProxy_ForwardsWithTheClientsHost(t *testing.T) {
	s, hits := store(t)
	p := newProxy(t, s.URL)
	got, err := put(t, http.DefaultClient, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(p.URL, "http://"); got != want || hits.Load() != 1 {
		t.Fatalf("the store saw Host %q (%d requests), want %q once: a signed request must keep its Host", got, hits.Load(), want)
	}
}

func TestProxy_DropAnswersAfterTheStoreCommitted(t *testing.T) {
	s, hits := store(t)
	p := newProxy(t, s.URL)
	p.Drop(1)
	if _, err := put(t, http.DefaultClient, p.URL); err == nil {
		t.Fatal("the client got an answer the proxy should have dropped")
	}
	if hits.Load() == 0 || p.Counts().Dropped == 0 {
		t.Fatalf("store saw %d requests, proxy dropped %d answers; want the request through and its answer dropped", hits.Load(), p.Counts().Dropped)
	}
}

func TestProxy_BlackholeSwallowsUntilHealed(t *testing.T) {
	s, hits := store(t)
	p := newProxy(t, s.URL)
	p.Blackhole()
	if err := putIntoBlackhole(t, p); err == nil {
		t.Fatal("a blackholed request got an answer")
	}
	p.Heal()
	if hits.Load() != 0 {
		t.Fatalf("a blackholed request reached the store")
	}
	if c := p.Counts(); c.Blackholes != 1 || c.Swallowed == 0 {
		t.Fatalf("counts %+v, want one blackhole that swallowed a request", c)
	}
	if _, err := put(t, http.DefaultClient, p.URL); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestProxy_DelayHoldsRequests(t *testing.T) {
	s, _ := store(t)
	p := newProxy(t, s.URL)
	p.Delay(50 * time.Millisecond)
	for range 5 {
		if _, err := put(t, http.DefaultClient, p.URL); err != nil {
			t.Fatal(err)
		}
	}
	if c := p.Counts(); c.Delayed != 5 {
		t.Fatalf("counts %+v, want 5 delayed", c)
	}
}

// latency is the fixed latency of the latency tests: long enough to stand
// out from loopback's time, short enough to keep the tests fast.
const latency = 50 * time.Millisecond

// arrivals stands in for the S3 server and notes when each request reached
// it.
func arrivals(t *testing.T) (*httptest.Server, <-chan time.Time) {
	t.Helper()
	at := make(chan time.Time, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at <- time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(s.Close)
	return s, at
}

func TestProxy_LatencyIsDrawnPerOperation(t *testing.T) {
	s, _ := store(t)
	p := newProxy(t, s.URL)
	var mu sync.Mutex
	var ops []string
	p.Latency(func(op string) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
		if op == "GetObject" {
			return 0 // loopback's: holds nothing
		}
		return time.Millisecond
	})
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/bucket/key?x-id=GetObject"}, {http.MethodGet, "/bucket?list-type=2"}, {http.MethodPut, "/bucket/key"},
	} {
		if _, err := send(t, http.DefaultClient, r.method, p.URL+r.path); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GetObject", "ListObjectsV2", "PutObject"}; !slices.Equal(ops, want) {
		t.Errorf("the draws saw the operations %q, want %q", ops, want)
	}
	if c := p.Counts(); c.Latent != 2 {
		t.Errorf("counts %+v, want 2 latent: a zero draw holds no request", c)
	}
}

// The store acts at the end of the latency, in every mode that forwards the
// request. Only a lower bound is checked: a loaded machine may add any time.
func TestProxy_LatencyHoldsRequestsBeforeTheStore(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		fault func(*Proxy)
	}{
		{"pass", func(*Proxy) {}},
		{"delay", func(p *Proxy) { p.Delay(10 * time.Millisecond) }},
		{"drop", func(p *Proxy) { p.Drop(1) }},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s, at := arrivals(t)
			p := newProxy(t, s.URL)
			p.Latency(func(string) time.Duration { return latency })
			tc.fault(p)
			sent := time.Now()
			_, err := put(t, http.DefaultClient, p.URL)
			answered := time.Since(sent)
			if err == nil && answered < latency {
				t.Errorf("answered %s after the request, before the latency of %s had passed", answered, latency)
			}
			if reached := (<-at).Sub(sent); reached < latency {
				t.Errorf("the store saw the request %s after it was sent, before the latency of %s had passed", reached, latency)
			}
			if c := p.Counts(); c.Latent != 1 {
				t.Errorf("counts %+v, want 1 latent", c)
			}
		})
	}
}

func TestProxy_LatencySparesSwallowedRequests(t *testing.T) {
	s, hits := store(t)
	p := newProxy(t, s.URL)
	var drawn atomic.Bool
	p.Latency(func(string) time.Duration { drawn.Store(true); return latency })
	p.Blackhole()
	if err := putIntoBlackhole(t, p); err == nil {
		t.Fatal("a blackholed request got an answer")
	}
	p.Heal()
	if c := p.Counts(); drawn.Load() || c.Latent != 0 || c.Swallowed != 1 || hits.Load() != 0 {
		t.Errorf("drawn %t, counts %+v, %d at the store: want the request swallowed, meeting no latency", drawn.Load(), c, hits.Load())
	}
}

// putIntoBlackhole sends a PUT through p, whose blackhole is on, waits until
// the blackhole holds it, gives up on it and returns what the client got.
// The caller heals only after that: healed before the proxy took the
// request (a slow machine), the proxy would forward it in pass mode.
func putIntoBlackhole(t *testing.T, p *Proxy) error {
	t.Helper()
	before := p.Counts().Swallowed
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.URL+"/bucket/key", strings.NewReader("body"))
		if err != nil {
			answered <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); p.Counts().Swallowed == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not take the request within 10 s: counts %+v", p.Counts())
		}
	}
	cancel()
	return <-answered
}
