// Package witness sees a lock from the store's side: it records, at the
// store's door, every write to a lock's epoch objects — when the store got
// it, when it answered, what it answered and what it wrote — and checks the
// protocol's rules by the store's clock (PROTOCOL.md §6, §7):
//
//   - succession: epoch N+1 is created only after epoch N was released, or
//     after N's last write plus its validity and the second that
//     Last-Modified's resolution leaves (a slot lock's marker never lapses);
//   - trust: no holder trusts its lease past the send time of its last
//     confirmed write plus the validity minus the safety margin;
//   - cleanup: the newest epoch of a lock is never deleted.
//
// Unlike the checks of critical sections (chaos.CheckExclusive), these do not
// need two holders' work to overlap to see a broken rule: a waiter that takes
// over a live lease early breaks succession even when its holder had stopped
// working. A holder that trusts its lease past the limit shows at any lease
// length (the margin is a tenth of it); a takeover shows as early once it
// comes less than validity + 1 s after the write judged, which, with
// Last-Modified's one-second resolution, a lapse judged at half a 3 s lease
// does only some of the time, and at half a 12 s lease always.
//
// A Witness sits between the clients and the store: as the innermost
// http.RoundTripper of a client (Wrap, below any fault injection, so it sees
// what the store really answered), or as a reverse proxy in front of the
// store for clients in other processes (Proxy). Its clock must run at the
// store's rate; its value does not matter. Every time it records brackets
// the store's action: the store applied a write after In and before Out.
//
// It is a test kit of the main module, not of the lab's (lab/), because the
// SDK's own tests check with it (s3lock/storeclock_test.go: the contention,
// safety and expiry tests, the killers of make mutants' A and B, which make
// test runs): the main module's tests cannot import the lab's module, which
// requires the main module. The lab's chaos suite and benchmarks use it too.
// Nothing that ships imports it.
package witness

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Write is one write request to an epoch object, as the store saw it.
type Write struct {
	Lock  string // the lock's name (a slot's: "<name>/lock-slots/<i>")
	Epoch uint64
	// Create marks a create (If-None-Match: *); otherwise If-Match (a
	// renewal, a release, a force-release), or unconditional.
	Create, IfMatch bool
	// In is when the request reached the witness, Out when the store's
	// answer did (the witness's clock, nanoseconds).
	In, Out int64
	// Status is the store's answer; 0 if none came (the outcome is
	// unknown: the store may have applied it).
	Status int
	// From the body.
	Holder   string
	Nonce    string
	WriteID  string
	Validity time.Duration
	Released bool
	Marker   bool // a slot lock's marker (format 2, slots > 0)
	// Shared is a shared epoch (PROTOCOL.md §17: mode "shared", no
	// share id): it has no holder, never lapses, and a writer creates its
	// pending epoch above it at once (the shares are what it waits for;
	// the witness does not see them).
	Shared bool
}

// Applied reports whether the store certainly applied the write.
func (w Write) Applied() bool { return w.Status >= 200 && w.Status < 300 }

// Unknown reports whether the store may have applied the write without the
// witness learning it.
func (w Write) Unknown() bool { return w.Status == 0 || w.Status >= 500 }

// Delete is one key of a DeleteObjects or DeleteObject request.
type Delete struct {
	Lock    string
	Epoch   uint64
	In, Out int64
	Status  int // of the whole request; 0 if no answer came
}

// Witness records the writes to epoch objects that pass through it. Its
// methods are safe for concurrent use.
type Witness struct {
	bucket string
	clock  func() int64

	mu      sync.Mutex
	writes  []Write
	deletes []Delete
	claims  []Claim
	// unread names the requests whose bodies it could not read: their
	// writes cannot be judged, so Check fails.
	unread []string
}

// New returns a witness of the lock objects in bucket, reading clock (in
// nanoseconds; nil: a monotonic clock of this process).
func New(bucket string, clock func() int64) *Witness {
	if clock == nil {
		start := time.Now()
		clock = func() int64 { return int64(time.Since(start)) }
	}
	return &Witness{bucket: bucket, clock: clock}
}

// Now reads the witness's clock.
func (w *Witness) Now() int64 { return w.clock() }

// Writes returns the writes recorded so far, in the order they reached the
// witness.
func (w *Witness) Writes() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Write(nil), w.writes...)
}

// Deletes returns the deletions of epoch objects recorded so far.
func (w *Witness) Deletes() []Delete {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Delete(nil), w.deletes...)
}

// Wrap returns a transport that records through w what it sends through
// next. Put it innermost, below any fault injection.
func (w *Witness) Wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper{w: w, next: next}
}

