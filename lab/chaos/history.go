package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/witness"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
)

// Claims returns the trust deadlines the SDK workers recorded for lock (each
// record's Until, known by its Mono), for the store's record to judge
// (witness.Check). Records without a deadline — an `s3lock run`'s command,
// which trusts its lease while it runs, and the broken worker, which trusts
// it forever — make none.
func Claims(recs []record.Record, lock string) []witness.Claim {
	var out []witness.Claim
	for _, r := range recs {
		if r.Epoch == 0 || r.Until == 0 || r.Until == record.Forever || r.Shared {
			continue // a share's writes go to its own key, which the witness does not follow
		}
		out = append(out, witness.Claim{Lock: lock, Epoch: r.Epoch, Holder: r.Proc, At: r.Mono, Until: r.Until})
	}
	return out
}

// Section is one critical section as its process recorded it.
type Section struct {
	Proc  string
	CS    int
	Epoch uint64
	// Shared is set for a section under a shared lease: it only reads.
	Shared bool
	// Begin is when it began; Last its last record: its end, or as far as
	// the process got before it was killed.
	Begin, Last int64
	// Until is when the process stopped trusting its lease, by its last
	// check (record.Record.Until): 0 if the process trusts it while it
	// runs (the command of an `s3lock run`), record.Forever if it trusts
	// it without bound (the broken worker).
	Until int64
	Read  *Op // nil if it got no answer to its read
	Write *Op // nil if it did not write, or its write certainly failed
	// Outcome is how its write ended: "" if it did not write, Unknown if
	// its process died before it learned.
	Outcome record.Outcome
	Records []record.Record
}

// TrustedEnd is when the section stopped being trusted: its last record, or
// its lease's trust deadline if that came first.
func (s *Section) TrustedEnd() int64 {
	if s.Until != 0 && s.Until < s.Last {
		return s.Until
	}
	return s.Last
}

// owner names the lease a section ran under: one process, one epoch.
func (s *Section) owner() string { return fmt.Sprintf("%s@%d", s.Proc, s.Epoch) }

// OpKind is what an operation on the register did.
type OpKind int

// The operations on the register.
const (
	OpRead  OpKind = iota + 1 // read Value
	OpWrite                   // compare-and-swap From -> To
)

// Pending is the Return of an operation whose outcome is unknown: it may
// take effect at any time after its call, or never.
const Pending int64 = math.MaxInt64

// Op is one operation on the register.
type Op struct {
	Proc  string
	CS    int
	Epoch uint64
	Kind  OpKind
	// Call and Return bracket it; Return is Pending if the outcome is
	// unknown.
	Call, Return int64
	Value        int64 // OpRead: the value read
	From, To     int64 // OpWrite
}

func (o Op) String() string {
	ret := "pending"
	if o.Return != Pending {
		ret = fmt.Sprintf("%.3fs", float64(o.Return-o.Call)/float64(time.Second))
	}
	what := fmt.Sprintf("read %d", o.Value)
	if o.Kind == OpWrite {
		what = fmt.Sprintf("write %d->%d", o.From, o.To)
	}
	who := fmt.Sprintf("%s cs %d epoch %d", o.Proc, o.CS, o.Epoch)
	if o.CS == 0 {
		who = "the test's final read"
	}
	return fmt.Sprintf("%s: %s (call at %s, took %s)", who, what, stamp(o.Call), ret)
}

// History is what a run recorded, ready for the checks: its critical
// sections, ordered by when they began, and its register operations. Its
// times are relative to its first record, so that messages show them as
// seconds into the run.
type History struct {
	// Start is the CLOCK_MONOTONIC reading of the first record: time zero.
	Start    int64
	Sections []*Section
	Ops      []Op
}

// NewHistory assembles the history from the processes' records (ordered by
// time) and the read of the register that closes it, after every process
// is gone.
func NewHistory(recs []record.Record, final Op) *History {
	h := &History{}
	if len(recs) > 0 {
		h.Start = recs[0].Mono
	}
	rel := make([]record.Record, len(recs))
	for i, r := range recs {
		r.Mono -= h.Start
		if r.Until != 0 && r.Until != record.Forever {
			r.Until -= h.Start
		}
		rel[i] = r
	}
	final.Call -= h.Start
	final.Return -= h.Start
	h.Sections = sections(rel)
	h.Ops = append(ops(h.Sections), final)
	return h
}

