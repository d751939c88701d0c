// Package latency is the lab's model of how long a cloud store takes to
// answer: latency profiles (loopback, S3 Standard, S3 Express One Zone), a
// log-normal delay per class of request drawn from AWS's own statements,
// and a seeded sampler of those delays. The benchmarks' taps (lab/bench)
// and the chaos suite's proxy in front of the store (lab/chaos) hold every
// request for a delay drawn from a profile before they pass it on, so that
// what they measure or check meets a store that answers as a cloud one
// would rather than loopback's millisecond. A request whose client gave up
// during its delay is dropped by the taps but forwarded by the proxy, as a
// slow network would deliver it.
package latency

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Class groups S3 operations by what the store does to answer them.
type Class int

const (
	Read       Class = iota // GetObject, HeadObject: read one object
	Write                   // PutObject, DeleteObject(s) and every other request
	List                    // ListObjectsV2: read a range of the key index
	NumClasses              // how many classes there are, for arrays indexed by Class
)

func (c Class) String() string {
	return [...]string{"read (GET, HEAD)", "write (PUT, DELETE, POST)", "list (ListObjectsV2)"}[c]
}

// ClassOf returns the class of an operation as s3test.Operation names it
// ("GetObject", "ListObjectsV2", or the HTTP method when it knows no name).
func ClassOf(op string) Class {
	switch {
	case strings.HasPrefix(op, "List"):
		return List
	case strings.HasPrefix(op, "Get"), strings.HasPrefix(op, "Head"), op == "GET", op == "HEAD":
		return Read
	}
	return Write
}

// Delay is the distribution of one class's delays: log-normal with this
// median and 99th percentile. A zero median is no delay.
type Delay struct{ Median, P99 time.Duration }

// z99 is the standard normal distribution's 99th percentile.
const z99 = 2.3263478740408408

// sigma is the log-normal's shape parameter that puts P99 where it is.
func (d Delay) sigma() float64 { return math.Log(float64(d.P99)/float64(d.Median)) / z99 }

// Profile is one latency profile: a delay per request class, none above
// Ceiling.
type Profile struct {
	Name    string // as the benchmarks' -profiles and S3LOCK_CHAOS_PROFILE spell it
	Store   string // the store it stands for, in reports
	Classes [NumClasses]Delay
	// Ceiling caps every draw: a log-normal has no upper end, and a real
	// client gives up on a request long before its tail runs out.
	Ceiling time.Duration
}

// Delayless reports whether the profile adds nothing (loopback).
func (p *Profile) Delayless() bool {
	for _, d := range p.Classes {
		if d.Median > 0 {
			return false
		}
	}
	return true
}

// Profiles are the latency profiles, in the benchmark report's order. Each
// request's delay is drawn from a log-normal distribution with its class's
// median and 99th percentile, capped at the ceiling. Where the numbers come
// from:
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
var Profiles = []*Profile{Loopback, S3Standard, S3Express}

var (
	// Loopback adds no delay: the store answers as it does.
	Loopback = &Profile{Name: "loopback", Store: "none: versitygw on loopback as it answers"}
	// S3Standard is S3 Standard's latency seen from the bucket's Region
	// ([1], [2] in Profiles).
	S3Standard = &Profile{
		Name:  "s3-standard",
		Store: "AWS S3 Standard, general purpose bucket, client in the bucket's Region",
		Classes: [NumClasses]Delay{
			Read:  {Median: 30 * time.Millisecond, P99: 150 * time.Millisecond},
			Write: {Median: 50 * time.Millisecond, P99: 200 * time.Millisecond},
			List:  {Median: 60 * time.Millisecond, P99: 250 * time.Millisecond},
		},
		Ceiling: 2 * time.Second,
	}
	// S3Express is S3 Express One Zone's (a directory bucket's) latency
	// seen from the bucket's Availability Zone ([3] in Profiles).
	S3Express = &Profile{
		Name:  "s3-express",
		Store: "AWS S3 Express One Zone, directory bucket, client in the bucket's Availability Zone",
		Classes: [NumClasses]Delay{
			Read:  {Median: 3 * time.Millisecond, P99: 8 * time.Millisecond},
			Write: {Median: 5 * time.Millisecond, P99: 9 * time.Millisecond},
			List:  {Median: 6 * time.Millisecond, P99: 15 * time.Millisecond},
		},
		Ceiling: 200 * time.Millisecond,
	}
)

// Sources are the sources of the profiles, for reports (Markdown).
var Sources = []string{
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

// Names lists the profiles' names, in Profiles' order.
func Names() []string {
	var names []string
	for _, p := range Profiles {
		names = append(names, p.Name)
	}
	return names
}

// Lookup returns the profile of that name; an unknown name is an error that
// lists the known ones.
func Lookup(name string) (*Profile, error) {
	i := slices.IndexFunc(Profiles, func(p *Profile) bool { return p.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("unknown latency profile %q: the profiles are %s", name, strings.Join(Names(), ", "))
	}
	return Profiles[i], nil
}

// Parse returns the profiles named in a comma-separated list, in the order
// given; an unknown or repeated name is an error.
func Parse(s string) ([]*Profile, error) {
	var out []*Profile
	for _, f := range strings.Split(s, ",") {
		p, err := Lookup(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("latency profile %q is named twice", p.Name)
		}
		out = append(out, p)
	}
	return out, nil
}
