package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// A latency profile says how long a store takes to answer each class of
// request. The taps (tap.go) hold every request for a delay drawn from it
// before they pass it on, so that the handoff, takeover and slot
// measurements meet a store that answers as a cloud one would rather than
// loopback's millisecond.

// requestClass groups S3 operations by what the store does to answer them.
type requestClass int

const (
	classRead  requestClass = iota // GetObject, HeadObject: read one object
	classWrite                     // PutObject, DeleteObject(s) and every other request
	classList                      // ListObjectsV2: read a range of the key index
	nClasses
)

func (c requestClass) String() string {
	return [...]string{"read (GET, HEAD)", "write (PUT, DELETE, POST)", "list (ListObjectsV2)"}[c]
}

// classOf returns the class of an operation as s3test.Operation names it
// ("GetObject", "ListObjectsV2", or the HTTP method when it knows no name).
func classOf(op string) requestClass {
	switch {
	case strings.HasPrefix(op, "List"):
		return classList
	case strings.HasPrefix(op, "Get"), strings.HasPrefix(op, "Head"), op == "GET", op == "HEAD":
		return classRead
	}
	return classWrite
}

// delay is the distribution of one class's delays: log-normal with this
// median and 99th percentile. A zero median is no delay.
type delay struct{ median, p99 time.Duration }

// z99 is the standard normal distribution's 99th percentile.
const z99 = 2.3263478740408408

// sigma is the log-normal's shape parameter that puts p99 where it is.
func (d delay) sigma() float64 { return math.Log(float64(d.p99)/float64(d.median)) / z99 }

// latencyProfile is one profile: a delay per request class, none above
// ceiling.
type latencyProfile struct {
	name    string // as -profiles spells it
	store   string // the store it stands for, in the report
	classes [nClasses]delay
	// ceiling caps every draw: a log-normal has no upper end, and a real
	// client gives up on a request long before its tail runs out.
	ceiling time.Duration
}

// delayless reports whether the profile adds nothing (loopback).
func (p *latencyProfile) delayless() bool {
	for _, d := range p.classes {
		if d.median > 0 {
			return false
		}
	}
	return true
}

// The latency profiles, in the report's order. Each request's delay is drawn
// from a log-normal distribution with its class's median and 99th
// percentile, capped at the ceiling. Where the numbers come from:
//
//	[1] AWS, Amazon S3 Developer Guide, "Best Practices Design Patterns:
//	    Optimizing Amazon S3 Performance" (optimizing-performance.html):
//	    latency-sensitive applications "can achieve consistent small object
//	    latencies [...] of roughly 100–200 milliseconds".
//	[2] AWS, Amazon S3 Developer Guide, "Performance Design Patterns for
//	    Amazon S3", Timeouts and Retries (optimizing-performance-design-patterns.html;
//	    the same text in the whitepaper "Best Practices Design Patterns:
//	    Optimizing Amazon S3 Performance"): for requests under 512 KB,
//	    "median latencies are often in the tens of milliseconds range"; retry
//	    a GET or PUT after 2 seconds.
//	[3] AWS, Amazon S3 User Guide, "Optimizing S3 Express One Zone
//	    performance" (s3-express-performance.html): "consistent single-digit
//	    millisecond first-byte read and write request latencies", "up to 10x
//	    faster than S3 Standard".
//	[4] Adam Gutglick (Spiral), "So you want to use Object Storage", 2025:
//	    object-store latency is roughly log-normal, with a long tail.
//
// Our choices, not AWS's measurements: the log-normal shape ([4] says it is
// rough); reading [1]'s 100–200 ms as S3 Standard's 99th percentile and
// [3]'s "single-digit" as S3 Express's; where within [2]'s "tens of
// milliseconds" and [3]'s single digits each median sits; writes slower
// than reads, and LISTs slower than both (AWS publishes no LIST latency);
// the ceilings (S3 Standard's is [2]'s 2 s retry point).
var profiles = []*latencyProfile{
	{name: "loopback", store: "none: versitygw on loopback as it answers"},
	{
		name:  "s3-standard",
		store: "AWS S3 Standard, general purpose bucket, client in the bucket's Region",
		classes: [nClasses]delay{
			classRead:  {median: 30 * time.Millisecond, p99: 150 * time.Millisecond},
			classWrite: {median: 50 * time.Millisecond, p99: 200 * time.Millisecond},
			classList:  {median: 60 * time.Millisecond, p99: 250 * time.Millisecond},
		},
		ceiling: 2 * time.Second,
	},
	{
		name:  "s3-express",
		store: "AWS S3 Express One Zone, directory bucket, client in the bucket's Availability Zone",
		classes: [nClasses]delay{
			classRead:  {median: 3 * time.Millisecond, p99: 8 * time.Millisecond},
			classWrite: {median: 5 * time.Millisecond, p99: 9 * time.Millisecond},
			classList:  {median: 6 * time.Millisecond, p99: 15 * time.Millisecond},
		},
		ceiling: 200 * time.Millisecond,
	},
}

