package main

import (
	"fmt"
	"math"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func writeCrash(d *doc, cfg config, res *results) {
	d.p("## 2. Handoff after a holder crash")
	d.p("The holder is SIGKILLed %s after it took the lock, so it stops renewing with no chance to clean up; a "+
		"waiter has been waiting since just after it took the lock.", seconds(cfg.crashHold))
	var rows [][]string
	for _, h := range bySystem(res.crash, sysS3lock) {
		rows = append(rows, []string{"s3lock, measured",
			fmt.Sprintf("the `bench holder` process, SIGKILLed %s after its last renewal was answered", seconds(h.sinceWrite)),
			fmt.Sprintf("%s, renewed every %s", seconds(cfg.crashLease), seconds(cfg.crashLease/3)),
			"**" + seconds(h.gap) + "**", fmt.Sprintf("%.2f", h.rate())})
		watching, arriving := dynamoStyle(cfg.crashLease, h.sinceWrite)
		rows = append(rows, []string{"DynamoDB-style lease, **computed, not measured**", "the same crash",
			fmt.Sprintf("%s, heartbeat every %s", seconds(cfg.crashLease), seconds(cfg.crashLease/3)),
			fmt.Sprintf("%s for a waiter that watched since before the crash; %s for one that first looks at the crash", seconds(watching), seconds(arriving)), "–"})
	}
	for _, h := range bySystem(res.crash, sysTerraform) {
		rows = append(rows, []string{"Terraform native lock, measured",
			"the first `terraform apply`, with its provisioner (its process group), SIGKILLed",
			"none: the `.tflock` object never expires",
			fmt.Sprintf("**never**: the waiter gave up %s after the crash (`-lock-timeout=%s`); the lock stays until `terraform force-unlock`",
				seconds(h.gaveUpAfter), cfg.crashHold+cfg.tfCrashWait),
			fmt.Sprintf("%.2f", h.rate())})
	}
	d.table([]string{"system", "the crash", "lease", "crash → next holder acquired", "waiter, requests/s"}, rows)
	lease := s3lock.DefaultLeaseDuration
	d.p("**s3lock** takes over once the store's own clock says the holder's last write is older than the lease "+
		"plus 2 s of slack (`Date − Last-Modified` of one response): crash → next holder ≈ lease + 2 s − (time "+
		"from the last renewal to the crash), plus up to about 2 s for the one-second resolution of those headers "+
		"and versitygw's lagging `Date`. A shorter lease makes this measurement fast; with the default %s lease "+
		"(renewed every %s) the same rule gives %s to about %s.",
		seconds(lease), seconds(lease/3), seconds(lease-lease/3+2*time.Second), seconds(lease+4*time.Second))
	d.p("**DynamoDB-style lease** (the rule of the AWS DynamoDB Lock Client and of dynamolock): the holder bumps "+
		"a record version at every heartbeat; a waiter cannot tell how old the record is, so it takes over only "+
		"after it has seen the same version for one full lease duration. Assumed: the same %s lease and %s "+
		"heartbeat as the s3lock measurement, a waiter polling at least as often as s3lock's (200 ms), and the "+
		"crash at the same moment after the last heartbeat as measured above; a DynamoDB table was not run. "+
		"It waits out the whole lease from the last change it saw: a little sooner than s3lock for a waiter "+
		"that was already watching (s3lock adds its 2 s of slack and the store clock's resolution, the price of "+
		"trusting no client clock), and a full lease for one that arrives after the crash, where s3lock waits "+
		"only what is left of it.", seconds(cfg.crashLease), seconds(cfg.crashLease/3))
	d.p("**Terraform's native lock** has no lease: the `.tflock` object is deleted only by the run that created it, " +
		"so after a crash nobody acquires the state until someone runs `terraform force-unlock`.")
}

// dynamoStyle computes when a DynamoDB-style lease of duration lease is
// taken over after a crash sinceWrite after the last heartbeat: by a waiter
// that watched before the crash (it saw the last heartbeat, then waits a
// lease, plus up to one 200 ms poll) and by one that arrives at the crash.
func dynamoStyle(lease, sinceWrite time.Duration) (watching, arriving time.Duration) {
	return lease - sinceWrite + pollInterval, lease
}

func writeScale(d *doc, cfg config, res *results) {
	d.p("## 3. Scale (s3lock)")
	d.p("### Waiters on one lock")
	d.p("n + 1 handles on one lock for %s each: the holder holds it %s and releases it, the other n wait in "+
		"`Acquire`; the handle that released joins the waiters once someone else holds the lock. A handoff is "+
		"timed from the holder sending its release to the next `Acquire` returning; requests are counted from the first acquisition on. Order `none` is waiting "+
		"without order (the SDK's default); `fifo` waits in the lock's line (`s3lock.WithOrder(s3lock.OrderFIFO)`, the CLI's and the "+
		"provider's default; PROTOCOL.md §13). Losing creates are epoch creates refused because another waiter "+
		"won the race: the herd that a release wakes.", seconds(cfg.waitersFor), seconds(cfg.waitersHold))
	var rows [][]string
	for _, w := range res.waiters {
		rows = append(rows, []string{string(w.order), fmt.Sprint(w.waiters), fmt.Sprint(len(w.handoffs)),
			seconds(percentile(w.handoffs, 50)), seconds(percentile(w.handoffs, 99)),
			fmt.Sprintf("%.0f", w.rate()), fmt.Sprintf("%.1f", w.perWaiter()),
			fmt.Sprintf("%.1f", w.requests.total()/float64(max(len(w.handoffs), 1))),
			fmt.Sprintf("%.1f", w.losersPerHandoff())})
	}
	d.table([]string{"order", "waiters", "handoffs", "handoff p50", "handoff p99", "requests/s, all handles",
		"requests/s per handle", "requests per handoff", "losing creates per handoff"}, rows)
	d.p("Without order, more waiters hand over sooner: each polls on its own jittered schedule, so one of them " +
		"looks soon after the release; the price is a request rate that grows by about five polls a second per " +
		"waiter, and every waiter that sees the release tries the next epoch at once, one of them wins; one that lost " +
		"lists before it tries from then on, so each loses at most once in an Acquire. In a line only " +
		"the head polls the holder's epoch object and only the head tries: no losing creates, and the waiters " +
		"behind it list the line once a second (the second in line five times a second), so the request rate " +
		"grows by about 1.5 a second per waiter. A handoff to the head is one poll interval at most, as for one " +
		"waiter without order.")
	d.p("p99 is the nearest-rank percentile of one run's handoffs: with fewer than 100 of them it is the slowest or close to it.")
	m := res.many
	d.p("### %s locks under one prefix", thousands(m.locks))
	d.table([]string{"locks", "set up", "setup requests", "`List` of the prefix", "`List` requests"}, [][]string{{
		thousands(m.locks),
		fmt.Sprintf("%s (`TryAcquire`, %d at a time, each lease detached)", seconds(m.setup), m.workers),
		fmt.Sprintf("%s (per new lock: LIST, PUT, and the LIST that confirms its first epoch is listed)", thousands(int(m.setupRequests.total()))),
		"**" + seconds(m.list) + "**",
		fmt.Sprintf("%s: %s, %s GETs (one per lock, 8 at a time)", thousands(int(m.listRequests.total())),
			plural(int(m.listRequests.writes), "LIST page"), thousands(int(m.listRequests.reads))),
	}})
	d.p("The locks are named `%s07/lock-00107`: %d groups under one prefix. versitygw's posix backend keeps a prefix "+
		"as a directory, and with all %s in one the setup ran several times slower on this machine (its LISTs, not s3lock); `List` reads the whole prefix either way.",
		manyPrefix, manyGroups, thousands(m.locks))
	c := res.contended
	d.p("### Acquisitions per second on one contended lock")
	d.table([]string{"handles", "for", "acquisitions", "acquisitions/s", "requests per acquisition", "busiest handle's share"}, [][]string{{
		fmt.Sprint(c.contenders), seconds(c.duration), fmt.Sprint(c.total()), fmt.Sprintf("**%.0f**", c.perSecond()),
		fmt.Sprintf("%.1f", c.requests.total()/float64(max(c.total(), 1))), fmt.Sprintf("%.0f %%", 100*busiestShare(c)),
	}})
	d.p("Each handle loops `Acquire` → `Release` with no pause, so the lock is never idle for long: the rate "+
		"depends on the store's round trips (on this machine, versitygw and the handles share the CPUs) and by how "+
		"soon a waiter notices a release. s3lock keeps no queue, whoever's create lands first wins; the busiest "+
		"handle's share (an even spread would be %.0f %%) shows how the acquisitions spread. Requests per acquisition "+
		"include every handle's polls and failed creates, and the history cleanup.", 100/float64(max(c.contenders, 1)))
}

// plural returns "1 LIST page" or "10 LIST pages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func busiestShare(c contendedResult) float64 {
	most := 0
	for _, a := range c.acquisitions {
		most = max(most, a)
	}
	return float64(most) / float64(max(c.total(), 1))
}

