package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
)

// The README shows a run's timeline as a sample, between these two lines;
// `make demo DEMOARGS=-readme` writes it there from the run it just made,
// and every other run checks that the sample still looks like a run (the
// same columns, participants and epochs), so that it cannot drift from
// what the demo prints.
const (
	sampleBegin = "<!-- make demo writes this sample: make demo DEMOARGS=-readme -->"
	sampleEnd   = "<!-- end of the sample -->"
)

// sampleRow is a rendered timeline row: t+, who, epoch, held, waited, bar.
var sampleRow = regexp.MustCompile(`^(\d+\.\d\d)s +(\S+) +(\d+) +(\S+) +(\S+)  +█+$`)

// renderSample renders sections as the README shows them. It renders them
// once, reads them back and renders that, so that the sample is what its
// own numbers render to (a time rounded across a bar's step would not be),
// with no trailing spaces.
func renderSample(sections []timeline.Section, launched map[string]time.Time) (string, error) {
	var first strings.Builder
	timeline.Render(&first, sections, sections[0].Start, launched)
	back, backLaunched, origin, err := parseSample(first.String())
	if err != nil {
		return "", err
	}
	var out strings.Builder
	timeline.Render(&out, back, origin, backLaunched)
	return trimLines(out.String()), nil
}

// trimLines drops the spaces that end the lines of text (the header's empty
// last column), which editors drop too.
func trimLines(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// parseSample reads a rendered timeline back into its sections, the times
// they were launched and the origin of its t+ column.
func parseSample(sample string) ([]timeline.Section, map[string]time.Time, time.Time, error) {
	origin := time.Unix(0, 0)
	lines := strings.Split(strings.TrimRight(sample, "\n"), "\n")
	var sections []timeline.Section
	launched := map[string]time.Time{}
	for _, line := range lines[1:] {
		m := sampleRow.FindStringSubmatch(line)
		if m == nil {
			return nil, nil, origin, fmt.Errorf("not a timeline row: %q", line)
		}
		at, err1 := strconv.ParseFloat(m[1], 64)
		epoch, err2 := strconv.ParseUint(m[3], 10, 64)
		held, err3 := time.ParseDuration(m[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, nil, origin, fmt.Errorf("timeline row %q: %w", line, err)
		}
		start := origin.Add(time.Duration(at*100+0.5) * 10 * time.Millisecond)
		sections = append(sections, timeline.Section{Who: m[2], Epoch: epoch, Start: start, End: start.Add(held)})
		if m[5] != "-" {
			waited, err := time.ParseDuration(m[5])
			if err != nil {
				return nil, nil, origin, fmt.Errorf("timeline row %q: %w", line, err)
			}
			launched[m[2]] = start.Add(-waited)
		}
	}
	return sections, launched, origin, nil
}

// shape is what every run and the README's sample share: the participants
// and the epochs, in the order they held the lock (who went first varies).
func shape(sections []timeline.Section) string {
	var who []string
	var epochs []string
	for _, s := range sections {
		who = append(who, s.Who)
		epochs = append(epochs, strconv.FormatUint(s.Epoch, 10))
	}
	slices.Sort(who)
	return fmt.Sprintf("participants %s; epochs %s", strings.Join(who, ", "), strings.Join(epochs, ", "))
}

// readmeSample returns the README's text and the sample in it (the code
// block between the markers).
func readmeSample(path string) (text, sample string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	text = string(b)
	_, rest, ok1 := strings.Cut(text, sampleBegin+"\n```\n")
	sample, _, ok2 := strings.Cut(rest, "```\n"+sampleEnd)
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("%s has no sample timeline between %q and %q", path, sampleBegin, sampleEnd)
	}
	return text, sample, nil
}

// writeSample replaces the README's sample with sample.
func writeSample(path, sample string) error {
	text, old, err := readmeSample(path)
	if err != nil {
		return err
	}
	text = strings.Replace(text, sampleBegin+"\n```\n"+old, sampleBegin+"\n```\n"+sample, 1)
	return os.WriteFile(path, []byte(text), 0o644)
}

// checkSample returns an error unless the README's sample has the shape of
// this run's sections.
func checkSample(path string, sections []timeline.Section) error {
	_, sample, err := readmeSample(path)
	if err != nil {
		return err
	}
	shown, _, _, err := parseSample(sample)
	if err != nil {
		return fmt.Errorf("%s's sample timeline: %w", path, err)
	}
	if got, want := shape(shown), shape(sections); got != want {
		return fmt.Errorf("%s's sample timeline shows %s; this run had %s: make demo DEMOARGS=-readme writes this run's there", path, got, want)
	}
	return nil
}
