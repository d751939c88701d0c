package latency

import (
	"strings"
	"testing"
)

func TestClassOf(t *testing.T) {
	for op, want := range map[string]Class{
		"GetObject": Read, "HeadObject": Read, "GET": Read, "HEAD": Read,
		"ListObjectsV2": List, "ListObjects": List,
		"PutObject": Write, "DeleteObject": Write, "DeleteObjects": Write, "CreateBucket": Write, "POST": Write,
	} {
		if got := ClassOf(op); got != want {
			t.Errorf("ClassOf(%q) = %s, want %s", op, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("s3-express, loopback")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "s3-express" || got[1].Name != "loopback" {
		t.Errorf("Parse kept %v, want s3-express then loopback", got)
	}
	for _, bad := range []string{"s3-glacier", "loopback,", "s3-standard,s3-standard"} {
		_, err := Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
			continue
		}
		if !strings.Contains(err.Error(), "latency profile") {
			t.Errorf("Parse(%q) = %q: the error does not say it is about latency profiles", bad, err)
		}
	}
	if _, err := Parse("s3-glacier"); err == nil || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("an unknown profile's error does not list the known ones: %v", err)
	}
}

func TestLookup(t *testing.T) {
	for _, name := range Names() {
		if p, err := Lookup(name); err != nil || p.Name != name {
			t.Errorf("Lookup(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := Lookup("s3-glacier"); err == nil || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("an unknown profile's error does not list the known ones: %v", err)
	}
}

func TestProfiles_AreOrderedAndBounded(t *testing.T) {
	for _, p := range Profiles {
		if p.Delayless() {
			continue
		}
		for c := range NumClasses {
			if d := p.Classes[c]; d.Median <= 0 || d.P99 <= d.Median || d.P99 > p.Ceiling {
				t.Errorf("%s, %s: median %s and p99 %s are not 0 < median < p99 <= ceiling %s", p.Name, c, d.Median, d.P99, p.Ceiling)
			}
		}
	}
}