func writeCost(d *doc, cfg config, res *results) {
	p := cfg.prices
	d.p("## 4. Cost at AWS S3 Standard list prices")
	d.p("Inputs (flags `-price-put`, `-price-get`): **$%g per 1,000 PUT, COPY, POST and LIST requests**, **$%g per 1,000 "+
		"GET requests** (and every other request but DELETE, which is free). A request is charged whatever its "+
		"status (a 304 or a 412 too); `DeleteObjects` is a POST.", p.write, p.read)
	d.p("**cost = (writes × $%g + reads × $%g) ÷ 1,000**, with writes and reads the requests per unit that this run "+
		"measured (the last column says how).", p.write, p.read)
	var rows [][]string
	for _, r := range costRows(res) {
		c := p.cost(r.requests)
		rows = append(rows, []string{r.what, count(r.requests.writes), count(r.requests.reads),
			count(r.requests.free), usd(c), usd(c * 1000), r.formula})
	}
	d.table([]string{"unit", "writes", "reads", "free (DELETE)", "USD per unit", "USD per 1,000 units", "requests per unit"}, rows)
}

// count formats a request count per unit: whole and with commas from 100
// up, else to two decimals.
func count(v float64) string {
	if v >= 100 {
		return thousands(int(math.Round(v)))
	}
	return fmt.Sprintf("%.2f", v)
}

