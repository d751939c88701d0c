package main

import (
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

func TestGoal(t *testing.T) {
	times := &opTimes{}
	for _, e := range []event{
		ev(0, 30, "GetObject", "k", 200), ev(0, 60, "ListObjectsV2", "k", 200), ev(0, 50, "PutObject", "k", 200),
	} {
		times.add(e)
	}
	pr := &profileResult{profile: latency.S3Standard, times: times}
	for i := 1; i <= 100; i++ {
		pr.series = append(pr.series, handoff{system: sysS3lock, gap: time.Duration(i) * 3 * time.Millisecond})
	}
	g := goalOf(pr)
	if want := 340 * time.Millisecond; g.bound != want {
		t.Errorf("bound = %s, want 200 ms + 30 + 60 + 50 = %s", g.bound, want)
	}
	if g.p99 != 297*time.Millisecond || !g.held() {
		t.Errorf("p99 %s held %t, want 297ms within the bound", g.p99, g.held())
	}
	pr.series[99].gap, pr.series[98].gap = time.Second, time.Second
	if g := goalOf(pr); g.held() {
		t.Errorf("p99 %s over the bound %s counted as held", g.p99, g.bound)
	}
	if v := goalVerdict(pr); !strings.Contains(v, "did not hold") || !strings.Contains(v, "660 ms") {
		t.Errorf("goalVerdict = %q: it should say the goal did not hold, by 660 ms", v)
	}
}
