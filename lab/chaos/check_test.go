package chaos

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
)

// The checks must be able to fail: these tests feed them histories written
// by hand, good ones and deliberately bad ones. They are fast and always run.

// cs describes one critical section of a hand-written history; times are in
// milliseconds.
type cs struct {
	proc  string
	epoch uint64
	begin int64
	dur   int64 // from begin to its last record; 100 if 0
	until int64 // trusted until; 0: while it runs (an s3lock run command)
	read  int64 // the value it read
	write record.Outcome
}

func ms(v int64) int64 { return v * int64(time.Millisecond) }

// records returns the section's records as a worker writes them: read at the
// start, write in the middle, end at begin+dur.
func (c cs) records(n int) []record.Record {
	dur := c.dur
	if dur == 0 {
		dur = 100
	}
	b, d := ms(c.begin), ms(dur)
	until := ms(c.until)
	base := record.Record{Proc: c.proc, CS: n, Epoch: c.epoch}
	at := func(kind record.Kind, mono int64, set func(*record.Record)) record.Record {
		r := base
		r.Kind, r.Mono = kind, mono
		set(&r)
		return r
	}
	none := func(*record.Record) {}
	recs := []record.Record{
		at(record.Begin, b, func(r *record.Record) { r.Until = until }),
		at(record.ReadCall, b+ms(1), none),
		at(record.ReadReturn, b+ms(10), func(r *record.Record) { r.Value = c.read }),
	}
	if c.write != "" {
		recs = append(recs,
			at(record.WriteCall, b+d/2, func(r *record.Record) { r.From, r.To, r.Until = c.read, c.read+1, until }),
			at(record.WriteReturn, b+d-ms(1), func(r *record.Record) { r.Outcome = c.write }))
	}
	return append(recs, at(record.End, b+d, func(r *record.Record) { r.Until = until }))
}

// history assembles hand-written critical sections, closed by the test's
// read of final at 2 s.
func history(final int64, sections ...cs) *History {
	var recs []record.Record
	n := map[string]int{}
	for _, c := range sections {
		n[c.proc]++
		recs = append(recs, c.records(n[c.proc])...)
	}
	slices.SortStableFunc(recs, func(a, b record.Record) int { return cmp.Compare(a.Mono, b.Mono) })
	return NewHistory(recs, Op{Proc: "test", Kind: OpRead, Call: ms(2000), Return: ms(2005), Value: final})
}

// handoffs is a correct history: five leases one after the other, each
// trusted until 50 ms after its last record. B's write has an unknown
// outcome, D's certainly failed, E's is unknown and its effect depends on
// the final read.
func handoffs() []cs {
	return []cs{
		{proc: "A", epoch: 1, begin: 0, until: 150, read: 0, write: record.OK},
		{proc: "B", epoch: 2, begin: 200, until: 350, read: 1, write: record.Unknown},
		{proc: "run1", epoch: 3, begin: 400, read: 2, write: record.OK},
		{proc: "D", epoch: 4, begin: 600, until: 750, read: 3, write: record.Failed},
		{proc: "E", epoch: 5, begin: 800, until: 950, read: 3, write: record.Unknown},
	}
}

