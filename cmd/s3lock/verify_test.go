package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.mustRun("verify")
	for _, check := range []string{"conditional writes", "listing order", "list", "get", "put", "delete"} {
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
	if !rep.OK || len(rep.Checks) != 6 || rep.ProbePrefix != c.name("locks/")+"s3lock-probe/" {
		t.Fatalf("report %+v", rep)
	}
	// The probe lock was acquired once and left released. No lock call reads
	// a name under the reserved probe segment, so read its epoch object as
	// PROTOCOL.md defines it.
	probe := rep.ProbePrefix + "permissions"
	if keys := s3test.Keys(t, c.ns.Client, c.ns.Bucket, probe+"/"); len(keys) != 1 || keys[0] != (s3lock.Token{Name: probe, Epoch: 1}).Key() {
		t.Fatalf("the probe lock's objects are %q, want only epoch 1", keys)
	}
	out, err := c.ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &c.ns.Bucket, Key: aws.String(s3lock.Token{Name: probe, Epoch: 1}.Key())})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var body struct {
		Released   bool   `json:"expired"`
		ReleasedBy string `json:"releasedBy"`
	}
	if err := json.NewDecoder(out.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !body.Released || body.ReleasedBy != "" {
		t.Fatalf("the probe lock is %+v, want it released by its holder", body)
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
// TestVerify_MissingBucketSaysSo: verify against a missing bucket said "6
// of 6 checks did not pass", counting the 3 it never ran (issue 36); it
// says the bucket does not exist and that no check could run.
func TestVerify_MissingBucketSaysSo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("verify", "--bucket", "no-such-bucket-"+s3test.RandomHex(4))
	if r.code != exitError || !strings.Contains(r.stderr, "does not exist (NoSuchBucket), so no check could run") ||
		strings.Contains(r.stderr, "checks did not pass") {
		t.Fatalf("verify against a missing bucket: %s; want exit %d saying the bucket does not exist", r, exitError)
	}
}

func TestVerify_ReportsMissingPermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		match  func(*http.Request) bool
		want   map[string]storecheck.Status // check name -> status
		passes bool
	}{
		{
			name:  "no delete",
			match: func(r *http.Request) bool { return r.Method == http.MethodDelete || r.URL.Query().Has("delete") },
			want:  map[string]storecheck.Status{"conditional writes": storecheck.StatusOK, "list": storecheck.StatusOK, "get": storecheck.StatusOK, "put": storecheck.StatusOK, "delete": storecheck.StatusDenied},
		},
		{
			name:  "no get",
			match: func(r *http.Request) bool { return r.Method == http.MethodGet && !r.URL.Query().Has("list-type") },
			want:  map[string]storecheck.Status{"conditional writes": storecheck.StatusOK, "list": storecheck.StatusOK, "get": storecheck.StatusDenied, "put": storecheck.StatusOK, "delete": storecheck.StatusOK},
		},
		{
			name:  "no put",
			match: func(r *http.Request) bool { return r.Method == http.MethodPut },
			// Nothing could be created, so nothing was there to delete.
			want: map[string]storecheck.Status{"conditional writes": storecheck.StatusError, "list": storecheck.StatusOK, "put": storecheck.StatusDenied, "delete": storecheck.StatusNotChecked},
		},
		{
			name:   "nothing denied",
			match:  func(*http.Request) bool { return false },
			want:   map[string]storecheck.Status{"conditional writes": storecheck.StatusOK, "list": storecheck.StatusOK, "get": storecheck.StatusOK, "put": storecheck.StatusOK, "delete": storecheck.StatusOK},
			passes: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
				return deny{next: next, match: tc.match}
			}))
			c, err := s3lock.New(api, ns.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			sdkRep, err := storecheck.Run(t.Context(), c, ns.Name(""))
			if err != nil {
				t.Fatal(err)
			}
			rep := reportOf(sdkRep)
			if rep.OK != tc.passes {
				t.Errorf("report OK = %v, want %v", rep.OK, tc.passes)
			}
			got := map[string]storecheck.Status{}
			for _, ch := range rep.Checks {
				got[ch.Name] = ch.Status
				if ch.Status == storecheck.StatusDenied && !strings.Contains(ch.Detail, "AccessDenied") {
					t.Errorf("check %s: detail %q does not say why", ch.Name, ch.Detail)
				}
			}
			for name, status := range tc.want {
				if got[name] != status {
					t.Errorf("check %q: %q, want %q (report %+v)", name, got[name], status, rep.Checks)
				}
				// A check an earlier failure kept from running is counted
				// apart from those that did not pass.
				if status == storecheck.StatusNotChecked {
					msg := verifyFailure(ns.Bucket, sdkRep).Error()
					_, unchecked, _ := strings.Cut(msg, "could not run after them: ")
					if !slices.Contains(strings.Split(unchecked, ", "), name) {
						t.Errorf("verify's error %q does not count check %q as one that could not run", msg, name)
					}
				}
			}
		})
	}
}

// The report keeps its wire format: field names, status words, the
// permission strings, and a detail on one line.
func TestVerify_ReportFormat(t *testing.T) {
	t.Parallel()
	rep := reportOf(storecheck.Report{Bucket: "b", ProbePrefix: "locks/s3lock-probe/", Checks: []storecheck.Check{
		{Name: "conditional writes", Status: storecheck.StatusOK, Detail: "If-None-Match and If-Match are enforced"},
		{Name: "list", Permission: "s3:ListBucket", Status: storecheck.StatusFailed},
		{Name: "get", Permission: "s3:GetObject", Status: storecheck.StatusDenied, Detail: "Forbidden\n(AccessDenied)"},
		{Name: "put", Permission: "s3:PutObject", Status: storecheck.StatusError, Err: errors.New("boom")},
		{Name: "delete", Permission: "s3:DeleteObject", Status: storecheck.StatusNotChecked},
	}})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bucket":"b","probe_prefix":"locks/s3lock-probe/","ok":false,"checks":[` +
		`{"name":"conditional writes","status":"ok","detail":"If-None-Match and If-Match are enforced"},` +
		`{"name":"list","permission":"s3:ListBucket","status":"failed"},` +
		`{"name":"get","permission":"s3:GetObject","status":"denied","detail":"Forbidden; (AccessDenied)"},` +
		`{"name":"put","permission":"s3:PutObject","status":"error"},` +
		`{"name":"delete","permission":"s3:DeleteObject","status":"not_checked"}]}`
	if string(b) != want {
		t.Fatalf("report\n%s\nwant\n%s", b, want)
	}
}
