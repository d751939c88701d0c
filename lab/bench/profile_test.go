package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// draws is how many delays each sampling test draws per class: enough that
// the empirical median and p99 of a log-normal land within a few percent of
// the stated ones for any seed.
const draws = 50_000

func TestSampler_DrawsWithinTheProfile(t *testing.T) {
	for _, p := range profiles {
		for c := range nClasses {
			t.Run(p.name+"/"+c.String(), func(t *testing.T) {
				s := newSampler(p, 1, uint64(c))
				op := map[requestClass]string{classRead: "GetObject", classWrite: "PutObject", classList: "ListObjectsV2"}[c]
				ds := make([]time.Duration, draws)
				for i := range ds {
					ds[i] = s.draw(op)
				}
				want := p.classes[c]
				if want.median == 0 {
					if slices.Max(ds) != 0 {
						t.Fatalf("a profile without delay for %s drew %s", c, slices.Max(ds))
					}
					return
				}
				if lo, hi := slices.Min(ds), slices.Max(ds); lo <= 0 || hi > p.ceiling {
					t.Errorf("draws span [%s, %s], outside (0, %s]", lo, hi, p.ceiling)
				}
				within(t, "median", median(ds), want.median, 0.05)
				within(t, "p99", percentile(ds, 99), want.p99, 0.10)
			})
		}
	}
}

// within fails t unless got is within tolerance (a fraction) of want.
func within(t *testing.T, what string, got, want time.Duration, tolerance float64) {
	t.Helper()
	if diff := float64(got-want) / float64(want); diff < -tolerance || diff > tolerance {
		t.Errorf("%s of the draws = %s, want %s ± %.0f %%", what, got, want, 100*tolerance)
	}
}

func TestSampler_SameSeedSameDraws(t *testing.T) {
	p := profiles[1]
	a, b, other := newSampler(p, 7, 3), newSampler(p, 7, 3), newSampler(p, 7, 4)
	same, differs := true, false
	for range 100 {
		x, y, z := a.draw("GetObject"), b.draw("GetObject"), other.draw("GetObject")
		same = same && x == y
		differs = differs || x != z
	}
	if !same {
		t.Error("two samplers of one seed and stream drew different delays")
	}
	if !differs {
		t.Error("two streams of one seed drew the same delays")
	}
}

func TestClassOf(t *testing.T) {
	for op, want := range map[string]requestClass{
		"GetObject": classRead, "HeadObject": classRead, "GET": classRead, "HEAD": classRead,
		"ListObjectsV2": classList, "ListObjects": classList,
		"PutObject": classWrite, "DeleteObject": classWrite, "DeleteObjects": classWrite, "CreateBucket": classWrite, "POST": classWrite,
	} {
		if got := classOf(op); got != want {
			t.Errorf("classOf(%q) = %s, want %s", op, got, want)
		}
	}
}

func TestParseProfiles(t *testing.T) {
	got, err := parseProfiles("s3-express, loopback")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "s3-express" || got[1].name != "loopback" {
		t.Errorf("parseProfiles kept %v, want s3-express then loopback", got)
	}
	for _, bad := range []string{"s3-glacier", "loopback,", "s3-standard,s3-standard"} {
		_, err := parseProfiles(bad)
		if err == nil {
			t.Errorf("parseProfiles(%q) accepted it", bad)
			continue
		}
		if !strings.Contains(err.Error(), "latency profile") {
			t.Errorf("parseProfiles(%q) = %q: the error does not say it is about latency profiles", bad, err)
		}
	}
	if _, err := parseProfiles("s3-glacier"); err == nil || !strings.Contains(err.Error(), strings.Join(profileNames(), ", ")) {
		t.Errorf("an unknown profile's error does not list the known ones: %v", err)
	}
}

func TestProfiles_AreOrderedAndBounded(t *testing.T) {
	for _, p := range profiles {
		if p.delayless() {
			continue
		}
		for c := range nClasses {
			if d := p.classes[c]; d.median <= 0 || d.p99 <= d.median || d.p99 > p.ceiling {
				t.Errorf("%s, %s: median %s and p99 %s are not 0 < median < p99 <= ceiling %s", p.name, c, d.median, d.p99, p.ceiling)
			}
		}
	}
}

func TestGoal(t *testing.T) {
	times := &opTimes{}
	for _, e := range []event{
		ev(0, 30, "GetObject", "k", 200), ev(0, 60, "ListObjectsV2", "k", 200), ev(0, 50, "PutObject", "k", 200),
	} {
		times.add(e)
	}
	pr := &profileResult{profile: profiles[1], times: times}
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

func TestReport_ProfileSections(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &results{}
	for _, p := range profiles {
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
