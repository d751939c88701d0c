package witness

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const s = int64(time.Second)

// lease is an applied write of lock "l" with a 10 s validity, at [in, in+10ms].
func lease(epoch uint64, in int64, edit ...func(*Write)) Write {
	w := Write{Lock: "l", Epoch: epoch, In: in, Out: in + 10*int64(time.Millisecond), Status: 200,
		Holder: "h", Validity: 10 * time.Second}
	for _, e := range edit {
		e(&w)
	}
	return w
}

func create(w *Write)   { w.Create = true }
func released(w *Write) { w.Released = true }
func unknown(w *Write)  { w.Status = 0 }

func TestCheck_Succession(t *testing.T) {
	cases := []struct {
		name   string
		writes []Write
		broken bool
	}{
		{"after a release", []Write{lease(1, 0, create), lease(1, 2*s, released), lease(2, 3*s, create)}, false},
		{"after a lapse: validity + 1 s without a write", []Write{lease(1, 0, create), lease(1, 3*s), lease(2, 15*s, create)}, false},
		{"before the lapse, counted from the last renewal", []Write{lease(1, 0, create), lease(1, 3*s), lease(2, 12*s, create)}, true},
		{"at half the validity", []Write{lease(1, 0, create), lease(2, 7*s, create)}, true},
		{"after a release whose answer was lost", []Write{lease(1, 0, create), lease(1, 2*s, released, unknown), lease(2, 3*s, create)}, false},
		{"a renewal whose answer was lost does not count against the waiter", []Write{lease(1, 0, create), lease(1, 5*s, unknown), lease(2, 12*s, create)}, false},
		{"a renewal delayed in the network lands after the waiter judged", []Write{lease(1, 0, create), lease(1, 3*s), lease(1, 15*s), lease(2, 16*s, create)}, false},
		{"a renewal landing before the judgment", []Write{lease(1, 0, create), lease(1, 3*s), lease(1, 6*s), lease(2, 15*s, create)}, true},
		{"an epoch the store refused to create", []Write{lease(1, 0, create), lease(2, 3*s, create, func(w *Write) { w.Status = 412 })}, false},
		{"a lease whose create looked unknown to a slot acquirer's marker create", []Write{lease(1, 0, create),
			lease(1, s, create, unknown, func(w *Write) { w.Marker, w.Validity = true, 0 }), lease(2, 12*s, create)}, false},
		{"over a slot marker never released", []Write{lease(1, 0, create, func(w *Write) { w.Marker, w.Validity = true, 0 }), lease(2, 60*s, create)}, true},
		{"another lock's epochs", []Write{lease(1, 0, create), lease(2, 3*s, create, func(w *Write) { w.Lock = "other" })}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.writes, nil, nil)
			if (err != nil) != tc.broken {
				t.Errorf("Check = %v; want a violation: %v", err, tc.broken)
			}
			if err != nil && !strings.Contains(err.Error(), "succession") {
				t.Errorf("Check = %v; want it to name the succession rule", err)
			}
		})
	}
}

func TestCheck_Trust(t *testing.T) {
	writes := []Write{lease(1, 0, create), lease(1, 2*s), lease(1, 4*s, func(w *Write) { w.Holder = "rival" })}
	margin := int64(time.Second + time.Millisecond) // SafetyMargin(10s)
	cases := []struct {
		name   string
		claim  Claim
		broken bool
	}{
		{"from the create's send", Claim{Lock: "l", Epoch: 1, At: s, Until: 10*s - margin}, false},
		{"without the margin", Claim{Lock: "l", Epoch: 1, At: s, Until: 10 * s}, true},
		{"from the renewal's send", Claim{Lock: "l", Epoch: 1, Holder: "h", At: 3 * s, Until: 12*s - margin}, false},
		{"from a renewal not yet sent", Claim{Lock: "l", Epoch: 1, Holder: "h", At: s, Until: 12*s - margin}, true},
		{"a claim that matches no write: nothing judged", Claim{Lock: "l", Epoch: 7, At: 3 * s, Until: 99 * s}, true},
		{"not counted from a rival's write to the epoch", Claim{Lock: "l", Epoch: 1, Holder: "h", At: 5 * s, Until: 14*s - margin}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(writes, nil, []Claim{tc.claim})
			if (err != nil) != tc.broken {
				t.Errorf("Check = %v; want a violation: %v", err, tc.broken)
			}
		})
	}
}

