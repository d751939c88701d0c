package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.mustRun("verify")
	for _, check := range []string{"conditional writes", "list", "get", "put", "delete"} {
		found := false
		for _, line := range strings.Split(r.stdout, "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), check))
			found = found || (strings.HasPrefix(strings.TrimSpace(line), check) && len(f) > 0 && f[0] == "ok")
		}
		if !found {
			t.Errorf("no passing %q check in:\n%s", check, r.stdout)
		}
	}

	// With the default prefix the probe lock is hidden from status.
	if r := c.mustRun("status", "--prefix", c.name(""), "--output", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("status lists the probe lock: %s", r.stdout)
	}

	r = c.mustRun("verify", "--prefix", c.name("locks/"), "--output", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if !rep.OK || len(rep.Checks) != 5 || rep.ProbePrefix != c.name("locks/")+s3lock.DefaultProbePrefix {
		t.Fatalf("report %+v", rep)
	}
	// Under another prefix it is an ordinary lock, left released.
	st := c.current(rep.ProbePrefix + "permissions")
	if st.Epoch == 0 || st.Held || !st.Released {
		t.Fatalf("the probe lock is %+v, want it released", st)
	}
}

// deny answers 403 AccessDenied to the requests that match, as S3 does for
// credentials without the permission, and forwards the rest to the server.
type deny struct {
	next  http.RoundTripper
	match func(*http.Request) bool
}

func (d deny) RoundTrip(req *http.Request) (*http.Response, error) {
	if !d.match(req) {
		return d.next.RoundTrip(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
	return &http.Response{
		StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}, nil
}

// Missing permissions are reported one by one, on top of the real server.
func TestVerify_ReportsMissingPermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		match  func(*http.Request) bool
		want   map[string]string // check name -> status
		passes bool
	}{
		{
			name:  "no delete",
			match: func(r *http.Request) bool { return r.Method == http.MethodDelete || r.URL.Query().Has("delete") },
			want:  map[string]string{"conditional writes": checkOK, "list": checkOK, "get": checkOK, "put": checkOK, "delete": checkDenied},
		},
		{
			name:  "no get",
			match: func(r *http.Request) bool { return r.Method == http.MethodGet && !r.URL.Query().Has("list-type") },
			want:  map[string]string{"conditional writes": checkOK, "list": checkOK, "get": checkDenied, "put": checkOK, "delete": checkOK},
		},
		{
			name:  "no put",
			match: func(r *http.Request) bool { return r.Method == http.MethodPut },
			// Nothing could be created, so nothing was there to delete.
			want: map[string]string{"conditional writes": checkError, "list": checkOK, "put": checkDenied, "delete": checkNotChecked},
		},
		{
			name:   "nothing denied",
			match:  func(*http.Request) bool { return false },
			want:   map[string]string{"conditional writes": checkOK, "list": checkOK, "get": checkOK, "put": checkOK, "delete": checkOK},
			passes: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
				return deny{next: next, match: tc.match}
			}))
			rep, err := verifyStore(t.Context(), api, ns.Bucket, ns.Name(s3lock.DefaultProbePrefix), nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK != tc.passes {
				t.Errorf("report OK = %v, want %v", rep.OK, tc.passes)
			}
			got := map[string]string{}
			for _, ch := range rep.Checks {
				got[ch.Name] = ch.Status
				if ch.Status == checkDenied && !strings.Contains(ch.Detail, "AccessDenied") {
					t.Errorf("check %s: detail %q does not say why", ch.Name, ch.Detail)
				}
			}
			for name, status := range tc.want {
				if got[name] != status {
					t.Errorf("check %q: %q, want %q (report %+v)", name, got[name], status, rep.Checks)
				}
			}
		})
	}
}
