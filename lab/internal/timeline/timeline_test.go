package timeline

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecordReadCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline")
	t0 := time.Unix(1000, 0)
	sec := func(who string, epoch uint64, from, to int) Section {
		return Section{Who: who, Epoch: epoch, Start: t0.Add(time.Duration(from) * time.Second), End: t0.Add(time.Duration(to) * time.Second)}
	}
	for _, s := range []Section{sec("b", 2, 3, 5), sec("a", 1, 0, 2), sec("c", 3, 6, 7)} {
		if err := Record(path, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil || len(got) != 3 || got[0].Who != "a" || got[2].Who != "c" || !got[1].End.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if err := Check(got); err != nil {
		t.Errorf("Check of disjoint sections = %v", err)
	}
	var out strings.Builder
	Render(&out, got, t0, map[string]time.Time{"b": t0})
	if !strings.Contains(out.String(), "3s") {
		t.Errorf("Render does not show b's wait:\n%s", out.String())
	}

	cases := map[string][]Section{
		"OVERLAP":     {sec("a", 1, 0, 3), sec("b", 2, 2, 4)},
		"EPOCH ORDER": {sec("a", 2, 0, 1), sec("b", 1, 2, 3)},
	}
	for want, secs := range cases {
		if err := Check(secs); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%v) = %v; want %s", secs, err, want)
		}
	}
	if err := Record(path, Section{Who: "has space"}); err == nil {
		t.Error("Record accepted a name with a space")
	}
}
