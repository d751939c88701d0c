package s3test

import "go.uber.org/goleak"

// FindLeaks reports goroutines still running after a package's tests, other
// than the idle HTTP connections an S3 client keeps. Call it from TestMain
// after the tests passed.
func FindLeaks() error {
	return goleak.Find(
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
