package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// writeProfiles writes section 5: the handoff, the takeover and slot
// acquisition under each latency profile, side by side with Terraform's
// native lock under the same profile.
func writeProfiles(d *doc, cfg config, res *results) {
	d.p("## 5. Under cloud latency: S3 Standard and S3 Express One Zone")
	d.p("On loopback the store answers in about a millisecond. Here the handoff, the waiter's " +
		"request rate, the takeover after a kill and slot acquisition run again under latency profiles: each " +
		"participant's tap holds every request, of both systems alike, for a delay drawn from the profile's " +
		"distribution for that kind of request before it passes it to the store (see Methods). The store's " +
		"behaviour stays versitygw's; only its latency is AWS's, as far as AWS's own statements pin it down.")
	writeProfileTable(d)
	writeSideBySide(d, cfg, res)
	writeGoal(d, res)
	writeProfileHandoffs(d, cfg, res)
	writeTakeovers(d, cfg, res)
	writeSlots(d, cfg, res)
	writeTapTimes(d, res)
}

func writeProfileTable(d *doc) {
	d.p("### The profiles")
	d.p("A request's delay is drawn from a log-normal distribution with its class's median and 99th percentile " +
		"(shape σ = ln(p99 ÷ median) ÷ 2.326), capped at the profile's ceiling; `loopback` adds nothing. The table " +
		"is `latency.Profiles` in `lab/internal/latency/profile.go`.")
	header := []string{"request class"}
	var shown []*latency.Profile
	for _, p := range latency.Profiles {
		if !p.Delayless() {
			shown = append(shown, p)
			header = append(header, "`"+p.Name+"` median", "`"+p.Name+"` p99")
		}
	}
	var rows [][]string
	for c := range latency.NumClasses {
		row := []string{c.String()}
		for _, p := range shown {
			row = append(row, millis(p.Classes[c].Median), millis(p.Classes[c].P99))
		}
		rows = append(rows, row)
	}
	ceiling := []string{"ceiling (no delay above it)"}
	for _, p := range shown {
		ceiling = append(ceiling, millis(p.Ceiling), "")
	}
	d.table(header, append(rows, ceiling))
	for _, p := range shown {
		d.p("`%s` stands for %s.", p.Name, p.Store)
	}
	d.p("Sources:")
	for _, s := range latency.Sources {
		d.WriteString("- " + s + "\n")
	}
	d.WriteString("\n")
	d.p("**What AWS states, and what is our choice.** AWS states S3 Standard's small-request medians as \"tens of " +
		"milliseconds\" [2] and its consistent small-object latencies as \"roughly 100–200 milliseconds\" [1], and S3 " +
		"Express One Zone's read and write first-byte latencies as \"single-digit millisecond\" [3]. Our choices, not " +
		"AWS's measurements: the log-normal shape ([4] is one engineer's observation); reading [1] as S3 Standard's 99th " +
		"percentile and [3] as S3 Express's; where within those ranges each median and p99 sits; writes slower than " +
		"reads and LISTs slower than both (AWS publishes no per-operation split, and nothing for LIST); the ceilings " +
		"(S3 Standard's is the 2 s after which [2] advises retrying a small GET or PUT). The profiles model a client " +
		"in the bucket's Region (S3 Express: in its Availability Zone): no Internet path, no TLS handshake, no " +
		"throttling (HTTP 503), no outage.")
	d.p("**`s3-express` is a latency profile only.** The store stays a general purpose bucket on versitygw; what else " +
		"sets a directory bucket apart is not modelled: listings in no set order (see [compatibility](compatibility.md) " +
		"for what s3lock does about it), its session requests (`CreateSession`), its ETags. Whether Terraform's S3 " +
		"backend locks on a directory bucket was not checked. The `s3-express` rows say what each lock's waiting and " +
		"polling cost at that latency.")
}

// sideRow is one row of the side-by-side summary: its label, and its cell
// for each profile.
type sideRow struct {
	label string
	cell  func(*profileResult) string
}

