package s3lock

import "time"

// Clock is the source of time for a Client. The protocol only ever measures
// durations between two readings of the same clock (and compares times the
// store reports with each other), so a clock that is off by hours but ticks
// at the right rate changes nothing but the informational timestamps.
type Clock interface {
	// Now returns the current time. Readings should carry a monotonic
	// component, as time.Now's do, so that durations survive wall-clock
	// steps.
	Now() time.Time
	// After waits for the duration to elapse and then sends the current
	// time on the returned channel.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real clock, the default.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
