package main

import (
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

func TestReport_ProfileSections(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &results{}
	for _, p := range latency.Profiles {
		pr := &profileResult{profile: p, times: &opTimes{}}
		for _, hold := range cfg.holds {
			pr.release = append(pr.release,
				handoff{system: sysS3lock, hold: hold, gap: 120 * time.Millisecond, waited: hold, requests: 10, acquired: true},
				handoff{system: sysTerraform, hold: hold, gap: time.Second, waited: hold, requests: 2, acquired: true})
		}
		pr.crash = []handoff{
			{system: sysS3lock, hold: cfg.crashHold, gap: 9 * time.Second, sinceWrite: 3 * time.Second, waited: 15 * time.Second},
			{system: sysTerraform, hold: cfg.crashHold, gaveUpAfter: cfg.tfCrashWait, waited: 21 * time.Second},
		}
		pr.series = []handoff{{system: sysS3lock, gap: 250 * time.Millisecond, waited: time.Second}}
		pr.slots = slotsResult{n: cfg.slots, rounds: 1, free: []slotTry{{took: 40 * time.Millisecond, requests: 4}},
			full: []slotTry{{took: 30 * time.Millisecond, requests: 4, held: cfg.slots}}}
		res.profiles = append(res.profiles, pr)
	}
	res.release, res.crash = res.profiles[0].release, res.profiles[0].crash
	doc := report(cfg, res, "chart.png")
	for _, want := range []string{"## 5. Under cloud latency", "### The profiles", "### The goal", "`s3-standard`",
		"no equivalent: a state lock admits one holder", "did not hold", "**never**"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if i := strings.Index(doc, "%!"); i >= 0 {
		t.Errorf("the report has a formatting error: %q", doc[max(0, i-60):min(len(doc), i+60)])
	}
}
