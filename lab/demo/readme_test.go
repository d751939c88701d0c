package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
)

// TestReadmeSample_IsARun: the README's sample timeline is what the demo
// prints for its numbers (the same columns), and shows what every run has:
// each participant once, on epochs 1, 2, 3 in turn. make demo checks the
// same against a real run; this catches a drift without terraform.
func TestReadmeSample_IsARun(t *testing.T) {
	t.Parallel()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, sample, err := readmeSample(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections, launched, origin, err := parseSample(sample)
	if err != nil {
		t.Fatal(err)
	}
	var rendered strings.Builder
	timeline.Render(&rendered, sections, origin, launched)
	if trimLines(rendered.String()) != sample {
		t.Errorf("the README's sample is not what the demo prints for its numbers:\n%s\nthe demo prints:\n%s", sample, rendered.String())
	}
	var want []timeline.Section
	for i, who := range append(append([]string{}, applies...), migrationWho) {
		want = append(want, timeline.Section{Who: who, Epoch: uint64(i + 1)})
	}
	if got, want := shape(sections), shape(want); got != want {
		t.Errorf("the README's sample shows %s; a run has %s", got, want)
	}
}

// TestReadmeSample_WriteThenCheck: a run's timeline written into a README
// passes the check that the next run makes, also with times that round
// across a bar's step; a sample from another run shape does not.
func TestReadmeSample_WriteThenCheck(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	sections := []timeline.Section{
		{Who: "migration", Epoch: 1, Start: at(0), End: at(2004 * time.Millisecond)},
		{Who: "apply-a", Epoch: 2, Start: at(2249*time.Millisecond + 999*time.Microsecond), End: at(4300 * time.Millisecond)},
		{Who: "apply-b", Epoch: 3, Start: at(4412 * time.Millisecond), End: at(6420 * time.Millisecond)},
	}
	launched := map[string]time.Time{"migration": at(-60 * time.Millisecond), "apply-a": at(-100 * time.Millisecond)}
	sample, err := renderSample(sections, launched)
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(t.TempDir(), "README.md")
	text := "intro\n" + sampleBegin + "\n```\nold\n```\n" + sampleEnd + "\nmore\n"
	if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSample(readme, sample); err != nil {
		t.Fatal(err)
	}
	if err := checkSample(readme, sections); err != nil {
		t.Fatalf("the sample just written fails the check: %v", err)
	}
	_, back, _ := readmeSample(readme)
	if again, err := renderSample(mustParse(t, back)); err != nil || again != back {
		t.Errorf("rendering the sample again changes it (%v):\n%s\nthen:\n%s", err, back, again)
	}
	if !strings.Contains(back, "-  ") || !strings.HasPrefix(back, "t+") {
		t.Errorf("sample:\n%s\nwant a header and apply-b's unknown wait as -", back)
	}
	other := slicesWithEpochs(sections, 1, 4, 5)
	if err := checkSample(readme, other); err == nil || !strings.Contains(err.Error(), "DEMOARGS=-readme") {
		t.Errorf("a run on epochs 1, 4, 5 against a sample on 1, 2, 3: %v; want a mismatch naming the fix", err)
	}
}

func mustParse(t *testing.T, sample string) ([]timeline.Section, map[string]time.Time) {
	t.Helper()
	sections, launched, _, err := parseSample(sample)
	if err != nil {
		t.Fatal(err)
	}
	return sections, launched
}

func slicesWithEpochs(sections []timeline.Section, epochs ...uint64) []timeline.Section {
	out := append([]timeline.Section{}, sections...)
	for i := range out {
		out[i].Epoch = epochs[i]
	}
	return out
}
