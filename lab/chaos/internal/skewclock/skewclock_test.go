package skewclock

import (
	"testing"
	"time"
)

func TestShiftWall_MovesTheWallClockOnly(t *testing.T) {
	if err := SelfCheck(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{3 * time.Hour, -5 * time.Hour, 0, 1500 * time.Millisecond} {
		now := time.Now()
		got := shiftWall(now, d)
		if wall := got.Round(0).Sub(now.Round(0)); wall != d {
			t.Errorf("shift %s: wall clock moved by %s", d, wall)
		}
		if mono := got.Sub(now); mono != 0 {
			t.Errorf("shift %s: monotonic clock moved by %s", d, mono)
		}
	}
}

func TestClock_JumpKeepsDurations(t *testing.T) {
	c, err := New(2 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Now()
	if off := before.Round(0).Sub(time.Now().Round(0)); off < 2*time.Hour-time.Second || off > 2*time.Hour+time.Second {
		t.Fatalf("offset clock is %s from the real clock, want about 2h", off)
	}
	c.Jump(-3 * time.Hour)
	after := c.Now()
	if mono := after.Sub(before); mono < 0 || mono > time.Second {
		t.Errorf("a jump of the wall clock changed the measured duration: %s", mono)
	}
	if wall := after.Round(0).Sub(before.Round(0)); wall > -3*time.Hour+time.Second || wall < -3*time.Hour-time.Second {
		t.Errorf("wall clock moved by %s across a jump of -3h", wall)
	}
}
