package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// tap is a reverse proxy on loopback in front of the store that records
// every request passing through it, timed when it arrived and when its
// answer had been passed back. It is how the measurements see the requests
// of processes they do not control (terraform, `bench holder`), and it
// times both systems at the same place. Each participant of a handoff gets
// its own tap, so whose request is whose is never a guess.
//
// A tap also plays the network and the cloud store: it holds each request
// for a delay drawn from its latency profile (lab/internal/latency) before
// it passes it on, so the store acts on the request at the end of its delay
// and its answer comes straight back. A request whose client gives up
// during the delay is never passed on (recorded with status 0).
type tap struct {
	// URL is the endpoint to give the participant.
	URL   string
	rec   *recorder
	lat   *latency.Sampler
	times *opTimes // where every answered request's time is also noted
	srv   *http.Server
}

// startTap starts a tap in front of the store at target (an http:// URL)
// that delays requests as lat draws and notes their times in times.
func startTap(target string, lat *latency.Sampler, times *opTimes) (*tap, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a tap: %w", err)
	}
	t := &tap{URL: "http://" + ln.Addr().String(), rec: &recorder{}, lat: lat, times: times}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			// The client signed the Host it sent (SigV4): keep it.
			pr.Out.Host = pr.In.Host
		},
		ErrorLog: log.New(io.Discard, "", 0), // a failed request is recorded with status 502
	}
	t.srv = &http.Server{Handler: t.record(proxy), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *tap) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := event{sent: time.Now(), op: s3test.Operation(r), key: objectKey(r.URL.Path)}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if delayed(r.Context(), t.lat.Draw(e.op)) {
			next.ServeHTTP(sw, r)
		} else {
			sw.status = 0
		}
		e.done, e.status = time.Now(), sw.status
		t.rec.add(e)
		if e.status != 0 {
			t.times.add(e)
		}
	})
}

// delayed sleeps for d and reports whether ctx was still live at its end.
func delayed(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// close stops the tap.
func (t *tap) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
}

// statusWriter remembers the status of the response it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
