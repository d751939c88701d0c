package s3lock

import (
	"testing"
	"time"
)

// The timing functions, against the formulas of PROTOCOL.md §6 and §7, at
// the lengths users run: the default lease (60 s) and beyond. The SDK's
// behavioural tests use short leases (seconds), at which the store's clock
// slack hides arithmetic mistakes; these do not.

// leaseRead is a lease of validity v read from the store age after its last
// write, by the store's clock (Date - Last-Modified).
func leaseRead(v, age time.Duration) *observed {
	lm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &observed{body: &payload{owner: owner{ValidityMs: v.Milliseconds()}, Format: 1}, lastModified: lm, date: lm.Add(age)}
}

// TestSafetyMargin_IsATenthUpToFiveSecondsPlusTheDrift: margin = min(V/10,
// 5 s) + V/10,000 (§6).
func TestSafetyMargin_IsATenthUpToFiveSecondsPlusTheDrift(t *testing.T) {
	for _, tc := range []struct{ v, want time.Duration }{
		{2 * time.Second, 200*time.Millisecond + 200*time.Microsecond},
		{3 * time.Second, 300*time.Millisecond + 300*time.Microsecond},
		{12 * time.Second, 1200*time.Millisecond + 1200*time.Microsecond},
		{DefaultLeaseDuration, 5*time.Second + 6*time.Millisecond},
		{time.Hour, 5*time.Second + 360*time.Millisecond},
		{30 * 24 * time.Hour, 5*time.Second + 259200*time.Millisecond},
	} {
		if got := safetyMargin(tc.v); got != tc.want {
			t.Errorf("safetyMargin(%s) = %s; want %s", tc.v, got, tc.want)
		}
	}
}

// TestLapse_JudgedAtValidityPlusSlackByTheStoresClock: a lease read age
// after its last write may still be valid for V + serverSlack - age, and is
// free once that is no longer positive; never earlier (§6).
func TestLapse_JudgedAtValidityPlusSlackByTheStoresClock(t *testing.T) {
	for _, v := range []time.Duration{MinLeaseDuration, 3 * time.Second, 12 * time.Second, DefaultLeaseDuration, time.Hour} {
		for _, tc := range []struct {
			age  time.Duration
			free bool
		}{
			{0, false},
			{v / 2, false},
			{v, false},
			{v + serverSlack - time.Second, false},
			{v + serverSlack - time.Millisecond, false},
			{v + serverSlack, true},
			{v + serverSlack + time.Hour, true},
		} {
			o := leaseRead(v, tc.age)
			left, ok := remaining(o)
			if want := v + serverSlack - tc.age; !ok || left != want {
				t.Errorf("lease %s read %s after its last write: remaining = %s, %v; want %s", v, tc.age, left, ok, want)
			}
			if got := free(o); got != tc.free {
				t.Errorf("lease %s read %s after its last write: free = %v; want %v", v, tc.age, got, tc.free)
			}
		}
	}
}

// TestLapse_NeverJudgedWithoutTheStoresClock: a store that sends no Date
// gives no age, and free() never judges such a lease lapsed by itself.
func TestLapse_NeverJudgedWithoutTheStoresClock(t *testing.T) {
	o := leaseRead(DefaultLeaseDuration, time.Hour)
	o.date = time.Time{}
	if _, ok := remaining(o); ok {
		t.Error("remaining without a Date header: ok; want unknown")
	}
	if free(o) {
		t.Error("free without a Date header: true; want false")
	}
}

// TestLapse_ReleasedIsFreeAndAMarkerNeverLapses (§14).
func TestLapse_ReleasedIsFreeAndAMarkerNeverLapses(t *testing.T) {
	o := leaseRead(DefaultLeaseDuration, 0)
	o.body.Released = true
	if !free(o) {
		t.Error("a released lease read at once is not free")
	}
	m := leaseRead(0, 365*24*time.Hour)
	m.body.Format, m.body.Slots = 2, 4
	if free(m) {
		t.Error("a slot lock's marker a year old is free; a marker never lapses")
	}
}

