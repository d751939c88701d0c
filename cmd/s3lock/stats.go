package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// stats is the observe.Observer behind --stats: it counts what the client
// did, and summarizes it on stderr when s3lock exits. Counting and wording
// are presentation; what an event means is the SDK's.
type stats struct {
	start time.Time

	mu       sync.Mutex
	locks    []*lockStats // in the order they were first seen
	requests map[request]int
}

// lockStats is what happened to one lock's leases.
type lockStats struct {
	name        string
	epochs      []uint64      // acquired, in order
	waited      time.Duration // in all acquisitions, successful or not
	failed      int           // acquisitions that returned an error
	renewed     int
	renewFailed int
	released    int
	lost        []s3lock.LossReason
}

// request is one kind of S3 request: its operation and how it ended.
type request struct {
	op      string
	outcome string
}

func newStats(start time.Time) *stats {
	return &stats{start: start, requests: map[request]int{}}
}

// Observe counts e. It is called by the SDK from several goroutines; kinds
// it does not know are ignored.
func (s *stats) Observe(e observe.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case observe.Request:
		s.requests[request{e.Op, e.Outcome}]++
	case observe.Acquired:
		l := s.lock(e.Lock)
		l.epochs = append(l.epochs, e.Epoch)
		l.waited += e.Wait
	case observe.AcquireFailed:
		l := s.lock(e.Lock)
		l.failed++
		l.waited += e.Wait
	case observe.Renewed:
		s.lock(e.Lock).renewed++
	case observe.RenewFailed:
		s.lock(e.Lock).renewFailed++
	case observe.Released:
		s.lock(e.Lock).released++
	case observe.Lost:
		l := s.lock(e.Lock)
		l.lost = append(l.lost, s3lock.LossReason(e.Reason))
	}
}

// lock returns the counts of the lock name, adding them if new. s.mu is held.
func (s *stats) lock(name string) *lockStats {
	for _, l := range s.locks {
		if l.name == name {
			return l
		}
	}
	l := &lockStats{name: name}
	s.locks = append(s.locks, l)
	return l
}

// print writes the summary: a line per lock whose leases s3lock dealt with,
// then a line of the requests by operation and outcome.
func (s *stats) print(w io.Writer, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.locks {
		fmt.Fprintf(w, "s3lock: stats: lock %q: %s\n", l.name, l.summary())
	}
	fmt.Fprintln(w, "s3lock: stats: "+s.requestSummary(now))
}

// summary is what happened to the lock's leases: "waited 1.2s, acquired
// epoch 3; renewals: 4 ok, 1 failed; released".
func (l *lockStats) summary() string {
	var parts []string
	if len(l.epochs) > 0 || l.failed > 0 {
		acq := "waited " + l.waited.Round(10*time.Millisecond).String()
		if len(l.epochs) == 0 {
			acq += ", not acquired"
		} else {
			acq += ", acquired " + epochsText(l.epochs)
		}
		parts = append(parts, acq)
	}
	if len(l.epochs) > 0 || l.renewed > 0 || l.renewFailed > 0 {
		parts = append(parts, fmt.Sprintf("renewals: %d ok, %d failed", l.renewed, l.renewFailed))
	}
	switch {
	case len(l.lost) > 0:
		reasons := make([]string, len(l.lost))
		for i, r := range l.lost {
			reasons[i] = string(r)
		}
		parts = append(parts, "lost ("+strings.Join(reasons, ", ")+")")
	case l.released > 0:
		parts = append(parts, "released")
	case len(l.epochs) > 0:
		parts = append(parts, "held at exit") // a token's lease, or a release that failed
	}
	return strings.Join(parts, "; ")
}

// epochsText is "epoch 3", or "epochs 3, 5" for several acquisitions.
func epochsText(epochs []uint64) string {
	s := make([]string, len(epochs))
	for i, e := range epochs {
		s[i] = strconv.FormatUint(e, 10)
	}
	if len(s) == 1 {
		return "epoch " + s[0]
	}
	return "epochs " + strings.Join(s, ", ")
}

// requestSummary is "5 requests in 1.2s: GetObject ok 1, ListObjectsV2 ok 1,
// PutObject ok 2, PutObject precondition-failed 1", sorted by operation and
// outcome.
func (s *stats) requestSummary(now time.Time) string {
	kinds := make([]request, 0, len(s.requests))
	total := 0
	for k, n := range s.requests {
		kinds = append(kinds, k)
		total += n
	}
	slices.SortFunc(kinds, func(a, b request) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.outcome, b.outcome))
	})
	head := fmt.Sprintf("%d requests in %s", total, now.Sub(s.start).Round(10*time.Millisecond))
	if total == 1 {
		head = strings.Replace(head, "requests", "request", 1)
	}
	if total == 0 {
		return head
	}
	counts := make([]string, len(kinds))
	for i, k := range kinds {
		counts[i] = fmt.Sprintf("%s %s %d", k.op, k.outcome, s.requests[k])
	}
	return head + ": " + strings.Join(counts, ", ")
}
