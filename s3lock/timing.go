package s3lock

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The protocol's timing constants. PROTOCOL.md derives each one.
const (
	// serverSlack is added to a lease's validity before an observer judges
	// it lapsed from the store's clock. Last-Modified and Date have
	// one-second resolution, so the age computed from them can exceed the
	// true age by up to a second; two seconds also absorb clock-rate drift.
	serverSlack = 2 * time.Second

	// dateStaleness is how far, at most, a store's Date header lags real
	// time: one second of resolution, plus one second for servers that
	// refresh the header once a second (versitygw's lags 1.3 to 1.8 s).
	// Resume counts a taken-over lease as this much older than it looks.
	dateStaleness = 2 * time.Second

	// maxSafetyMargin caps the margin by which a holder stops trusting its
	// lease before an observer could judge it lapsed.
	maxSafetyMargin = 5 * time.Second

	// maxDriftDivisor expresses the clock-rate drift the protocol tolerates
	// between a holder and the store: 1/10,000 = 100 ppm, ten times what
	// commodity clocks are specified for.
	maxDriftDivisor = 10_000

	// deadlineRecheck bounds how long a lease's deadline timer sleeps
	// before it looks at the clocks again. Go's timers do not count time
	// the host spends suspended, so a timer set for the whole remaining
	// window could wake long after the deadline by the wall clock; waking
	// every second lets the wall-versus-monotonic check see a suspend soon
	// after the host wakes.
	deadlineRecheck = time.Second

	// ticketValidity is how long a waiter's ticket in a lock's line stays
	// live without a heartbeat (PROTOCOL.md §13): short, because a crashed
	// waiter holds up the line for this long plus serverSlack; a waiter
	// that pauses longer loses its place and joins again at the back.
	ticketValidity = 6 * time.Second
	// ticketRenewEvery is how often a waiter rewrites its ticket: a third
	// of its validity, so two heartbeats may fail before it loses its place.
	ticketRenewEvery = ticketValidity / 3
	// linePollInterval is how often a waiter further back than second in
	// line lists the line to learn that its turn came (the head and the
	// second in line poll at the client's poll interval), and how often a
	// OrderNewest head lists it to learn of a newer OrderNewest waiter.
	linePollInterval = time.Second
)

