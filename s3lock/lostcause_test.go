package s3lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestLostLease_KeepsTheStoresAnswer: a renewal the store answers with 503,
// whose read-back then hangs past the lease's trust deadline, ended the
// lease without the store's answer in its error (the review of issue 37:
// the write's error was recorded only if the caller's context was still
// live after the read-back, which outlives it). The lost lease says what
// the store answered.
func TestLostLease_KeepsTheStoresAnswer(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1)
	c := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithLeaseDuration(3 * time.Second)}, s3test.WithoutRetries(),
		s3test.WithTransport(f.Wrap))
	l, err := c.TryAcquire(t.Context(), ns.Name("cause"))
	if err != nil {
		t.Fatal(err)
	}
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Ops: []string{"PutObject"}, Probability: 1},
		s3test.Rule{Fault: s3test.Latency, Ops: []string{"GetObject"}, Probability: 1, Delay: 10 * time.Second, Fixed: true})
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lease was not lost within 30s of its renewals failing")
	}
	var lost *s3lock.LeaseLostError
	if err := l.Err(); !errors.As(err, &lost) || !errors.Is(lost.Err, s3lock.ErrUnavailable) ||
		!strings.Contains(err.Error(), "PutObject") {
		t.Fatalf("lost lease: %v (cause %v); want the renewal's 503 as its cause", err, lost.Err)
	}
}
