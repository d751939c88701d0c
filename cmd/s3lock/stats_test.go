//go:build unix

package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// The --stats summary, from the events the SDK reports: a line per lock
// whose leases s3lock dealt with, then the requests by operation and
// outcome.
func TestStats_Summary(t *testing.T) {
	t.Parallel()
	lost := &s3lock.LeaseLostError{Reason: s3lock.LostForceReleased}
	for _, tc := range []struct {
		name   string
		events []observe.Event
		want   []string
	}{
		{"nothing happened", nil, []string{"s3lock: stats: 0 requests in 1.5s"}},
		{"requests only (status, watch)", []observe.Event{
			{Kind: observe.Request, Op: "ListObjectsV2", Outcome: "ok"},
			{Kind: observe.Request, Op: "GetObject", Outcome: "ok"},
			{Kind: observe.Request, Op: "GetObject", Outcome: "not-modified"},
			{Kind: observe.Request, Op: "GetObject", Outcome: "not-modified"},
		}, []string{"s3lock: stats: 4 requests in 1.5s: GetObject not-modified 2, GetObject ok 1, ListObjectsV2 ok 1"}},
		{"a run that waited, renewed and released", []observe.Event{
			{Kind: observe.Acquired, Lock: "deploy", Epoch: 7, Wait: 1234 * time.Millisecond},
			{Kind: observe.Renewed, Lock: "deploy"},
			{Kind: observe.RenewFailed, Lock: "deploy"},
			{Kind: observe.Renewed, Lock: "deploy"},
			{Kind: observe.Released, Lock: "deploy"},
			{Kind: observe.Request, Op: "PutObject", Outcome: "ok"},
		}, []string{
			`s3lock: stats: lock "deploy": waited 1.23s, acquired epoch 7; renewals: 2 ok, 1 failed; released`,
			"s3lock: stats: 1 request in 1.5s: PutObject ok 1",
		}},
		{"a lost lease", []observe.Event{
			{Kind: observe.Acquired, Lock: "deploy", Epoch: 3},
			{Kind: observe.Lost, Lock: "deploy", Reason: string(lost.Reason), Err: lost},
		}, []string{`s3lock: stats: lock "deploy": waited 0s, acquired epoch 3; renewals: 0 ok, 0 failed; lost (force-released)`, "s3lock: stats: 0 requests in 1.5s"}},
		{"a token's lease (acquire)", []observe.Event{
			{Kind: observe.Acquired, Lock: "deploy", Epoch: 3},
		}, []string{`s3lock: stats: lock "deploy": waited 0s, acquired epoch 3; renewals: 0 ok, 0 failed; held at exit`, "s3lock: stats: 0 requests in 1.5s"}},
		{"a wait that ran out (or was superseded, or interrupted)", []observe.Event{
			{Kind: observe.AcquireFailed, Lock: "deploy", Wait: 5 * time.Minute, Err: s3lock.ErrHeld},
		}, []string{`s3lock: stats: lock "deploy": waited 5m0s, not acquired`, "s3lock: stats: 0 requests in 1.5s"}},
		{"renew with a token", []observe.Event{
			{Kind: observe.Renewed, Lock: "deploy"},
		}, []string{`s3lock: stats: lock "deploy": renewals: 1 ok, 0 failed`, "s3lock: stats: 0 requests in 1.5s"}},
		{"kinds it does not know are ignored", []observe.Event{{Kind: observe.Kind("no-such-kind"), Lock: "deploy"}}, []string{"s3lock: stats: 0 requests in 1.5s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			s := newStats(start)
			for _, e := range tc.events {
				s.Observe(e)
			}
			var buf bytes.Buffer
			s.print(&buf, start.Add(1500*time.Millisecond))
			if got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("summary:\n%s\nwant:\n%s", buf.String(), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// putsOK returns how many PutObject requests succeeded, from the summary in
// stderr; -1 if it has none.
func putsOK(stderr string) int {
	m := regexp.MustCompile(`(?m)^s3lock: stats: \d+ requests? in [^:]+:.* PutObject ok (\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// --stats prints the summary whatever the way s3lock exits, before the
// error line (which stays the last): here a run that succeeds, one whose
// command fails, an acquire, and one that finds the lock held. (The lost
// lease, the interrupted wait and the superseded run are in the tests of
// those.)
func TestStats_EveryExit(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("stats")
	lockLine := `s3lock: stats: lock "` + name + `": `

	r := c.mustRun("run", "--stats", "--quiet", name, "--", "true")
	if !strings.Contains(r.stderr, lockLine+"waited ") || !strings.Contains(r.stderr, ", acquired epoch 1; renewals: 0 ok, 0 failed; released\n") || putsOK(r.stderr) < 2 {
		t.Fatalf("run --stats: %s; want epoch 1 acquired and released, and at least 2 PutObject ok (acquire, release)", r)
	}

	r = c.run("--stats", "run", "--quiet", name, "--", "sh", "-c", "exit 7")
	if r.code != 7 || !strings.Contains(r.stderr, ", acquired epoch 2; renewals: 0 ok, 0 failed; released\n") {
		t.Fatalf("run --stats of a failing command: %s; want exit 7 and the summary", r)
	}

	r = c.mustRun("acquire", "--stats", "--quiet", name)
	if !strings.Contains(r.stderr, lockLine+"waited ") || !strings.Contains(r.stderr, ", acquired epoch 3; renewals: 0 ok, 0 failed; held at exit\n") || putsOK(r.stderr) != 1 {
		t.Fatalf("acquire --stats: %s; want epoch 3 acquired and held at exit (the token's), 1 PutObject ok", r)
	}

	r = c.run("acquire", "--stats", "--wait", "0", name)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitHeld || !strings.Contains(r.stderr, lockLine+"waited 0s, not acquired\n") || !strings.Contains(lines[len(lines)-1], "is held by") {
		t.Fatalf("acquire --stats of a held lock: %s; want exit %d, the summary, then the error line", r, exitHeld)
	}
}

// statsNotAcquired checks that stderr has the summary of a lock that was not
// acquired, before a last line that is not the summary's.
func statsNotAcquired(t *testing.T, stderr, name string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if !strings.Contains(stderr, `s3lock: stats: lock "`+name+`": waited `) || !strings.Contains(stderr, ", not acquired\n") ||
		strings.HasPrefix(lines[len(lines)-1], "s3lock: stats:") {
		t.Errorf("stderr lacks the summary of a lock not acquired, before the error line:\n%s", stderr)
	}
}