// Retries and backoff: how often each loop of the package tries again, and
// how long it sleeps in between. None of these affect safety; they trade
// request rate against how soon a transient failure is ridden out.
const (
	// createRetryBase and createRetryMax pace the retries of an epoch
	// create whose outcome was unknown and read back as absent: short,
	// because a competitor may be creating the same epoch.
	createRetryBase = 20 * time.Millisecond
	createRetryMax  = 500 * time.Millisecond

	// writeRetryBase, writeRetryMin and writeRetryMax pace the retries of a
	// renewal or release write; the cap is an eighth of the renew interval
	// (within [writeRetryMin, writeRetryMax]) so that several retries fit
	// before the lease stops being trusted.
	writeRetryBase    = 20 * time.Millisecond
	writeRetryMin     = 50 * time.Millisecond
	writeRetryMax     = time.Second
	writeRetryDivisor = 8

	// renewRetryBase and renewRetryMin pace the background renewal after a
	// failed renewal: at most a quarter of the renew interval apart (never
	// under renewRetryMin), so a lease gets four tries per interval.
	renewRetryBase    = 50 * time.Millisecond
	renewRetryMin     = 100 * time.Millisecond
	renewRetryDivisor = 4

	// acquireRetryBase and acquireRetryMax pace a waiting Acquire through
	// transient store failures: up to two seconds apart, so an outage costs
	// a waiter about one request a second.
	acquireRetryBase = 50 * time.Millisecond
	acquireRetryMax  = 2 * time.Second

	// minAttemptWait is the least time WithWait(d) gives the attempts made
	// before the lock is first found held (d bounds them when it is
	// longer): an attempt is a few requests, ridden through a retry or two,
	// which fit on a store across an ocean; a shorter wait
	// (WithWait(time.Millisecond)) would turn a free lock into a timeout.
	// A store that answers more slowly than this, or whose answers keep an
	// attempt going, ends Acquire here.
	minAttemptWait = 10 * time.Second

	// changedRetry is the first pause of a waiting Acquire after the lock
	// changed under its attempt (someone else just acted, so the state
	// settles within a round trip); the pauses then grow as a backoff up to
	// acquireRetryMax, so a state that never settles costs about a request
	// a second, not a hundred.
	changedRetry = 10 * time.Millisecond

	// pollJitter spreads the line's and Watch's pauses by ±20% (jitter), so
	// that many waiters do not poll in step.
	pollJitter = 0.2

	// pollEarly spreads a waiter's polls of a held lock the same way, but
	// downward only (earlier): they start at most one poll interval apart,
	// start to start, and at least 90% of it, so that the head of a line
	// (its heartbeat included) stays under six requests a second at the
	// default 200 ms.
	pollEarly = 0.1

	// waitNotifyEvery is how often, at most, the wait observer hears about
	// a holder that did not change.
	waitNotifyEvery = time.Second

	// maxQuickRetries bounds how often TryAcquire starts over when the
	// lock changed under its attempt.
	maxQuickRetries = 3

	// maxAbandonAttempts bounds how often an acquirer tries to release an
	// epoch it created but cannot use.
	maxAbandonAttempts = 3
	// maxCreateAttempts and maxJoinAttempts bound how often an acquirer
	// sends an epoch's create, and a waiter its ticket's, again when the
	// outcome was unknown and the object was not there.
	maxCreateAttempts = 5
	maxJoinAttempts   = 5

	// maxForceAttempts bounds how often ForceRelease reads again when the
	// holder renews under it.
	maxForceAttempts = 5

	// maxListStalls bounds the pages in a row of one listing that say more
	// keys follow and list none it has not listed before (PROTOCOL.md §8):
	// S3 promises at most MaxKeys entries a page, not at least one, and
	// answers truncated pages that are empty (reported over many delete
	// markers of a versioned bucket, which every deleted epoch leaves), each
	// with a new continuation token the listing goes on from. A store that
	// keeps doing so (it says every page is truncated) fails the listing
	// after a thousand such pages — a million entries skipped on AWS; a few
	// seconds on a store nearby, a minute at worst far away — instead of
	// keeping it going forever. Repeated tokens fail at once.
	maxListStalls = 1000

	// listConcurrency bounds how many epoch objects List reads at once.
	listConcurrency = 8

	// probeLease is the lease of storecheck.Run's probe lock: long enough for
	// its read and release on a slow store.
	probeLease = 10 * MinLeaseDuration

	// minRenewInterval, minRequestTimeout, minPollInterval and
	// maxPollInterval bound the options of the same names: below them a
	// client would only flood the store.
	minRenewInterval  = 100 * time.Millisecond
	minRequestTimeout = 100 * time.Millisecond
	minPollInterval   = 10 * time.Millisecond
	maxPollInterval   = time.Minute
)

// Variables only so that tests can shorten them (export_test.go); the
// protocol never changes them.
var (
	// attemptWindow bounds an acquisition attempt that is trusted without a
	// second look: if the create's answer arrives more than this long after
	// the attempt's LIST went out, the acquirer lists again to make sure no
	// newer epoch exists (the epoch it created may have been an old,
	// deleted one).
	attemptWindow = 2 * time.Second

	// cleanupAge is how old, by the store's clock, an epoch's successor must
	// be before the epoch may be deleted: longer than any attempt trusted
	// without a second look, plus the store's clock resolution (serverSlack)
	// and a second of margin.
	cleanupAge = attemptWindow + serverSlack + time.Second
)

// SafetyMargin returns how much earlier than its duration a holder stops
// trusting a lease of that duration: a tenth of it up to 5s, plus 100 ppm of
// it for the drift between the holder's clock rate and the store's
// (PROTOCOL.md §6). A lease's State().ExpiresAt is its last confirmed
// renewal plus its duration minus this margin.
func SafetyMargin(validity time.Duration) time.Duration { return safetyMargin(validity) }

