package s3test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// EncryptionPolicy is a bucket policy in front of a test store, as a reverse
// proxy: it answers 403 AccessDenied to every PUT without
// x-amz-server-side-encryption, as AWS does for a policy that denies
// unencrypted uploads, and counts the PUTs it let through and denied. Point
// clients at URL.
type EncryptionPolicy struct {
	URL            string
	Passed, Denied atomic.Int64
	proxy          *httputil.ReverseProxy
}

// NewEncryptionPolicy starts the policy in front of target (an http:// URL)
// for the rest of the test.
func NewEncryptionPolicy(tb testing.TB, target string) *EncryptionPolicy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil || target == "" {
		tb.Fatalf("s3test: the encryption policy needs the store's endpoint, not %q (%v)", target, err)
	}
	p := &EncryptionPolicy{proxy: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the request is signed for the client's Host header
	}}}
	srv := httptest.NewServer(p)
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *EncryptionPolicy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		if r.Header.Get("X-Amz-Server-Side-Encryption") == "" {
			p.Denied.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>unencrypted PUT denied by bucket policy</Message></Error>`)
			return
		}
		p.Passed.Add(1)
	}
	p.proxy.ServeHTTP(w, r)
}
