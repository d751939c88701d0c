package s3lock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

func TestMain(m *testing.M) {
	code := s3test.Main(m)
	if code == 0 {
		// Every lease's background goroutine must be gone once its test
		// released it; idle HTTP connections may remain.
		if err := s3test.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