// writeSideBySide writes the summary: one column per profile.
func writeSideBySide(d *doc, cfg config, res *results) {
	d.p("### Side by side")
	header := []string{""}
	for _, pr := range res.profiles {
		header = append(header, "`"+pr.profile.Name+"`")
	}
	var cells [][]string
	for _, r := range sideBySideRows(cfg) {
		line := []string{r.label}
		for _, pr := range res.profiles {
			line = append(line, r.cell(pr))
		}
		cells = append(cells, line)
	}
	noSlots := []string{"Terraform: slots"}
	for range res.profiles {
		noSlots = append(noSlots, "no equivalent: a state lock admits one holder")
	}
	d.table(header, append(cells, noSlots))
	d.p("s3lock's handoffs are the series' and the hold-time runs' together (\"The goal\", below). Terraform's handoff " +
		"and both waiters' request rates depend on the hold (Terraform's retries back off; s3lock's waiter spends its " +
		"first attempt's requests once), so they are given per hold time, each the median of its runs. Requests per slot " +
		"TryAcquire are a mean, (min–max).")
}

// sideBySideRows are the summary's rows.
func sideBySideRows(cfg config) []sideRow {
	return []sideRow{
		{"s3lock: handoff after a release, p50 / p99", func(pr *profileResult) string {
			g := goalOf(pr)
			return fmt.Sprintf("%s / %s (%d handoffs)", seconds(g.p50), seconds(g.p99), g.n)
		}},
		{"Terraform: handoff after a release, per hold (" + holdList(cfg.holds) + ")", func(pr *profileResult) string {
			return perHold(cfg.holds, bySystem(pr.release, sysTerraform), func(hs []handoff) string { return seconds(medianGap(hs)) })
		}},
		{"Terraform ÷ s3lock handoff, per hold (Terraform's median ÷ s3lock's p50)", func(pr *profileResult) string {
			p50 := goalOf(pr).p50
			if p50 == 0 {
				return "–"
			}
			return perHold(cfg.holds, bySystem(pr.release, sysTerraform), func(hs []handoff) string {
				return fmt.Sprintf("%.0f×", medianGap(hs).Seconds()/p50.Seconds())
			})
		}},
		{"s3lock waiter, requests/s, per hold", func(pr *profileResult) string {
			return perHold(cfg.holds, bySystem(pr.release, sysS3lock), func(hs []handoff) string { return fmt.Sprintf("%.2f", medianRate(hs)) })
		}},
		{"Terraform waiter, requests/s, per hold", func(pr *profileResult) string {
			return perHold(cfg.holds, bySystem(pr.release, sysTerraform), func(hs []handoff) string { return fmt.Sprintf("%.2f", medianRate(hs)) })
		}},
		{fmt.Sprintf("s3lock: takeover after a kill, last renewal answered → next holder (%s lease)", seconds(cfg.crashLease)), func(pr *profileResult) string {
			return joinEach(bySystem(pr.crash, sysS3lock), func(h handoff) string { return seconds(h.sinceWrite + h.gap) })
		}},
		{"Terraform: takeover after a kill", func(pr *profileResult) string {
			return joinEach(bySystem(pr.crash, sysTerraform), func(h handoff) string {
				return fmt.Sprintf("never (the waiter gave up %s after)", seconds(h.gaveUpAfter))
			})
		}},
		{fmt.Sprintf("s3lock: `WithSlots(%d)` TryAcquire of a free slot, p50 / p99, requests", cfg.slots), func(pr *profileResult) string { return slotCell(pr.slots.free) }},
		{fmt.Sprintf("s3lock: `WithSlots(%d)` TryAcquire of a full lock, p50 / p99, requests", cfg.slots), func(pr *profileResult) string { return slotCell(pr.slots.full) }},
	}
}

func holdList(holds []time.Duration) string {
	var s []string
	for _, h := range holds {
		s = append(s, seconds(h))
	}
	return strings.Join(s, " / ")
}

// perHold formats f of the runs at each hold time, "a / b / c", or "not run".
func perHold(holds []time.Duration, hs []handoff, f func([]handoff) string) string {
	if len(hs) == 0 {
		return "not run"
	}
	var s []string
	for _, hold := range holds {
		if at := runsAt(hs, hs[0].system, hold); len(at) > 0 {
			s = append(s, f(at))
		} else {
			s = append(s, "–")
		}
	}
	return strings.Join(s, " / ")
}

// joinEach formats each handoff with f, or says none was run.
func joinEach(hs []handoff, f func(handoff) string) string {
	if len(hs) == 0 {
		return "not run"
	}
	var s []string
	for _, h := range hs {
		s = append(s, f(h))
	}
	return strings.Join(s, ", ")
}

