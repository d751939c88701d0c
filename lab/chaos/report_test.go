//go:build linux

package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/faultproxy"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
)

// figures sums a run up.
type figures struct {
	elapsed        time.Duration
	seed           uint64
	sc             scenario
	sections       int
	reads          int
	writes         map[record.Outcome]int
	acquisitions   int // leases that began a critical section or were recorded as acquired
	takeovers      int // epochs that lapsed and were taken over (seen by the monitor)
	pauses         int
	kills          int
	holderKills    int
	net            faultproxy.Counts
	latent         int // requests the latency profile delayed
	restarts       int
	clockJumps     int
	skewedSections int // critical sections of workers with a skewed or jumping clock
	sharedSections int // critical sections under shared leases
	sharedOverlaps int // pairs of shared sections of two processes that overlapped
	killTakeovers  int // takeovers of a killed holder's lease
	worstTakeover  time.Duration
	orphanFree     time.Duration
	processes      int
	witnessed      int         // writes to epoch objects the store's witness saw
	claims         int         // trust deadlines it judged
	runCodes       map[int]int // exit codes of the `s3lock run`s
	torn           int
}

func (l *lab) figures(o *outcome) figures {
	f := figures{elapsed: o.elapsed, seed: l.sc.seed, sc: l.sc, sections: len(o.h.Sections), writes: map[record.Outcome]int{},
		takeovers: len(o.takeovers), restarts: o.restarts, witnessed: o.witnessed, claims: o.claims, orphanFree: o.orphanFree, torn: o.torn, runCodes: map[int]int{}}
	for _, s := range o.h.Sections {
		if s.Read != nil {
			f.reads++
		}
		if s.Outcome != "" {
			f.writes[s.Outcome]++
		}
		if l.sc.skewed(slotOf(s.Proc)) {
			f.skewedSections++
		}
		if s.Shared {
			f.sharedSections++
		}
	}
	f.sharedOverlaps = sharedOverlaps(o.h.Sections)
	for _, r := range o.recs {
		switch {
		case r.Kind == record.ClockJump:
			f.clockJumps++
		case r.Kind == record.Acquired, r.Kind == record.Start && r.Epoch > 0:
			f.acquisitions++
		}
	}
	if l.cloud != nil {
		f.latent = l.cloud.Counts().Latent
	}
	for _, p := range l.proxies {
		c := p.Counts()
		f.net.Blackholes += c.Blackholes
		f.net.Swallowed += c.Swallowed
		f.net.Delayed += c.Delayed
		f.net.Dropped += c.Dropped
		f.net.DroppedOK += c.DroppedOK
	}
	for _, p := range l.procs.snapshot() {
		f.processes++
		if p.run {
			f.runCodes[p.code]++
		}
	}
	l.eventFigures(&f, o)
	return f
}

// eventFigures counts pauses and kills and measures how soon a killed
// holder's lease was taken over: from the kill to the first acquisition of
// a newer epoch, for the epochs the monitor saw lapse.
func (l *lab) eventFigures(f *figures, o *outcome) {
	for _, ev := range l.events.list() {
		switch ev.kind {
		case faultPause:
			f.pauses++
			continue
		case faultKill:
			f.kills++
		}
		if !ev.holder {
			continue
		}
		f.holderKills++
		if !o.takeovers[ev.epoch] {
			continue
		}
		for _, r := range o.recs {
			if r.Mono > ev.at && r.Epoch > ev.epoch && (r.Kind == record.Acquired || r.Kind == record.Start) {
				f.killTakeovers++
				f.worstTakeover = max(f.worstTakeover, time.Duration(r.Mono-ev.at))
				break
			}
		}
	}
}

// slotOf returns the slot of a process name ("w1.3" -> "w1").
func slotOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

// missing returns the fault kinds the run injected zero times.
func (f figures) missing() []string {
	var out []string
	for _, c := range []struct {
		kind string
		n    int
	}{
		{"pause (SIGSTOP of a holder beyond its lease)", f.pauses},
		{"kill (SIGKILL)", f.kills},
		{"kill of a holder", f.holderKills},
		{"blackhole", f.net.Blackholes},
		{"delay", f.net.Delayed},
		{"drop-response (after the store committed)", f.net.Dropped},
		{"store restart", f.restarts},
		{"clock jump", f.clockJumps},
		{"critical section under a skewed clock", f.skewedSections},
		{"takeover", f.takeovers},
	} {
		if c.n == 0 {
			out = append(out, c.kind)
		}
	}
	return out
}

// sharedOverlaps counts the pairs of shared sections of two processes that
// overlapped while both were trusted (sections ordered by Begin).
func sharedOverlaps(sections []*Section) int {
	n := 0
	for i, a := range sections {
		for _, b := range sections[i+1:] {
			if b.Begin > a.TrustedEnd() {
				break
			}
			if a.Shared && b.Shared && a.Proc != b.Proc {
				n++
			}
		}
	}
	return n
}

func (f figures) String() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, "  "+format+"\n", args...) }
	fmt.Fprintf(&b, "chaos figures (%s, seed %d, %s leases):\n", f.elapsed.Round(time.Second), f.seed, f.sc.leaseDuration())
	p("latency:        %s", f.latencyText())
	p("operations:     %d critical sections; %d reads; writes %d ok, %d failed, %d unknown",
		f.sections, f.reads, f.writes[record.OK], f.writes[record.Failed], f.writes[record.Unknown])
	p("leases:         %d acquisitions, %d takeovers of a lapsed lease", f.acquisitions, f.takeovers)
	p("pauses:         %d (SIGSTOP of the holder for lease + %s..%s)", f.pauses, pauseMin, pauseMax)
	p("kills:          %d (%d of the holder)", f.kills, f.holderKills)
	p("blackhole:      %d (%d requests swallowed)", f.net.Blackholes, f.net.Swallowed)
	p("delay:          %d requests delayed (up to %s)", f.net.Delayed, f.sc.maxDelay())
	p("drop-response:  %d write answers dropped after the store answered (%d of them successes)", f.net.Dropped, f.net.DroppedOK)
	p("store restarts: %d (SIGKILL, same data directory and port)", f.restarts)
	if f.sharedSections > 0 {
		p("shared:         %d critical sections under shared leases; %d pairs of them overlapped", f.sharedSections, f.sharedOverlaps)
	}
	p("clocks:         %d clock jumps of %s; %d critical sections under skewed clocks", f.clockJumps, clockJump, f.skewedSections)
	p("takeover after a holder's kill: worst %s over %d (it lapses lease + 2 s after its last renewal, by the store's clock)", f.worstTakeover.Round(time.Millisecond), f.killTakeovers)
	p("orphaned lease at the end: free %s after its holder's kill (bound %s)", f.orphanFree.Round(time.Millisecond), f.sc.orphanBound())
	p("store's record: %d writes to epoch objects; %d trust deadlines judged against them", f.witnessed, f.claims)
	p("processes:      %d started; s3lock run exit codes %s; %d torn history lines", f.processes, codes(f.runCodes), f.torn)
	return b.String()
}

// latencyText names the run's latency profile and says how many requests
// it delayed.
func (f figures) latencyText() string {
	if f.sc.latency == nil {
		return "no profile (the store answers on loopback)"
	}
	return fmt.Sprintf("profile %s (%s): %d requests delayed", f.sc.latency.Name, f.sc.latency.Store, f.latent)
}

func codes(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d×%d", m[k], k)
	}
	return strings.Join(parts, " ")
}