func TestCheck_Cleanup(t *testing.T) {
	writes := []Write{lease(1, 0, create), lease(1, s, released), lease(2, 2*s, create)}
	if err := Check(writes, []Delete{{Lock: "l", Epoch: 1, In: 9 * s, Out: 9 * s, Status: 200}}, nil); err != nil {
		t.Errorf("deleting an epoch with a successor: %v", err)
	}
	err := Check(writes, []Delete{{Lock: "l", Epoch: 2, In: 9 * s, Out: 9 * s, Status: 200}}, nil)
	if err == nil || !strings.Contains(err.Error(), "newest epoch was deleted") {
		t.Errorf("deleting the newest epoch: Check = %v; want a cleanup violation", err)
	}
}

// TestWitness_RecordsWhatTheStoreSaw: requests through Wrap are recorded
// with the store's answer and what their bodies say; other requests pass.
func TestWitness_RecordsWhatTheStoreSaw(t *testing.T) {
	var got []string
	store := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		if r.Header.Get("If-None-Match") == "*" {
			rw.WriteHeader(http.StatusPreconditionFailed)
		}
	}))
	defer store.Close()
	w := New("bkt", nil)
	c := &http.Client{Transport: w.Wrap(http.DefaultTransport)}
	send := func(method, path, body string, h ...string) {
		t.Helper()
		req, err := http.NewRequest(method, store.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	body := `{"leaderId":"me","validityMs":3000,"expired":true,"s3lock":1,"nonce":"n1","write":"w1"}`
	send(http.MethodPut, "/bkt/a/b/lock-0000000007.json", body, "If-Match", `"e"`)
	chunked := "3e;chunk-signature=x\r\n" + body[:62] + "\r\n" + "1b;chunk-signature=y\r\n" + body[62:] + "\r\n0\r\n\r\n"
	send(http.MethodPut, "/bkt/a/lock-0000000001.json", chunked, "If-None-Match", "*", "Content-Encoding", "aws-chunked")
	send(http.MethodPut, "/bkt/a/other.json", "x")
	send(http.MethodPost, "/bkt?delete", `<Delete><Object><Key>a/lock-0000000001.json</Key></Object><Object><Key>a/x</Key></Object></Delete>`)

	if len(got) != 4 || !strings.HasSuffix(got[0], body) {
		t.Fatalf("the store got %q; want every request, bodies unchanged", got)
	}
	ws := w.Writes()
	if len(ws) != 2 {
		t.Fatalf("recorded %+v; want the two writes to epoch objects", ws)
	}
	if r := ws[0]; r.Lock != "a/b" || r.Epoch != 7 || r.Create || !r.IfMatch || r.Status != 200 || !r.Released ||
		r.Holder != "me" || r.Nonce != "n1" || r.WriteID != "w1" || r.Validity != 3*time.Second || r.Out < r.In {
		t.Errorf("first write recorded as %+v", r)
	}
	if r := ws[1]; r.Lock != "a" || r.Epoch != 1 || !r.Create || r.Status != 412 || r.Nonce != "n1" {
		t.Errorf("chunked create recorded as %+v; want its payload decoded", r)
	}
	if ds := w.Deletes(); len(ds) != 1 || ds[0].Lock != "a" || ds[0].Epoch != 1 {
		t.Errorf("deletions recorded as %+v; want epoch 1 of a", ds)
	}
}

// TestWitness_AnUnreadableWriteFailsTheCheck: a write to an epoch object
// whose body the witness cannot read cannot be judged, so the check fails
// instead of judging without it.
func TestWitness_AnUnreadableWriteFailsTheCheck(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer store.Close()
	w := New("", nil)
	req, err := http.NewRequest(http.MethodPut, store.URL+"/a/lock-0000000001.json", strings.NewReader("not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: w.Wrap(http.DefaultTransport)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "could not read") {
		t.Errorf("Check = %v; want it to fail on the unreadable write", err)
	}
}
