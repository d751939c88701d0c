package s3lock

import (
	"strings"
	"testing"
	"time"
)

// A cap read from a payload (a wall-clock time: JSON carries no monotonic
// reading) becomes a time on this client's clock before a trust window is
// cut at it: a window cut at a wall-only time would be judged on the wall
// clock, which a clock step moves (PROTOCOL.md A5), and a clock stepped back
// would let a resumed capped lease be trusted past its last write's window.
func TestCapOnThisClock_IsJudgedOnTheMonotonicClock(t *testing.T) {
	wall := time.Now().Add(time.Minute).Round(0) // as decoded from JSON
	got := capOnThisClock(systemClock{}, wall)
	if !strings.Contains(got.String(), "m=") {
		t.Fatalf("capOnThisClock(%v) = %v; want a time with a monotonic reading", wall, got)
	}
	if !got.Round(0).Equal(wall) {
		t.Errorf("capOnThisClock moved the cap: %v; want %v", got.Round(0), wall)
	}
	tr := capTrust(trust{until: time.Now().Add(time.Hour)}, got, &payload{})
	if !strings.Contains(tr.until.String(), "m=") || !tr.capped {
		t.Errorf("a window cut at the cap is %+v; want it capped, on the monotonic clock", tr)
	}
	if z := capOnThisClock(systemClock{}, time.Time{}); !z.IsZero() {
		t.Errorf("no cap became %v; want zero", z)
	}
}