func safetyMargin(validity time.Duration) time.Duration {
	return min(validity/10, maxSafetyMargin) + validity/maxDriftDivisor
}

// trust is the window in which a writer trusts what its last confirmed
// write holds for it — a lease, or a place in the line — by this client's
// clock: from when that write was sent, for its validity less the safety
// margin (PROTOCOL.md §6). A lease and a waiter's ticket each keep one.
type trust struct {
	from, until time.Time
	margin      time.Duration
	// capped is set when the window ends at the lease's cap (WithMaxHold,
	// capTrust): its end is the cap's, not a lapse.
	capped bool
}

// trustFor is the trust a write of validity that was sent at sent gives.
func trustFor(sent time.Time, validity time.Duration) trust {
	m := safetyMargin(validity)
	return trust{from: sent, until: sent.Add(validity - m), margin: m}
}

// validityBefore returns the longest validity, in whole milliseconds (a
// payload's resolution) and at most lease, whose trust ends at most r after
// its write is sent: v - safetyMargin(v) <= r, as trustFor counts it. A
// renewal near a lease's cap writes it (WithMaxHold); 0 when r leaves none.
func validityBefore(r, lease time.Duration) time.Duration {
	span := func(v time.Duration) time.Duration { return v - safetyMargin(v) }
	switch {
	case span(lease) <= r:
		return lease
	case r <= 0:
		return 0
	}
	// span grows with v (by at least 0.8999 of it), so bisect on
	// milliseconds: span(lo) <= r < span(hi).
	lo, hi := time.Duration(0), lease/time.Millisecond
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if span(mid*time.Millisecond) <= r {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo * time.Millisecond
}

// over reports whether the window has ended at now.
func (t trust) over(now time.Time) bool { return !now.Before(t.until) }

// untrusted returns why what t covers may not be trusted at now (client
// clock), or "" while it may be: the window ended, or the wall clock ran
// ahead of the monotonic clock by more than the safety margin, which is what
// a suspended host looks like (the monotonic clock stops during suspend; the
// store's does not).
func (t trust) untrusted(now time.Time) string {
	if t.over(now) {
		return "it expired"
	}
	wall, mono := now.Round(0).Sub(t.from.Round(0)), now.Sub(t.from)
	if wall-mono > t.margin {
		return fmt.Sprintf("the host's wall clock advanced %s more than its monotonic clock (suspended?)", wall-mono)
	}
	return ""
}

// remaining returns how long, at most, the lease read in o may still be
// judged valid by anyone: validity + slack - age, where age is measured by
// the store's clock. ok is false when the store sent no Date or
// Last-Modified, so age is unknown.
func remaining(o *observed) (time.Duration, bool) {
	age, ok := o.serverAge()
	if !ok {
		return 0, false
	}
	return o.body.validity() + serverSlack - age, true
}

// free reports whether the lease read in o no longer protects anyone:
// released, or lapsed by the store's clock.
func free(o *observed) bool {
	switch {
	case o.body.Released:
		return true
	case o.body.marker():
		return false // a slot lock's marker never lapses (§14)
	case o.body.sharedEpoch():
		return false // held by its shares, never lapses (§17)
	}
	left, ok := remaining(o)
	return ok && left <= 0
}

// jitter returns d scaled by a random factor in [1-pollJitter, 1+pollJitter],
// so that many waiters do not poll in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - pollJitter + 2*pollJitter*rand.Float64()))
}

// earlier returns d scaled down by a random factor in [1-pollEarly, 1]:
// a waiter's polls start at most d apart (a release is seen within one
// interval and a GET), and do not poll in step with other waiters'.
func earlier(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - pollEarly*rand.Float64()))
}

// backoff is a capped exponential backoff with full jitter.
type backoff struct {
	base, max time.Duration
	n         int
}

// newBackoff returns a backoff whose first wait is at most base and whose
// waits never exceed limit.
func newBackoff(base, limit time.Duration) *backoff { return &backoff{base: base, max: limit} }

func (b *backoff) next() time.Duration {
	d := b.base << min(b.n, 16)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.n++
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

func (b *backoff) reset() { b.n = 0 }