// medianRate is the median of the waiters' requests per second.
func medianRate(hs []handoff) float64 {
	var rs []float64
	for _, h := range hs {
		rs = append(rs, h.rate())
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if n := len(rs); n%2 == 0 {
		return (rs[n/2-1] + rs[n/2]) / 2
	}
	return rs[len(rs)/2]
}

func slotCell(ts []slotTry) string {
	if len(ts) == 0 {
		return "not run"
	}
	return fmt.Sprintf("%s / %s, %s", seconds(percentile(tookOf(ts), 50)), seconds(percentile(tookOf(ts), 99)), slotRequests(ts))
}

func writeGoal(d *doc, res *results) {
	d.p("### The goal: handoff within one poll interval plus three round trips, p99 included")
	d.p("The bound is the poll interval (200 ms) plus three round trips: the poll's GET that reads the release, the " +
		"LIST and the PUT that take the lock, each the median time the taps measured for its class under the profile " +
		"(the profile's delay plus the store's own time). The handoffs are every s3lock handoff after a release under " +
		"the profile: the series and the hold-time runs. p99 is the nearest-rank percentile, the ⌈0.99 n⌉-th fastest " +
		"of the n handoffs: with 200 of them, the third slowest.")
	var rows [][]string
	for _, pr := range res.profiles {
		g := goalOf(pr)
		verdict := "**held**"
		switch {
		case g.n == 0:
			verdict = "not checked"
		case !g.held():
			verdict = fmt.Sprintf("**did not hold**: p99 over by %s", millis(g.p99-g.bound))
		}
		rows = append(rows, []string{"`" + pr.profile.Name + "`",
			fmt.Sprintf("%s + %s + %s", millis(g.roundTrips[latency.Read]), millis(g.roundTrips[latency.List]), millis(g.roundTrips[latency.Write])),
			seconds(g.bound), fmt.Sprint(g.n), seconds(g.p50), seconds(g.p99), verdict})
	}
	d.table([]string{"profile", "round trips: GET + LIST + PUT", "bound", "handoffs", "p50", "p99", "goal"}, rows)
	for _, pr := range res.profiles {
		d.p("%s", goalVerdict(pr))
	}
	d.p("How a handoff is spent: a waiting `Acquire` sends its conditional GETs one poll interval apart at most, " +
		"start to start (200 ms, each up to 10 %% early so that waiters do not poll in step), whatever the store's " +
		"latency; the first GET the store answers after the release reads it released, and the waiter then sends the " +
		"conditional PUT that takes the lock and, beside it, the LIST that checks it (the direct create, " +
		"s3lock/PROTOCOL.md §5). A release that lands just after a poll therefore waits up to 200 ms plus that GET's " +
		"own time before it is seen, and the slower of the PUT and the LIST comes on top; the p99 is made of those " +
		"worst cases (a round trip's p99, not its median, under the profiles with delays).")
}

func writeProfileHandoffs(d *doc, cfg config, res *results) {
	d.p("### Handoff after a release, per hold time")
	d.p("As section 1 (the same holder process, waiter, Terraform runs and measurement on the wire), under each " +
		"profile with delays; `loopback`'s runs are section 1's.")
	var rows [][]string
	for _, pr := range res.profiles {
		if pr.profile.Delayless() {
			continue
		}
		for _, hold := range cfg.holds {
			s, t := runsAt(pr.release, sysS3lock, hold), runsAt(pr.release, sysTerraform, hold)
			ratio := "–"
			if len(s) > 0 && len(t) > 0 {
				ratio = fmt.Sprintf("%.1f×", medianGap(t).Seconds()/medianGap(s).Seconds())
			}
			rows = append(rows, []string{"`" + pr.profile.Name + "`", seconds(hold), gaps(s), gaps(t), ratio, rates(s), rates(t)})
		}
	}
	d.table([]string{"profile", "hold", "s3lock handoff", "Terraform handoff", "Terraform ÷ s3lock (medians)",
		"s3lock waiter, requests/s", "Terraform waiter, requests/s"}, rows)
	for _, pr := range res.profiles {
		if s := seriesText(pr); s != "" {
			d.p("%s", s)
		}
	}
}

// seriesText summarizes pr's series.
func seriesText(pr *profileResult) string {
	if len(pr.series) == 0 {
		return ""
	}
	ds := gapsOf(pr.series)
	return fmt.Sprintf("`%s`, the series: %d handoffs after holds of %s to %s, p50 %s, p90 %s, p99 %s, slowest %s; "+
		"the waiter sent %.2f requests a second (median).", pr.profile.Name, len(ds), seconds(seriesHoldMin), seconds(seriesHoldMax),
		seconds(percentile(ds, 50)), seconds(percentile(ds, 90)), seconds(percentile(ds, 99)), seconds(slices.Max(ds)), medianRate(pr.series))
}

func writeTakeovers(d *doc, cfg config, res *results) {
	d.p("### Takeover after a kill")
	d.p("As section 2: the holder is SIGKILLed %s after it took the lock, with a %s s3lock lease (renewed every %s). "+
		"The takeover is the time from the holder's last renewal answered to the next holder's acquiring write "+
		"answered, at the taps: the lease, the 2 s of slack s3lock adds to every expiry it judges by the store's clock, "+
		"up to about 2 s for the one-second resolution of `Last-Modified` and `Date` and versitygw's lagging `Date`, "+
		"and the requests of the takeover.", seconds(cfg.crashHold), seconds(cfg.crashLease), seconds(cfg.crashLease/3))
	var rows [][]string
	for _, pr := range res.profiles {
		for _, h := range bySystem(pr.crash, sysS3lock) {
			rows = append(rows, []string{"`" + pr.profile.Name + "`", "s3lock", seconds(h.sinceWrite), seconds(h.gap),
				"**" + seconds(h.sinceWrite+h.gap) + "**", seconds(h.sinceWrite + h.gap - cfg.crashLease)})
		}
		for _, h := range bySystem(pr.crash, sysTerraform) {
			rows = append(rows, []string{"`" + pr.profile.Name + "`", "Terraform native lock", "–",
				fmt.Sprintf("never: the waiter gave up %s after the kill", seconds(h.gaveUpAfter)), "**never**", "–"})
		}
	}
	d.table([]string{"profile", "system", "last renewal answered → kill", "kill → next holder", "last renewal → next holder", "beyond the lease"}, rows)
}

func writeSlots(d *doc, cfg config, res *results) {
	d.p("### Slot acquisition (`s3lock.WithSlots(%d)`)", cfg.slots)
	d.p("One lock of %d slots, each holder its own client, all through one tap, one call at a time: %d TryAcquires "+
		"fill it (the first finds no slot held, the last finds %d held), then %d TryAcquires find it full (each returns "+
		"`ErrHeld`), then every slot is released; %s (`-slot-rounds`). A first acquisition and release, not counted, "+
		"made the lock a slot lock (its marker). Time is as the caller waited for `TryAcquire`; requests are those it "+
		"sent (a background history cleanup's `DeleteObjects` excluded). Terraform's native lock has no equivalent: a "+
		"state lock admits one holder.", cfg.slots, cfg.slots, cfg.slots-1, cfg.slots, times(cfg.slotRounds))
	var rows [][]string
	for _, pr := range res.profiles {
		for _, c := range []struct {
			what  string
			tries []slotTry
		}{{"a free slot", pr.slots.free}, {"a full lock", pr.slots.full}} {
			if len(c.tries) == 0 {
				continue
			}
			rows = append(rows, []string{"`" + pr.profile.Name + "`", c.what, fmt.Sprint(len(c.tries)),
				seconds(percentile(tookOf(c.tries), 50)), seconds(percentile(tookOf(c.tries), 99)), slotRequests(c.tries)})
		}
	}
	d.table([]string{"profile", "TryAcquire of", "calls", "p50", "p99", "requests per call, mean (min–max)"}, rows)
}

func slotRequests(ts []slotTry) string {
	lo, hi := ts[0].requests, ts[0].requests
	for _, t := range ts {
		lo, hi = min(lo, t.requests), max(hi, t.requests)
	}
	return fmt.Sprintf("%.1f (%d–%d)", meanRequests(ts), lo, hi)
}

func writeTapTimes(d *doc, res *results) {
	d.p("### Requests as the taps timed them")
	d.p("Every answered request under each profile, both systems, from its arrival at the tap to its answer passed " +
		"back: the profile's delay plus the store's own time (versitygw, its witness and the tap on loopback, on a " +
		"machine shared with the other participants). The check that the profile was applied, and the round trips of " +
		"the goal.")
	var rows [][]string
	for _, pr := range res.profiles {
		for c := range latency.NumClasses {
			ts := pr.times.of(c)
			if len(ts) == 0 {
				continue
			}
			want := "none"
			if dl := pr.profile.Classes[c]; dl.Median > 0 {
				want = millis(dl.Median) + " / " + millis(dl.P99)
			}
			rows = append(rows, []string{"`" + pr.profile.Name + "`", c.String(), thousands(len(ts)), want,
				millis(median(ts)) + " / " + millis(percentile(ts, 99))})
		}
	}
	d.table([]string{"profile", "request class", "requests", "profile's delay, median / p99", "measured, median / p99"}, rows)
}
