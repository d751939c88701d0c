package witness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Proxy is a witness standing in front of a store, for clients in other
// processes: an HTTP reverse proxy on loopback that forwards every request
// unchanged (the Host header too, so that signatures stay valid) and records
// the writes to epoch objects through its Witness.
type Proxy struct {
	// URL is the proxy's endpoint, to give clients instead of the store's.
	URL string
	srv *http.Server
}

// proxyShutdown bounds how long Close waits for requests in flight.
const proxyShutdown = 5 * time.Second

// NewProxy starts a proxy to the store at target (an http:// URL) that
// records through w. A store that is down is answered as 502 Bad Gateway
// (recorded with an unknown outcome).
func (w *Witness) NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		Transport: w.Wrap(http.DefaultTransport.(*http.Transport).Clone()),
		// The store is down (restarted): the client sees what a proxy in
		// front of a store that is down answers, and retries.
		ErrorHandler: func(rw http.ResponseWriter, _ *http.Request, _ error) { rw.WriteHeader(http.StatusBadGateway) },
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: rp, ReadHeaderTimeout: time.Minute}}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops the proxy, after the requests in flight (for at most a few
// seconds).
func (p *Proxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), proxyShutdown)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = p.srv.Close()
	}
}
