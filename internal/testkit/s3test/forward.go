package s3test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
)

// ForwardProxy is an HTTP proxy, as clients configure with HTTPS_PROXY or
// HTTP_PROXY: it tunnels CONNECT requests (https:// targets) and forwards
// requests with an absolute URI (http:// targets), and records each request
// it is asked to carry. It only reaches loopback hosts; a request for any
// other host (AWS's own endpoints, say) is recorded and refused with 403, so
// a test can see where a client would have gone without leaving the machine.
type ForwardProxy struct {
	// URL is the proxy's address (http://127.0.0.1:PORT) for the client.
	URL string

	forward   *httputil.ReverseProxy
	transport *http.Transport

	mu       sync.Mutex
	requests []ProxiedRequest
	tunnels  []net.Conn
	wg       sync.WaitGroup
}

// maxRecordedBody is how much of a forwarded request's body a ForwardProxy
// records: S3 lock requests are small.
const maxRecordedBody = 1 << 20

// ProxiedRequest is one request a ForwardProxy was asked to carry.
type ProxiedRequest struct {
	// Method is CONNECT for a tunnel, else the forwarded request's method.
	Method string
	// Host is the target, host:port for a tunnel, as asked for.
	Host string
	// Header holds a forwarded request's headers, Body its body, up to
	// maxRecordedBody bytes (none for a tunnel, whose requests the proxy
	// cannot see).
	Header http.Header
	Body   []byte
	// Query is a forwarded request's URL query (DeleteObjects is
	// POST /bucket?delete).
	Query string
	// Refused says the target was not a loopback host.
	Refused bool
}

// NewForwardProxy starts a proxy for the rest of the test.
func NewForwardProxy(tb testing.TB) *ForwardProxy {
	tb.Helper()
	p := &ForwardProxy{transport: http.DefaultTransport.(*http.Transport).Clone()}
	p.transport.Proxy = nil
	p.forward = &httputil.ReverseProxy{
		Transport: p.transport,
		// The request already names its absolute target; keep its Host,
		// which the client signed.
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.Host = r.In.Host },
	}
	srv := httptest.NewServer(p)
	p.URL = srv.URL
	tb.Cleanup(func() {
		srv.Close()
		p.mu.Lock()
		for _, c := range p.tunnels {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
		p.transport.CloseIdleConnections()
	})
	return p
}

// Requests returns the requests asked of the proxy so far.
func (p *ForwardProxy) Requests() []ProxiedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProxiedRequest(nil), p.requests...)
}

// Count returns how many requests the proxy was asked to carry.
func (p *ForwardProxy) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// Hosts returns the targets asked for, in order.
func (p *ForwardProxy) Hosts() []string {
	var hosts []string
	for _, r := range p.Requests() {
		hosts = append(hosts, r.Host)
	}
	return hosts
}

func (p *ForwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if r.Method != http.MethodConnect {
		host = r.URL.Host
	}
	rec := ProxiedRequest{Method: r.Method, Host: host, Refused: !isLoopback(host)}
	if r.Method != http.MethodConnect {
		rec.Header, rec.Query = r.Header.Clone(), r.URL.RawQuery
		if r.Body != nil {
			// Record the start of the body and forward all of it.
			head, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
			if err != nil {
				http.Error(w, "s3test proxy: reading the request body: "+err.Error(), http.StatusBadGateway)
				return
			}
			rec.Body = head
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		}
	}
	p.mu.Lock()
	p.requests = append(p.requests, rec)
	p.mu.Unlock()
	switch {
	case rec.Refused:
		http.Error(w, "s3test proxy: only loopback targets are reachable, not "+host, http.StatusForbidden)
	case r.Method == http.MethodConnect:
		p.tunnel(w, host)
	case !r.URL.IsAbs():
		http.Error(w, "s3test proxy: not a proxy request (no absolute URI)", http.StatusBadRequest)
	default:
		p.forward.ServeHTTP(w, r)
	}
}

// tunnel connects the client to host and copies bytes both ways.
func (p *ForwardProxy) tunnel(w http.ResponseWriter, host string) {
	out, err := net.Dial("tcp", host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = out.Close()
		http.Error(w, "s3test proxy: cannot hijack the connection", http.StatusInternalServerError)
		return
	}
	in, _, err := hj.Hijack()
	if err != nil {
		_ = out.Close()
		return
	}
	if _, err := io.WriteString(in, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.mu.Lock()
	p.tunnels = append(p.tunnels, in, out)
	p.mu.Unlock()
	p.wg.Add(2)
	go func() { defer p.wg.Done(); _, _ = io.Copy(out, in); _ = out.Close() }()
	go func() { defer p.wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
}

// isLoopback reports whether host (host:port) is localhost or a loopback
// address.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