// sections assembles the critical sections, ordered by when they began.
func sections(recs []record.Record) []*Section {
	byKey := map[string]*Section{}
	var out []*Section
	for _, r := range recs {
		if r.CS == 0 {
			continue
		}
		key := fmt.Sprintf("%s#%d", r.Proc, r.CS)
		s := byKey[key]
		if s == nil {
			if r.Kind != record.Begin {
				continue // the section never began: its trust check failed
			}
			s = &Section{Proc: r.Proc, CS: r.CS, Epoch: r.Epoch, Shared: r.Shared, Begin: r.Mono}
			byKey[key] = s
			out = append(out, s)
		}
		s.add(r)
	}
	slices.SortStableFunc(out, func(a, b *Section) int { return cmp.Compare(a.Begin, b.Begin) })
	return out
}

func (s *Section) add(r record.Record) {
	s.Records = append(s.Records, r)
	s.Last = max(s.Last, r.Mono)
	if r.Until != 0 || r.Kind == record.Begin {
		s.Until = r.Until
	}
	op := Op{Proc: s.Proc, CS: s.CS, Epoch: s.Epoch, Call: r.Mono, Return: Pending}
	switch r.Kind {
	case record.ReadCall:
		op.Kind = OpRead
		s.Read = &op
	case record.ReadReturn:
		if s.Read != nil && r.Err == "" {
			s.Read.Return, s.Read.Value = r.Mono, r.Value
		} else {
			s.Read = nil // a read that failed tells nothing
		}
	case record.WriteCall:
		op.Kind, op.From, op.To = OpWrite, r.From, r.To
		s.Write, s.Outcome = &op, record.Unknown
	case record.WriteReturn:
		s.Outcome = r.Outcome
		switch {
		case s.Write == nil:
		case r.Outcome == record.OK:
			s.Write.Return = r.Mono
		case r.Outcome == record.Failed:
			s.Write = nil // it certainly did not happen
		}
	}
}

// ops returns the register operations of the sections: every read that was
// answered, and every write that did not certainly fail (pending if its
// outcome is unknown or its process died before it learned it).
func ops(sections []*Section) []Op {
	var ops []Op
	for _, s := range sections {
		if s.Read != nil && s.Read.Return != Pending {
			ops = append(ops, *s.Read)
		}
		if s.Write != nil {
			ops = append(ops, *s.Write)
		}
	}
	return ops
}

// stamp shows a time of a History (relative to its start) in seconds.
func stamp(t int64) string {
	if t == record.Forever { // == Pending
		return "forever"
	}
	return fmt.Sprintf("+%.3fs", float64(t)/float64(time.Second))
}

// describe shows a section and its records, for failure messages.
func (s *Section) describe() string {
	var b strings.Builder
	trusted := "trusted until " + stamp(s.Until)
	if s.Until == 0 {
		trusted = "trusted while it ran (an s3lock run command)"
	}
	fmt.Fprintf(&b, "%s cs %d under epoch %d: began %s, %s, last record %s\n",
		s.Proc, s.CS, s.Epoch, stamp(s.Begin), trusted, stamp(s.Last))
	for _, r := range s.Records {
		fmt.Fprintf(&b, "      %s %-12s %s\n", stamp(r.Mono), r.Kind, recordDetail(r))
	}
	return b.String()
}

func recordDetail(r record.Record) string {
	var parts []string
	switch r.Kind {
	case record.ReadReturn:
		parts = append(parts, fmt.Sprintf("value %d", r.Value))
	case record.WriteCall:
		parts = append(parts, fmt.Sprintf("%d->%d", r.From, r.To))
	case record.WriteReturn:
		parts = append(parts, string(r.Outcome))
	}
	if r.Until != 0 {
		parts = append(parts, "until "+stamp(r.Until))
	}
	if r.Err != "" {
		parts = append(parts, "err: "+r.Err)
	}
	if r.Detail != "" {
		parts = append(parts, r.Detail)
	}
	return strings.Join(parts, ", ")
}