// profileSources are the sources of the profiles, for the report.
var profileSources = []string{
	"[1] AWS, *Amazon S3 Developer Guide*, \"Best Practices Design Patterns: Optimizing Amazon S3 Performance\" " +
		"(docs.aws.amazon.com/AmazonS3/latest/dev/optimizing-performance.html): latency-sensitive applications " +
		"\"can achieve consistent small object latencies […] of roughly 100–200 milliseconds\".",
	"[2] AWS, *Amazon S3 Developer Guide*, \"Performance Design Patterns for Amazon S3\", Timeouts and Retries " +
		"(…/optimizing-performance-design-patterns.html; the same text in the AWS whitepaper of the same title): for " +
		"requests under 512 KB \"median latencies are often in the tens of milliseconds range\"; retry a GET or PUT after 2 seconds.",
	"[3] AWS, *Amazon S3 User Guide*, \"Optimizing S3 Express One Zone performance\" " +
		"(docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-performance.html): \"consistent single-digit " +
		"millisecond first-byte read and write request latencies\", \"up to 10x faster than S3 Standard\".",
	"[4] Adam Gutglick, \"So you want to use Object Storage\" (spiraldb.com, 2025): object-store latency is roughly " +
		"log-normal with a long tail (an engineer's observation, not AWS's).",
}

// profileNames lists the known profiles' names.
func profileNames() []string {
	var names []string
	for _, p := range profiles {
		names = append(names, p.name)
	}
	return names
}

// parseProfiles returns the profiles named in a comma-separated list, in
// the order given; an unknown or repeated name is an error.
func parseProfiles(s string) ([]*latencyProfile, error) {
	var out []*latencyProfile
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		i := slices.IndexFunc(profiles, func(p *latencyProfile) bool { return p.name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("unknown latency profile %q: the profiles are %s", name, strings.Join(profileNames(), ", "))
		case slices.Contains(out, profiles[i]):
			return nil, fmt.Errorf("latency profile %q is named twice", name)
		}
		out = append(out, profiles[i])
	}
	return out, nil
}

// sampler draws delays from a profile with a seeded generator of its own.
// It is safe for concurrent use.
type sampler struct {
	p   *latencyProfile
	mu  sync.Mutex
	rng *rand.Rand
}

// newSampler returns a sampler of p whose draws are fixed by seed and
// stream: each tap of a run draws from its own stream.
func newSampler(p *latencyProfile, seed, stream uint64) *sampler {
	return &sampler{p: p, rng: rand.New(rand.NewPCG(seed, stream))}
}

// draw returns the delay of one request of operation op.
func (s *sampler) draw(op string) time.Duration {
	d := s.p.classes[classOf(op)]
	if d.median <= 0 {
		return 0
	}
	s.mu.Lock()
	z := s.rng.NormFloat64()
	s.mu.Unlock()
	v := float64(d.median) * math.Exp(d.sigma()*z)
	return time.Duration(min(v, float64(s.p.ceiling)))
}
