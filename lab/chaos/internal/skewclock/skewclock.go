// Package skewclock gives the chaos workers clocks that are wrong the way a
// host's clock is wrong: the wall-clock reading is off (by a fixed offset, or
// by one that jumps, as after an NTP step or a manual date change), while
// the monotonic clock keeps measuring durations at the real rate (PROTOCOL.md
// §1, A5).
//
// libfaketime cannot do this for Go programs: the Go runtime reads the clock
// through the vDSO (or a raw system call), never through the C library that
// libfaketime interposes, so a Go process under faketime sees the real time
// (see chaos/README.md). The workers take one of these clocks through
// s3lock.WithClock instead.
package skewclock

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// Clock is the real clock with its wall-clock reading shifted by an offset
// that Jump can change while it is in use. It satisfies s3lock.Clock.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// New returns a clock whose wall-clock reading is offset from the real one.
// It fails if this Go version lays out time.Time differently from what
// shiftWall expects.
func New(offset time.Duration) (*Clock, error) {
	if err := SelfCheck(); err != nil {
		return nil, err
	}
	return &Clock{offset: offset}, nil
}

// Now returns the real time with the wall-clock reading shifted by the
// current offset and the monotonic reading untouched.
func (c *Clock) Now() time.Time { return shiftWall(time.Now(), c.Offset()) }

// After sends c.Now() on the returned channel after d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	time.AfterFunc(d, func() { ch <- c.Now() })
	return ch
}

// Offset returns how far the wall-clock reading is from the real one.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Jump steps the wall-clock reading by d (a negative d steps it back), as a
// host's clock steps: the monotonic clock does not move.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// timeLayout mirrors the fields of time.Time (src/time/time.go): with
// hasMonotonic set, wall holds 33 bits of seconds since 1885-01-01 UTC and
// 30 bits of nanoseconds, and ext the monotonic reading.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const (
	hasMonotonic = 1 << 63
	nsecShift    = 30
	wallSecBits  = 33
)

// wallEpoch is the origin of the seconds in time.Time's wall field.
var wallEpoch = time.Date(1885, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()

// shiftWall returns t with its wall-clock reading moved by d and its
// monotonic reading kept. The time package offers no such operation
// (Time.Add moves both readings, Round(0) drops the monotonic one), so it
// rewrites the fields; SelfCheck verifies the layout. A t without a
// monotonic reading, or a result outside the years 1885-2157 that the
// field can hold, is shifted with Add.
func shiftWall(t time.Time, d time.Duration) time.Time {
	p := (*timeLayout)(unsafe.Pointer(&t))
	if p.wall&hasMonotonic == 0 {
		return t.Add(d)
	}
	w := t.Round(0).Add(d)
	sec := w.Unix() - wallEpoch
	if sec < 0 || sec >= 1<<wallSecBits {
		return t.Add(d)
	}
	p.wall = hasMonotonic | uint64(sec)<<nsecShift | uint64(w.Nanosecond())
	return t
}

// SelfCheck reports whether shiftWall works with this Go version's
// time.Time: the shifted time must read d later on the wall clock and the
// same on the monotonic clock.
func SelfCheck() error {
	const d = 90 * time.Minute
	now := time.Now()
	shifted := shiftWall(now, d)
	wall := shifted.Round(0).Sub(now.Round(0))
	mono := shifted.Sub(now)
	if wall != d || mono != 0 {
		return fmt.Errorf("skewclock: time.Time's layout changed: shifting the wall clock by %s moved it by %s and the monotonic clock by %s", d, wall, mono)
	}
	if unsafe.Sizeof(now) != unsafe.Sizeof(timeLayout{}) {
		return errors.New("skewclock: time.Time's size changed")
	}
	return nil
}
