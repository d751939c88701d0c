package record

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadDir_MergesFilesByTimeAndSkipsATornLastLine(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(filepath.Join(dir, "a.jsonl"), "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(filepath.Join(dir, "b.jsonl"), "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		w    *Writer
		mono int64
	}{{a, 1}, {b, 2}, {a, 3}} {
		if err := w.w.Write(Record{Kind: Begin, Mono: w.mono, CS: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Close()
	_ = b.Close()
	// A process killed in the middle of a line leaves it torn.
	f, err := os.OpenFile(filepath.Join(dir, "b.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"proc":"b","kind":"cs-e`)
	_ = f.Close()

	recs, torn, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if torn != 1 || len(recs) != 3 {
		t.Fatalf("got %d records and %d torn lines, want 3 and 1", len(recs), torn)
	}
	for i, want := range []string{"a", "b", "a"} {
		if recs[i].Proc != want || recs[i].Mono != int64(i+1) {
			t.Errorf("record %d is %+v, want %s at %d", i, recs[i], want, i+1)
		}
	}
	if _, err := Create(filepath.Join(dir, "a.jsonl"), "a"); err == nil {
		t.Error("Create reused an existing history file")
	}
}

func TestNow_IsMonotonic(t *testing.T) {
	a := Now()
	b := Now()
	if a <= 0 || b < a {
		t.Fatalf("CLOCK_MONOTONIC read %d then %d", a, b)
	}
}
