package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// The goal the handoff is held to, under every profile: a waiter that was
// waiting when the holder released the lock holds it within one poll
// interval plus three round trips (the poll's GET that reads the release,
// the LIST and the PUT that take the lock), p99 included. A round trip is
// the profile's median request time as the taps measured it.

// goal is the goal's check under one profile.
type goal struct {
	roundTrips [latency.NumClasses]time.Duration // median at the taps, by class
	bound      time.Duration                     // pollInterval + read + list + write
	n          int                               // s3lock handoffs after a release
	p50, p99   time.Duration
}

// goalOf checks the goal against every s3lock handoff after a release
// measured under pr: the series' and the hold-time runs'.
func goalOf(pr *profileResult) goal {
	g := goal{bound: pollInterval}
	for c := range latency.NumClasses {
		g.roundTrips[c] = median(pr.times.of(c))
		if g.roundTrips[c] == 0 { // no such request was timed: the profile's own median
			g.roundTrips[c] = pr.profile.Classes[c].Median
		}
		g.bound += g.roundTrips[c]
	}
	hs := slices.Concat(pr.series, bySystem(pr.release, sysS3lock))
	g.n = len(hs)
	g.p50, g.p99 = percentile(gapsOf(hs), 50), percentile(gapsOf(hs), 99)
	return g
}

func (g goal) held() bool { return g.n > 0 && g.p99 <= g.bound }

// goalVerdict says whether the goal held under pr, and by how much it
// missed if it did not.
func goalVerdict(pr *profileResult) string {
	g := goalOf(pr)
	name := "`" + pr.profile.Name + "`"
	if g.n == 0 {
		return name + ": no s3lock handoff after a release was measured; the goal is not checked."
	}
	bound := fmt.Sprintf("the bound, %s (200 ms + %s read + %s list + %s write round trips at the taps)",
		seconds(g.bound), millis(g.roundTrips[latency.Read]), millis(g.roundTrips[latency.List]), millis(g.roundTrips[latency.Write]))
	if g.held() {
		return fmt.Sprintf("**%s: the goal held**: over %d handoffs, p50 %s and p99 %s, both within %s.",
			name, g.n, seconds(g.p50), seconds(g.p99), bound)
	}
	over := g.p99 - g.bound
	median := "is within it"
	if g.p50 > g.bound {
		median = "is above it too"
	}
	return fmt.Sprintf("**%s: the goal did not hold**: over %d handoffs, p99 %s exceeds %s by %s (%.0f %%); the median, %s, %s.",
		name, g.n, seconds(g.p99), bound, millis(over), 100*over.Seconds()/g.bound.Seconds(), seconds(g.p50), median)
}

// millis formats a duration of milliseconds: "3.2 ms", "150 ms", "1.20 s".
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return seconds(d)
}