// TestLapse_TheHolderStopsTrustingFirst is §6's argument in numbers: the
// holder trusts until t_s + (V - margin), measured at a clock rate up to
// 100 ppm fast; an observer judges the lease lapsed at the earliest when the
// apparent age is V + serverSlack, i.e. a true age of more than V + 1 s
// (Last-Modified truncated to the second, Date never ahead of real time).
// The holder's deadline comes first at every length.
func TestLapse_TheHolderStopsTrustingFirst(t *testing.T) {
	for _, v := range []time.Duration{MinLeaseDuration, 3 * time.Second, 12 * time.Second, DefaultLeaseDuration,
		time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour} {
		m := safetyMargin(v)
		trusted := v - m
		trustedReal := trusted + trusted/maxDriftDivisor // a holder clock 100 ppm slow
		judged := v + serverSlack - time.Second          // the earliest true age at a judgment
		if trustedReal >= judged {
			t.Errorf("lease %s: the holder trusts it for up to %s of real time, but an observer may judge it lapsed after %s", v, trustedReal, judged)
		}
	}
	// The default lease, spelled out: a holder that stops renewing trusts
	// its 60 s lease for 54.994 s; nobody takes it over before 61 s.
	if got := DefaultLeaseDuration - safetyMargin(DefaultLeaseDuration); got != 54994*time.Millisecond {
		t.Errorf("the default lease is trusted for %s after its last write was sent; want 54.994s", got)
	}
}

// TestResume_TrustsNoLongerThanTheOriginalHolder: a handle that takes a
// lease over trusts it from before its read was sent, less the age the store
// reports and dateStaleness, for V - margin (§5 Resume): never later than
// the original holder, whose write was applied at least age before the
// read's answer.
func TestResume_TrustsNoLongerThanTheOriginalHolder(t *testing.T) {
	const age = 20 * time.Second
	o := leaseRead(DefaultLeaseDuration, age)
	o.sent = time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	o.received = o.sent.Add(50 * time.Millisecond)
	tr, ok := trustWindow(o)
	from, until := tr.from, tr.until
	if !ok {
		t.Fatal("trustWindow: no window with a Date header")
	}
	if want := o.sent.Add(-age - dateStaleness); !from.Equal(want) {
		t.Errorf("trusted from %s; want %s (the read's send, less the age and %s)", from, want, dateStaleness)
	}
	if want := from.Add(DefaultLeaseDuration - safetyMargin(DefaultLeaseDuration)); !until.Equal(want) {
		t.Errorf("trusted until %s; want %s", until, want)
	}
}

// TestCleanupAge_OutlastsAnyUncheckedAttempt: an epoch is deleted only when
// its successor is attemptWindow + serverSlack + 1 s old by the store's
// clock (§7): 5 s.
func TestCleanupAge_OutlastsAnyUncheckedAttempt(t *testing.T) {
	if cleanupAge != attemptWindow+serverSlack+time.Second || cleanupAge != 5*time.Second {
		t.Errorf("cleanupAge = %s with attemptWindow %s; want attemptWindow + serverSlack + 1s = 5s", cleanupAge, attemptWindow)
	}
}

// TestValidityBefore_TrustEndsByTheCap: near a lease's cap (WithMaxHold), a
// renewal writes the longest validity, to the millisecond, whose trust
// (validity - margin, as trustFor counts it) ends by the time left; the
// lease's own validity when that fits, none when nothing does.
func TestValidityBefore_TrustEndsByTheCap(t *testing.T) {
	span := func(v time.Duration) time.Duration { return trustFor(time.Time{}, v).until.Sub(time.Time{}) }
	for _, lease := range []time.Duration{MinLeaseDuration, 12 * time.Second, DefaultLeaseDuration, time.Hour, MaxLeaseDuration} {
		for _, left := range []time.Duration{time.Millisecond, 999 * time.Microsecond, 1500 * time.Millisecond,
			lease / 3, lease / 2, span(lease) - time.Nanosecond, span(lease), lease, 2 * lease} {
			v := validityBefore(left, lease)
			switch {
			case v > lease || v%time.Millisecond != 0:
				t.Errorf("lease %s, %s left: validity %s; want whole milliseconds, at most the lease", lease, left, v)
			case span(v) > left:
				t.Errorf("lease %s, %s left: validity %s is trusted for %s, past the cap", lease, left, v, span(v))
			case v < lease && span(v+time.Millisecond) <= left:
				t.Errorf("lease %s, %s left: validity %s is not the longest that fits (%s does)", lease, left, v, v+time.Millisecond)
			}
		}
		if v := validityBefore(span(lease), lease); v != lease {
			t.Errorf("lease %s with its whole trust left: validity %s; want the lease", lease, v)
		}
		for _, left := range []time.Duration{0, -time.Second} {
			if v := validityBefore(left, lease); v != 0 {
				t.Errorf("lease %s, %s left: validity %s; want none", lease, left, v)
			}
		}
	}
}