func TestChaosChecker_AcceptsCorrectHistories(t *testing.T) {
	for _, tc := range []struct {
		name  string
		final int64
	}{
		{"the last unknown write happened", 4},
		{"the last unknown write did not happen", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history(tc.final, handoffs()...)
			if err := CheckExclusive(h.Sections); err != nil {
				t.Error(err)
			}
			if err := CheckEpochOrder(h.Sections); err != nil {
				t.Error(err)
			}
			if err := CheckLinearizable(h.Ops, ""); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestChaosChecker_CatchesOverlappingTrustedSections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sections []cs
		want     []string // in the message; nil: no violation
	}{{
		name: "two SDK leases trusted at once",
		sections: []cs{
			{proc: "A", epoch: 1, begin: 0, dur: 400, until: 500, read: 0, write: record.OK},
			{proc: "B", epoch: 2, begin: 300, until: 600, read: 0, write: record.Failed},
		},
		want: []string{"A cs 1 under epoch 1", "B cs 1 under epoch 2", "overlaps"},
	}, {
		name: "an s3lock run command still running when the next lease began",
		sections: []cs{
			{proc: "run1", epoch: 1, begin: 0, dur: 600, read: 0, write: record.OK},
			{proc: "B", epoch: 2, begin: 500, until: 900, read: 1, write: record.OK},
		},
		want: []string{"run1 cs 1 under epoch 1", "trusted while it ran"},
	}, {
		name: "a paused holder whose records go on after its trust deadline",
		sections: []cs{
			{proc: "A", epoch: 1, begin: 0, dur: 1000, until: 200, read: 0, write: record.Unknown},
			{proc: "B", epoch: 2, begin: 500, until: 900, read: 0, write: record.OK},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckExclusive(history(0, tc.sections...).Sections)
			expectViolation(t, err, tc.want)
		})
	}
}

func TestChaosChecker_CatchesALostUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sections []cs
		final    int64
		want     []string
	}{{
		name: "a stale holder's write overwrites its successor's",
		sections: []cs{
			{proc: "A", epoch: 1, begin: 0, dur: 1000, until: 100, read: 0, write: record.OK},
			{proc: "B", epoch: 2, begin: 200, until: 500, read: 0, write: record.OK},
		},
		final: 1,
		want:  []string{"not linearizable", "A cs 1 epoch 1: write 0->1"},
	}, {
		name: "a read misses a confirmed write",
		sections: []cs{
			{proc: "A", epoch: 1, begin: 0, until: 150, read: 0, write: record.OK},
			{proc: "B", epoch: 2, begin: 200, until: 350, read: 0},
		},
		final: 1,
		want:  []string{"B cs 1 epoch 2: read 0"},
	}, {
		name: "the register holds more than the writes that may have happened",
		sections: []cs{
			{proc: "A", epoch: 1, begin: 0, until: 150, read: 0, write: record.OK},
			{proc: "B", epoch: 2, begin: 200, until: 350, read: 1, write: record.Failed},
		},
		final: 2,
		want:  []string{"the test's final read: read 2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			expectViolation(t, CheckLinearizable(history(tc.final, tc.sections...).Ops, ""), tc.want)
		})
	}
}

func TestChaosChecker_CatchesNonIncreasingEpochs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sections []cs
		want     []string
	}{{
		name: "an older epoch begins after a newer one",
		sections: []cs{
			{proc: "A", epoch: 5, begin: 0, until: 150, read: 0, write: record.OK},
			{proc: "B", epoch: 4, begin: 200, until: 350, read: 1, write: record.OK},
		},
		want: []string{"epoch 4 began after epoch 5", "B cs 1 under epoch 4"},
	}, {
		name: "two processes under one epoch",
		sections: []cs{
			{proc: "A", epoch: 5, begin: 0, until: 150, read: 0, write: record.OK},
			{proc: "B", epoch: 5, begin: 200, until: 350, read: 1, write: record.OK},
		},
		want: []string{"two processes worked under epoch 5"},
	}, {
		name: "one lease's sections in a row",
		sections: []cs{
			{proc: "A", epoch: 5, begin: 0, until: 450, read: 0, write: record.OK},
			{proc: "A", epoch: 5, begin: 200, until: 450, read: 1, write: record.OK},
			{proc: "B", epoch: 6, begin: 500, until: 650, read: 2, write: record.OK},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			expectViolation(t, CheckEpochOrder(history(0, tc.sections...).Sections), tc.want)
		})
	}
}

// expectViolation fails unless err reports a violation whose message has
// every want; with want nil, it fails if err is not nil.
func expectViolation(t *testing.T, err error, want []string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("reported a violation in a correct history: %v", err)
	case want == nil:
		return
	case err == nil:
		t.Fatal("the violation went unnoticed")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the message does not mention %q:\n%v", w, err)
		}
	}
	t.Logf("caught, as it should be:\n%v", err)
}
