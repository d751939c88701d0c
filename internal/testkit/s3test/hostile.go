package s3test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// HostileStore is an HTTP server in front of an S3-compatible store (the
// local versitygw, or the DirectoryBuckets emulation in front of it) that
// lists as a misbehaving store does, as its Hostility says: it ignores
// StartAfter, repeats one continuation token forever, says every page is
// truncated, or answers slowly (and it may page at fewer keys than asked). It is how the clients' listing loops are
// tested against stores that would keep them going forever.
//
// Every request other than ListObjectsV2 reaches the store as the client
// sent and signed it. A listing is sent to the store with the parameters
// the hostility leaves it (signed again with the store's credentials), and
// the store's own answer comes back, altered only as the hostility says.
type HostileStore struct {
	// URL is the endpoint to give clients (http://127.0.0.1:PORT).
	URL string

	upstream *url.URL
	creds    aws.Credentials
	region   string
	srv      *http.Server

	mu     sync.Mutex
	h      Hostility
	lists  int
	tokens int
	empty  map[string]emptyRun // EmptyPages: the runs of empty pages under way, by the token that goes on
}

// emptyRun is a listing request answered with empty pages first: the
// request, and how many empty pages are still to come.
type emptyRun struct {
	query url.Values
	left  int
}

// Hostility says how a HostileStore misbehaves. The zero value misbehaves
// in nothing.
type Hostility struct {
	// Prefix limits the listing faults to listings whose prefix starts
	// with it (all listings when empty): a lock's line, say, listed under
	// NAME/lock-line/.
	Prefix string
	// IgnoreStartAfter lists from the beginning whatever StartAfter says.
	IgnoreStartAfter bool
	// RepeatToken answers every listing as truncated, to be continued with
	// one and the same continuation token, and answers that token with the
	// listing's first page again: a listing never ends.
	RepeatToken bool
	// TruncateForever answers every listing as truncated: the store's last
	// page gets a continuation token of its own, which is answered with an
	// empty page that says more follow, with a new token, and so on.
	TruncateForever bool
	// PageSize, when set, lists at most this many keys and common
	// prefixes a page, whatever MaxKeys asks for (S3 lists up to MaxKeys):
	// a long listing without a long history to write first.
	PageSize int
	// Delay holds every request (listings or not) this long before it
	// reaches the store: a store that answers slowly.
	Delay time.Duration
	// EmptyPages answers each listing request first with this many empty
	// pages that say more follow, each with a new continuation token, and
	// then as the store answers the request: a sound store whose pages skip
	// over entries they do not list (S3 over delete markers), which a
	// listing must go on through.
	EmptyPages int
}

// The continuation tokens a HostileStore makes up.
const (
	hostileRepeatToken = "s3test-hostile-repeat"
	hostileEndToken    = "s3test-hostile-end-"
	hostileEmptyToken  = "s3test-hostile-empty-"
)

// StartHostileStore starts a HostileStore in front of the store at
// endpoint, whose credentials it signs listings with. It misbehaves in
// nothing until Set says how.
func StartHostileStore(endpoint, region, accessKey, secretKey string) (*HostileStore, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &HostileStore{URL: "http://" + ln.Addr().String(), upstream: u,
		creds: aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}, region: region}
	pass := &httputil.ReverseProxy{
		// The client signed its request for this server's host: keep it.
		Rewrite:  func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
		ErrorLog: log.New(io.Discard, "", 0),
	}
	h.srv = &http.Server{Handler: h.route(pass), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// NewHostileStore starts a HostileStore in front of tg's store for the rest
// of the test and returns it with the target that reaches it. It skips the
// test unless tg is a store started by this package (whose credentials it
// knows).
func NewHostileStore(tb testing.TB, tg Target) (*HostileStore, Target) {
	tb.Helper()
	if !tg.Local || tg.AccessKey == "" || tg.CAFile != "" {
		tb.Skip("puts a hostile store in front of a local store started over plain HTTP")
	}
	h, err := StartHostileStore(tg.Endpoint, tg.Region, tg.AccessKey, tg.SecretKey)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	tg.Endpoint = h.URL
	return h, tg
}

// Set says how the store misbehaves from now on.
func (h *HostileStore) Set(x Hostility) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.h = x
}

// Lists returns how many ListObjectsV2 requests the store was sent.
func (h *HostileStore) Lists() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lists
}

// Close stops the server.
func (h *HostileStore) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