// usd formats a dollar amount to two significant digits.
func usd(v float64) string {
	if v <= 0 {
		return "$0"
	}
	digits := max(2, 1-int(math.Floor(math.Log10(v))))
	return fmt.Sprintf("$%.*f", digits, v)
}

func writeMethods(d *doc, cfg config, res *results) {
	d.p("## Methods")
	for _, m := range []string{
		"**One store, one run.** Every measurement runs against one versitygw process started for the run " +
			"(buckets `" + lockBucket + "` and `" + stateBucket + "`), profile by profile in the order " + profileList(res) +
			"; under each, Terraform, the s3lock handoffs, the series, slots, and after `loopback`'s, scale. " +
			"Nothing else runs on the run's behalf meanwhile. Every client reaches the store through the " +
			"store's witness (`internal/witness`, one more reverse proxy on loopback, for both systems alike), " +
			"whose record of every write to s3lock's epoch objects is checked at the end by the store's clock " +
			"(PROTOCOL.md §6): a run that breaks the protocol's rules writes no report.",
		"**Counted on the wire.** In the handoff measurements each participant (the holder and the waiter of each " +
			"system) talks to the store through its own recording reverse proxy on loopback (`bench/tap.go`), which " +
			"notes every request's operation, key, status, arrival and answer. The scale measurements count at an " +
			"in-process recording HTTP client under the SDK (every attempt, the SDK's retries included).",
		"**Handoff**, for both systems the same: from the holder's release being answered to the waiter's " +
			"acquiring write being answered, both at the proxies (same clock). s3lock: the PUT that marks the " +
			"epoch released → the `If-None-Match: *` PUT creating the next epoch. Terraform: the DELETE of " +
			"`" + tfStateKey("PROFILE") + ".tflock` → the waiter's `If-None-Match: *` PUT of it answered 200. " +
			"**Lock held** is from the holder's acquiring write to its release (or the kill): Terraform's includes " +
			"its plan, apply and state upload around the sleep.",
		"**Waiter requests per second:** the waiter's requests from its first attempt (s3lock: its first request; " +
			"Terraform: its first PUT of the `.tflock`) to its acquiring write, that write excluded, divided by that time.",
		"**s3lock:** the holder is a separate process, `bench holder` (this program): `TryAcquire` with a 60 s lease " +
			"(renewed every 20 s in the background), hold until its standard input closes, `Release`. The crash is a " +
			"SIGKILL of that process. The waiter is a waiting `Acquire` in the bench process, started at a random " +
			"moment within 200 ms after the holder took the lock (its polls are then not in step with the hold). Both use the CLI's S3 client (`internal/awsclient`) and the SDK's defaults " +
			"(200 ms poll, start to start, each up to 10 % early).",
		"**Terraform:** " + `two working directories of one state per profile (bucket ` + "`" + stateBucket + "`" + `, key ` + "`" + tfStateKey("PROFILE") + "`" +
			`), S3 backend with ` + "`use_lockfile = true`" + ` and no DynamoDB, ` + "`endpoints = { s3 = … }`, `use_path_style`, " +
			"`skip_credentials_validation`, `skip_region_validation`, `skip_requesting_account_id`, `skip_metadata_api_check`, " +
			"`skip_s3_checksum`" + ` and versitygw's key, each directory through its own proxy. The first ` + "`terraform apply -lock-timeout=5m`" +
			` replaces a ` + "`terraform_data`" + ` whose ` + "`local-exec`" + ` provisioner runs ` + "`sleep`" + ` for the hold time while the state is locked (built-in ` +
			`only: nothing is downloaded). The second, with ` + "`-lock-timeout=5m`" + ` and the same variables, starts at a random moment within 200 ms after the first's ` +
			"`.tflock`" + ` PUT is answered, and finds nothing to change once it holds the lock. Crash: the first run sleeps an hour and its ` +
			fmt.Sprintf("process group (terraform and the sleep) is SIGKILLed %s after the second started, whose `-lock-timeout` is %s.",
				seconds(cfg.crashHold), cfg.crashHold+cfg.tfCrashWait),
		"**Computed, not measured:** the DynamoDB-style row of section 2 (its assumptions are stated there) and the " +
			"hourly rows of section 4 (measured requests per renewal, poll or attempt, times the rate at which they occur).",
		"**Latency profiles:** each tap draws a delay for every request from the profile's log-normal distribution for " +
			"the request's class (read: GET, HEAD; list: ListObjectsV2; write: everything else), capped at the ceiling, " +
			"and holds the request for it before passing it to the store; the store acts on it at the end of its delay and " +
			"its answer comes straight back, so a write takes effect and a read sees the store as it is at the end of its " +
			"round trip. A request whose client gives up during the delay is not passed on. Each tap draws from its own " +
			fmt.Sprintf("stream of one seeded generator (`-seed %d`): the same seed draws the same delays in the same order per tap, ", cfg.seed) +
			"while which request meets which delay still follows the run's own timing. The profiles and their sources are " +
			"in section 5; the scale measurements (section 3) ran on `loopback` only.",
		fmt.Sprintf("**The series:** under each profile, %d s3lock handoffs after a release, by %d pairs of handles at once, "+
			"each pair on a lock of its own and each handle through its own tap: one holds for a time drawn from %s to %s, "+
			"the other starts a waiting `Acquire` at a drawn moment within 200 ms after the holder took the lock, the holder "+
			"releases, the waiter acquires and holds in turn. Each handoff is read off the wire as in section 1.",
			cfg.series, cfg.seriesPairs, seconds(seriesHoldMin), seconds(seriesHoldMax)),
		fmt.Sprintf("**Repetitions:** on `loopback` each hold time ran %s per system (`-reps`); under the profiles with delays "+
			"%s (`-profile-reps`); the crash once per profile and system; the series %d handoffs per profile (`-series`); "+
			"the slot measurement %s per profile (`-slot-rounds`); the scale measurements once. "+
			"`go -C lab run ./bench -h` lists every flag; `make bench BENCHARGS='-reps 3'` passes them through.",
			times(cfg.reps), times(cfg.profileReps), cfg.series, times(cfg.slotRounds)),
	} {
		d.WriteString("- " + m + "\n")
	}
}
