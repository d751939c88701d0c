package s3lock_test

import (
	"os"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.MainCheckingLeaks(m)) }
