package s3test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a store, so that a test can cut one
// client (or one process) off from it while others still reach it. It is a
// real network hop: the client's requests travel over loopback through it.
//
// Two kinds of outage:
//   - Cut: the network refuses — every connection is closed and new ones are
//     refused at once, so the client learns quickly that the store is gone;
//   - Blackhole: the network swallows — connections are accepted and held
//     open, bytes in either direction are dropped, nothing is ever answered,
//     so every request hangs until the client's own timeout.
type Proxy struct {
	// URL is the proxy's endpoint (http://127.0.0.1:PORT) to give the client.
	URL string

	target string
	l      net.Listener

	mu         sync.Mutex
	cut        bool
	blackholed bool
	conns      []net.Conn
}

// NewProxy starts a proxy to target (an http:// URL) that forwards until the
// test cuts or blackholes it; it closes when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), target: u.Host, l: l}
	tb.Cleanup(p.Cut)
	go p.serve()
	return p
}

func (p *Proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, hole := p.cut, p.blackholed
		if !cut {
			p.conns = append(p.conns, in)
		}
		p.mu.Unlock()
		switch {
		case cut:
			_ = in.Close()
			continue
		case hole:
			go p.pipe(io.Discard, in) // swallow the request, never answer
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, out)
		p.mu.Unlock()
		go func() { p.pipe(out, in); _ = out.Close() }()
		go func() { p.pipe(in, out); _ = in.Close() }()
	}
}

// pipe copies from src to dst until src ends, dropping what it reads while
// the proxy is blackholed.
func (p *Proxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isBlackholed() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) isBlackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackholed
}

// Blackhole makes the proxy swallow everything from now on: requests in
// flight never get their answer, new connections are accepted and never
// answered. Connections stay open until the proxy is cut.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = true
}

// Cut closes every connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.l.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
