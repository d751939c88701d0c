package s3test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault is one kind of failure the Faults transport injects. Every fault is
// layered on the real server: requests that are forwarded reach it and take
// effect there.
type Fault int

const (
	// DropResponse forwards the request (so the server commits it), then
	// discards the answer and reports a connection reset: the caller cannot
	// tell whether the write happened.
	DropResponse Fault = iota + 1
	// ServerErrorBefore answers 503 without forwarding.
	ServerErrorBefore
	// ServerErrorAfter forwards the request, then answers 500 anyway.
	ServerErrorAfter
	// Conflict answers 409 ConditionalRequestConflict without forwarding
	// (only to conditional writes, like S3).
	Conflict
	// Latency delays the request before forwarding it.
	Latency
)

func (f Fault) String() string {
	switch f {
	case DropResponse:
		return "drop-response"
	case ServerErrorBefore:
		return "5xx-before"
	case ServerErrorAfter:
		return "5xx-after"
	case Conflict:
		return "409-conflict"
	case Latency:
		return "latency"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Rule injects Fault into a share of the requests it matches.
type Rule struct {
	Fault Fault
	// Ops limits the rule to these operations (see Operation); all when empty.
	Ops []string
	// Probability in [0, 1] that a matching request gets the fault.
	Probability float64
	// Delay for Latency faults: uniform in [0, Delay], or exactly Delay
	// when Fixed.
	Delay time.Duration
	Fixed bool
	// Limit caps how many faults the rule injects (0: no cap).
	Limit int
}

// Faults is an http.RoundTripper that injects faults by rule, with a seeded
// random source so a failing run can be repeated.
type Faults struct {
	Next http.RoundTripper
	// Rules are the fault rules; change them with SetRules once requests
	// may be in flight.
	Rules []Rule

	mu       sync.Mutex
	rng      *rand.Rand
	injected map[Fault]int
	perRule  map[int]int
	disabled bool
}

// NewFaults returns a fault injector with the given seed and rules.
func NewFaults(seed uint64, rules ...Rule) *Faults {
	return &Faults{Rules: rules, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), injected: map[Fault]int{}, perRule: map[int]int{}}
}

// Wrap makes f inject faults into requests sent through next.
func (f *Faults) Wrap(next http.RoundTripper) http.RoundTripper {
	f.Next = next
	return f
}

// SetRules replaces the rules (safe while requests are in flight).
func (f *Faults) SetRules(rules ...Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Rules = rules
	f.perRule = map[int]int{}
}

// Disable stops injecting faults (e.g. for a final check of the state).
func (f *Faults) Disable() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disabled = true
}

// Injected returns how many faults of each kind were injected.
func (f *Faults) Injected() map[Fault]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Fault]int, len(f.injected))
	for k, v := range f.injected {
		out[k] = v
	}
	return out
}

func (f *Faults) pick(req *http.Request) (Rule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.disabled {
		return Rule{}, false
	}
	op := Operation(req)
	conditional := req.Header.Get("If-Match") != "" || req.Header.Get("If-None-Match") != ""
	for i, r := range f.Rules {
		if len(r.Ops) > 0 && !slices.Contains(r.Ops, op) {
			continue
		}
		if r.Limit > 0 && f.perRule[i] >= r.Limit {
			continue
		}
		if r.Fault == Conflict && (req.Method != http.MethodPut || !conditional) {
			continue
		}
		if f.rng.Float64() < r.Probability {
			f.injected[r.Fault]++
			f.perRule[i]++
			if r.Fault == Latency && r.Delay > 0 && !r.Fixed {
				r.Delay = time.Duration(f.rng.Int64N(int64(r.Delay)))
			}
			return r, true
		}
	}
	return Rule{}, false
}

// RoundTrip implements http.RoundTripper.
func (f *Faults) RoundTrip(req *http.Request) (*http.Response, error) {
	r, ok := f.pick(req)
	if !ok {
		return f.Next.RoundTrip(req)
	}
	switch r.Fault {
	case Latency:
		select {
		case <-time.After(r.Delay):
		case <-req.Context().Done():
			closeBody(req)
			return nil, req.Context().Err()
		}
		return f.Next.RoundTrip(req)
	case ServerErrorBefore:
		closeBody(req)
		return errorResponse(req, http.StatusServiceUnavailable, "ServiceUnavailable", "injected: service unavailable"), nil
	case Conflict:
		closeBody(req)
		return errorResponse(req, http.StatusConflict, "ConditionalRequestConflict",
			"injected: a conflicting conditional operation is in progress"), nil
	case ServerErrorAfter, DropResponse:
		resp, err := f.Next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if r.Fault == ServerErrorAfter {
			return errorResponse(req, http.StatusInternalServerError, "InternalError", "injected: internal error after commit"), nil
		}
		return nil, fmt.Errorf("injected: read tcp: %w", syscall.ECONNRESET)
	}
	return nil, errors.New("s3test: unknown fault " + r.Fault.String())
}

func errorResponse(req *http.Request, status int, code, msg string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?>` +
		"<Error><Code>" + code + "</Code><Message>" + msg + "</Message><RequestId>injected</RequestId></Error>"
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
