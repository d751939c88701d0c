//go:build unix

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// newEncryptionPolicy starts a bucket policy in front of the test store, as
// a reverse proxy: it answers 403 AccessDenied to every PUT without
// x-amz-server-side-encryption, as AWS does for a policy that denies
// unencrypted uploads. It returns the proxy's endpoint and the count of PUTs
// it denied.
func newEncryptionPolicy(t *testing.T, target string) (endpoint string, denied *atomic.Int64) {
	t.Helper()
	if target == "" {
		t.Skip("needs a custom endpoint to put the policy proxy in front of")
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the request is signed for the client's Host header
	}}
	denied = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.Header.Get("X-Amz-Server-Side-Encryption") == "" {
			denied.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>unencrypted PUT denied by bucket policy</Message></Error>`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, denied
}

// A bucket whose policy denies unencrypted PUTs: `s3lock run --encrypt` (or
// S3LOCK_ENCRYPT) takes and releases the lock; without it, s3lock exits 1
// and says access was denied.
func TestRun_EncryptedBucket(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	endpoint, denied := newEncryptionPolicy(t, c.ns.Target.Endpoint)

	t.Run("--encrypt", func(t *testing.T) {
		name := c.name("encrypted/flag")
		c.mustRun("run", "--quiet", "--endpoint", endpoint, "--encrypt", name, "--", "true")
		if st := c.current(name); st.Epoch != 1 || !st.Released {
			t.Fatalf("after run the lock is %+v, want epoch 1 released", st)
		}
		if n := denied.Load(); n != 0 {
			t.Fatalf("the bucket policy denied %d unencrypted PUTs", n)
		}
	})
	t.Run(envEncrypt, func(t *testing.T) {
		name := c.name("encrypted/env")
		r := c.runWith(append(c.without(envEncrypt), envEncrypt+"=true"), "", "run", "--quiet", "--endpoint", endpoint, name, "--", "true")
		if r.code != exitOK {
			t.Fatalf("got %s, want exit 0", r)
		}
		if st := c.current(name); !st.Released {
			t.Fatalf("after run the lock is %+v, want it released", st)
		}
	})
	t.Run("without encryption", func(t *testing.T) {
		name := c.name("encrypted/off")
		r := c.run("run", "--quiet", "--endpoint", endpoint, name, "--", "true")
		if r.code != exitError || !strings.Contains(r.stderr, "AccessDenied") {
			t.Fatalf("got %s, want exit %d saying AccessDenied", r, exitError)
		}
		if denied.Load() == 0 {
			t.Fatal("the bucket policy saw no unencrypted PUT")
		}
	})
}
