// Package faultproxy is the chaos suite's own network between a worker and
// the store: an HTTP proxy on loopback that forwards S3 requests unchanged
// (signatures stay valid: the Host header is kept) until told to misbehave.
//
// Three faults, each switched on for a while:
//   - Blackhole: connections are accepted and requests read, but nothing is
//     ever answered; connections are closed when the blackhole ends.
//   - Delay: each request waits a random time, up to a bound, before it is
//     forwarded or before its answer is returned. A delayed request is
//     forwarded even if its client gave up meanwhile, as a slow network
//     would deliver it.
//   - Drop: a share of the write requests (PUT, POST, DELETE) are forwarded
//     and answered by the store, and then the proxy closes the client's
//     connection instead of returning the answer: the write happened, the
//     client cannot know.
//
// Beneath the faults, a proxy can also play a cloud store's latency
// (Latency): it holds every request it forwards for a delay drawn for its
// operation before it forwards it, so the store acts at the end of the
// delay and its answer comes straight back. Unlike the benchmarks' taps,
// which drop a request whose client gave up during its delay, the proxy
// forwards it anyway, as a slow network would deliver it.
package faultproxy

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// Counts says how often each fault struck, and how many requests the
// latency held.
type Counts struct {
	Blackholes int // blackhole periods that swallowed at least one request
	Swallowed  int // requests swallowed by a blackhole
	Delayed    int // requests delayed
	Dropped    int // write answers dropped after the store answered
	DroppedOK  int // of those, answers that said the write succeeded (2xx)
	Latent     int // requests held for a latency draw above zero (Latency)
}

// upstreamTimeout bounds a forwarded request: the store answers in
// milliseconds, or refuses at once while it is down; a minute only catches a
// store that hangs, so that Close returns.
const upstreamTimeout = time.Minute

type mode int

const (
	pass mode = iota
	blackhole
	delay
	drop
)

// Proxy is one proxy. Its methods are safe for concurrent use.
type Proxy struct {
	// URL is the proxy's endpoint, to give the client instead of the store's.
	URL string

	target   *url.URL
	l        net.Listener
	srv      *http.Server
	upstream *http.Client
	inflight sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	rng      *rand.Rand
	mode     mode
	maxDelay time.Duration
	dropProb float64
	latency  func(op string) time.Duration // nil: none
	hole     chan struct{}                 // closed when the current blackhole ends
	holeHits int                           // requests swallowed by the current blackhole
	counts   Counts
}

// New starts a proxy to the store at target (an http:// URL), forwarding
// everything until a fault is switched on. seed makes the choices of delays
// and drops repeatable.
func New(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:    "http://" + l.Addr().String(),
		target: u,
		l:      l,
		rng:    rand.New(rand.NewPCG(seed, seed^0xfa17)),
		upstream: &http.Client{
			Timeout: upstreamTimeout,
			Transport: &http.Transport{
				Proxy:               nil,
				DisableCompression:  true, // pass bodies through as they are
				MaxIdleConnsPerHost: 16,
			},
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Blackhole swallows every request until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBlackholeLocked()
	p.mode, p.hole, p.holeHits = blackhole, make(chan struct{}), 0
}

// Delay holds each request for a random time in [0, max] until Heal.
func (p *Proxy) Delay(limit time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBlackholeLocked()
	p.mode, p.maxDelay = delay, limit
}

// Drop drops the answers of a share prob of the write requests, after the
// store answered them, until Heal.
func (p *Proxy) Drop(prob float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBlackholeLocked()
	p.mode, p.dropProb = drop, prob
}

// Latency holds every request that is forwarded (not one a blackhole
// swallows) for draw(op) before it forwards it, op being the request's
// operation as s3test.Operation names it: in every mode, from now on, and
// on top of a Delay fault's delay. Like a delayed request, a latent one is
// forwarded even if its client gave up meanwhile (the benchmarks' taps drop
// it). draw is called with the proxy's lock held, so it must be quick and
// must not call the proxy. nil switches the latency off.
func (p *Proxy) Latency(draw func(op string) time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = draw
}

// Heal forwards everything again; connections held by a blackhole are
// closed. A latency (Latency) stays.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBlackholeLocked()
	p.mode = pass
}