type roundTripper struct {
	w    *Witness
	next http.RoundTripper
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	lock, epoch, isEpoch := rt.w.epochObject(req.URL)
	isDeletes := req.Method == http.MethodPost && req.URL.Query().Has("delete")
	isWrite := isEpoch && (req.Method == http.MethodPut || req.Method == http.MethodDelete)
	if !isDeletes && !isWrite {
		return rt.next.RoundTrip(req)
	}
	req, body, err := withReadBody(req)
	if err != nil {
		return nil, err
	}
	in := rt.w.clock()
	resp, err := rt.next.RoundTrip(req)
	out := rt.w.clock()
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	switch {
	case isDeletes:
		rt.w.recordDeletes(decodeChunked(req.Header, body), in, out, status)
	case req.Method == http.MethodDelete:
		rt.w.record(nil, Delete{Lock: lock, Epoch: epoch, In: in, Out: out, Status: status})
	default:
		wr := Write{Lock: lock, Epoch: epoch, In: in, Out: out, Status: status,
			Create: req.Header.Get("If-None-Match") == "*", IfMatch: req.Header.Get("If-Match") != ""}
		if !parseBody(&wr, decodeChunked(req.Header, body)) {
			rt.w.unreadable(fmt.Sprintf("PUT %s/lock-%010d.json", lock, epoch))
		}
		rt.w.record(&wr)
	}
	return resp, err
}

func (w *Witness) unreadable(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unread = append(w.unread, what)
}

func (w *Witness) record(wr *Write, ds ...Delete) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wr != nil {
		w.writes = append(w.writes, *wr)
	}
	w.deletes = append(w.deletes, ds...)
}

// epochKey matches an epoch object's key: <name>/lock-<10 digits>.json.
var epochKey = regexp.MustCompile(`^(.+)/lock-([0-9]{10})\.json$`)

// epochObject returns the lock and epoch of the epoch object a request
// addresses (path-style or virtual-hosted), if it is one.
func (w *Witness) epochObject(u *url.URL) (string, uint64, bool) {
	key := strings.TrimPrefix(u.Path, "/")
	if w.bucket != "" {
		key = strings.TrimPrefix(key, w.bucket+"/")
	}
	return parseKey(key)
}

func parseKey(key string) (string, uint64, bool) {
	m := epochKey.FindStringSubmatch(key)
	if m == nil {
		return "", 0, false
	}
	e, err := strconv.ParseUint(m[2], 10, 64)
	return m[1], e, err == nil && e > 0
}

// withReadBody reads the request's body and returns a copy of the request
// that sends the same bytes (a RoundTripper must not change the request it
// was given).
func withReadBody(req *http.Request) (*http.Request, []byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil, nil
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return out, b, nil
}

// decodeChunked returns the payload of an aws-chunked body (the SDK's
// streaming signature or trailing checksum), or body as it is.
func decodeChunked(h http.Header, body []byte) []byte {
	if !strings.Contains(h.Get("Content-Encoding"), "aws-chunked") &&
		!strings.HasPrefix(h.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return body
	}
	var out []byte
	for {
		line, rest, ok := bytes.Cut(body, []byte("\r\n"))
		if !ok {
			return out
		}
		sizeHex, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseUint(string(bytes.TrimSpace(sizeHex)), 16, 32)
		if err != nil || n == 0 || int(n) > len(rest) {
			return out
		}
		out = append(out, rest[:n]...)
		body = bytes.TrimPrefix(rest[n:], []byte("\r\n"))
	}
}

// parseBody fills wr from an epoch object's body (PROTOCOL.md §3, §14),
// and reports whether it could: a lease without its validity, or a body that
// is no JSON, cannot be judged.
func parseBody(wr *Write, body []byte) bool {
	var p struct {
		LeaderID   string `json:"leaderId"`
		ValidityMs int64  `json:"validityMs"`
		Expired    bool   `json:"expired"`
		Format     int    `json:"s3lock"`
		Nonce      string `json:"nonce"`
		Write      string `json:"write"`
		Slots      int    `json:"slots"`
		Mode       string `json:"mode"`
		Share      string `json:"share"`
	}
	if json.Unmarshal(body, &p) != nil {
		return false
	}
	wr.Holder, wr.Nonce, wr.WriteID = p.LeaderID, p.Nonce, p.Write
	wr.Validity = time.Duration(p.ValidityMs) * time.Millisecond
	wr.Released = p.Expired
	wr.Marker = p.Format >= 2 && p.Slots > 0
	wr.Shared = p.Mode == "shared" && p.Share == ""
	return wr.Marker || wr.Shared || wr.Validity > 0 || wr.Released
}

// recordDeletes records the epoch objects a DeleteObjects request names.
func (w *Witness) recordDeletes(body []byte, in, out int64, status int) {
	var req struct {
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	if xml.Unmarshal(body, &req) != nil {
		w.unreadable("a DeleteObjects request")
		return
	}
	var ds []Delete
	for _, o := range req.Objects {
		if lock, epoch, ok := parseKey(o.Key); ok {
			ds = append(ds, Delete{Lock: lock, Epoch: epoch, In: in, Out: out, Status: status})
		}
	}
	w.record(nil, ds...)
}