func (h *HostileStore) route(pass http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		x := h.h
		list := r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2"
		if list {
			h.lists++
		}
		h.mu.Unlock()
		if x.Delay > 0 {
			select {
			case <-time.After(x.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if !list || !strings.HasPrefix(r.URL.Query().Get("prefix"), x.Prefix) {
			pass.ServeHTTP(w, r)
			return
		}
		h.list(w, r, x)
	})
}

// list answers a listing as x says.
func (h *HostileStore) list(w http.ResponseWriter, r *http.Request, x Hostility) {
	q := r.URL.Query()
	token := q.Get("continuation-token")
	if x.TruncateForever && strings.HasPrefix(token, hostileEndToken) {
		// Past the store's last page: an empty page that says more follow.
		maxKeys, _ := strconv.Atoi(q.Get("max-keys"))
		writeXML(w, http.StatusOK, listResult{Name: strings.Trim(r.URL.Path, "/"), Prefix: q.Get("prefix"),
			Delimiter: q.Get("delimiter"), MaxKeys: maxKeys, IsTruncated: true, ContinuationToken: token,
			NextContinuationToken: h.endToken()})
		return
	}
	if x.EmptyPages > 0 {
		var empty bool
		if q, empty = h.emptyPage(q, x.EmptyPages); empty {
			maxKeys, _ := strconv.Atoi(q.Get("max-keys"))
			writeXML(w, http.StatusOK, listResult{Name: strings.Trim(r.URL.Path, "/"), Prefix: q.Get("prefix"),
				Delimiter: q.Get("delimiter"), MaxKeys: maxKeys, IsTruncated: true, ContinuationToken: q.Get("continuation-token"),
				NextContinuationToken: q.Get(hostileEmptyToken)})
			return
		}
	}
	if x.IgnoreStartAfter {
		q.Del("start-after")
	}
	if x.RepeatToken {
		q.Del("continuation-token") // its first page again
	}
	if n, err := strconv.Atoi(q.Get("max-keys")); x.PageSize > 0 && (err != nil || n > x.PageSize) {
		q.Set("max-keys", strconv.Itoa(x.PageSize))
	}
	resp, err := h.forward(r, q)
	if err != nil {
		writeErrorStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		writeErrorStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
		return
	}
	if resp.StatusCode == http.StatusOK && (x.RepeatToken || x.TruncateForever) {
		var res listResult
		if err := xml.Unmarshal(body, &res); err != nil {
			writeErrorStatus(w, http.StatusInternalServerError, "InternalError", "s3test: the store's listing: "+err.Error())
			return
		}
		switch {
		case x.RepeatToken:
			res.IsTruncated, res.NextContinuationToken = true, hostileRepeatToken
		case !res.IsTruncated:
			res.IsTruncated, res.NextContinuationToken = true, h.endToken()
		}
		writeXML(w, http.StatusOK, res)
		return
	}
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}

// emptyPage says whether the listing q is to be answered with an empty page
// (n of them come before each request's own): then the query it returns
// carries, under the key hostileEmptyToken, the token that goes on. Else it
// returns the query to answer: the request's own, when q goes on from the
// last of its empty pages.
func (h *HostileStore) emptyPage(q url.Values, n int) (url.Values, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.empty == nil {
		h.empty = map[string]emptyRun{}
	}
	run, ours := h.empty[q.Get("continuation-token")]
	switch {
	case !ours:
		run = emptyRun{query: q, left: n}
	case run.left == 0:
		delete(h.empty, q.Get("continuation-token"))
		return run.query, false
	}
	delete(h.empty, q.Get("continuation-token"))
	h.tokens++
	next := hostileEmptyToken + strconv.Itoa(h.tokens)
	h.empty[next] = emptyRun{query: run.query, left: run.left - 1}
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	out.Set(hostileEmptyToken, next)
	return out, true
}

// endToken returns a new continuation token past the store's last page.
func (h *HostileStore) endToken() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokens++
	return hostileEndToken + strconv.Itoa(h.tokens)
}

// forward sends the listing r with the query q to the store, signed with
// the store's credentials.
func (h *HostileStore) forward(r *http.Request, q url.Values) (*http.Response, error) {
	u := *h.upstream
	u.Path, u.RawPath = r.URL.Path, r.URL.RawPath
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	const emptyBody = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	out.Header.Set("X-Amz-Content-Sha256", emptyBody)
	if err := v4.NewSigner().SignHTTP(r.Context(), h.creds, out, emptyBody, "s3", h.region, time.Now()); err != nil {
		return nil, err
	}
	return http.DefaultTransport.RoundTrip(out)
}

// HostileTextJSON is text that s3lock never writes, as a JSON string: what
// the security review of issue 35 wrote into a holder. It sets a terminal's
// title, turns the text red, breaks the line before a GitHub Actions
// workflow command and reverses the text after it. Tests write it into
// lease objects, tickets and metadata and check that every output shows it
// escaped (`evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil`).
const HostileTextJSON = `"evil\u001b]0;pwned\u0007\u001b[31m\n::error::forged \u202eevil"`
