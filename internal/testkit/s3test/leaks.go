package s3test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// FindLeaks reports goroutines still running after a package's tests, other
// than the idle HTTP connections an S3 client keeps. Call it from TestMain
// after the tests passed.
//
// goleak v1.3.0 panics ("Failed to parse stack trace") on a goroutine whose
// stack Go printed with frames elided, as a request deep in the AWS SDK's
// middleware can have; such a goroutine is in the middle of something, so
// FindLeaks looks again a little later, and reports the panic as a leak if
// it persists (it never passes a check it could not make).
func FindLeaks() error {
	var err error
	for attempt := range leakAttempts {
		if attempt > 0 {
			time.Sleep(leakRetryPause)
		}
		if err = findLeaks(); err == nil {
			return nil
		}
		var unparsed unparsedStack
		if !errors.As(err, &unparsed) {
			return err
		}
	}
	return err
}

const (
	leakAttempts   = 10
	leakRetryPause = 500 * time.Millisecond
)

// unparsedStack is goleak's panic on a stack it cannot parse.
type unparsedStack struct{ reason any }

func (u unparsedStack) Error() string {
	return fmt.Sprintf("goleak could not parse the goroutines' stacks (a goroutine deep in a call?): %v", u.reason)
}

func findLeaks() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = unparsedStack{r}
		}
	}()
	return goleak.Find(
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// MainCheckingLeaks is Main followed, when the tests passed, by FindLeaks:
// the TestMain of a package whose code starts goroutines (a lease's
// renewal, a client's history cleanups) that must be gone once its tests
// are.
func MainCheckingLeaks(m *testing.M) int {
	code := Main(m)
	if code == 0 {
		// Every lease's background goroutine must be gone once its test
		// released it; idle HTTP connections may remain.
		if err := FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}