func (p *Proxy) endBlackholeLocked() {
	if p.hole == nil {
		return
	}
	close(p.hole)
	if p.holeHits > 0 {
		p.counts.Blackholes++
	}
	p.hole, p.holeHits = nil, 0
}

// Counts returns how often each fault struck so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Close heals the proxy, stops accepting connections and waits for the
// requests in flight (delayed ones included) to reach the store.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.endBlackholeLocked()
	p.mode = pass
	p.mu.Unlock()
	_ = p.srv.Close()
	p.inflight.Wait()
	p.upstream.CloseIdleConnections()
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := p.decide(r)
	if !ok {
		hangUp(w)
		return
	}
	defer p.inflight.Done()
	if f.hole != nil {
		swallow(w, f.hole)
		return
	}
	time.Sleep(f.latency + f.before)
	ans, err := p.forward(r)
	if err != nil {
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	time.Sleep(f.after)
	if f.drop {
		p.noteDrop(ans.status)
		hangUp(w)
		return
	}
	for k, vs := range ans.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(ans.body)))
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
}

// fate is what the proxy does to one request.
type fate struct {
	hole          chan struct{} // swallow until closed
	latency       time.Duration // the store's, before forwarding
	before, after time.Duration // a Delay fault's
	drop          bool
}

// decide returns the request's fate, and false once the proxy is closed.
// A request it admits counts as in flight until its handler returns.
func (p *Proxy) decide(r *http.Request) (fate, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fate{}, false
	}
	p.inflight.Add(1)
	if p.mode == blackhole {
		p.holeHits++
		p.counts.Swallowed++
		return fate{hole: p.hole}, true
	}
	f := p.faultLocked(r)
	if p.latency != nil {
		if f.latency = p.latency(s3test.Operation(r)); f.latency > 0 {
			p.counts.Latent++
		}
	}
	return f, true
}

// faultLocked returns the fate that the fault in force (not a blackhole)
// deals a request.
func (p *Proxy) faultLocked(r *http.Request) fate {
	switch p.mode {
	case delay:
		p.counts.Delayed++
		d := time.Duration(p.rng.Int64N(int64(p.maxDelay) + 1))
		if p.rng.IntN(2) == 0 {
			return fate{before: d}
		}
		return fate{after: d}
	case drop:
		write := r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete
		return fate{drop: write && p.rng.Float64() < p.dropProb}
	}
	return fate{}
}

func (p *Proxy) noteDrop(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.Dropped++
	if status/100 == 2 {
		p.counts.DroppedOK++
	}
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// answer is the store's answer to a forwarded request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// forward sends r to the store and reads the whole answer. It outlives r's
// context: a request that left the client reaches the store even if the
// client has given up, as on a real network.
func (p *Proxy) forward(r *http.Request) (answer, error) {
	in, err := io.ReadAll(r.Body)
	if err != nil {
		return answer{}, err
	}
	u := *p.target
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, u.String(), bytes.NewReader(in))
	if err != nil {
		return answer{}, err
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = r.Host // the client signed the Host it sent
	out.ContentLength = int64(len(in))
	resp, err := p.upstream.Do(out)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// swallow takes the client's connection and holds it, answering nothing,
// until hole is closed.
func swallow(w http.ResponseWriter, hole <-chan struct{}) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		<-hole // cannot take the connection: just never answer
		return
	}
	go func() { _, _ = io.Copy(io.Discard, conn) }() // read and drop what the client sends
	<-hole
	_ = conn.Close()
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // aborts the response and the connection
	}
	_ = conn.Close()
}
