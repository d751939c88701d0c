package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/bucket/key", strings.NewReader("body"))
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
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := put(t, client, p.URL); err == nil {
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
