package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// hostileEnv puts an s3test.HostileStore in front of the test's store and
// returns it with the test environment pointed at it.
func (c *cli) hostileEnv() (*s3test.HostileStore, []string) {
	c.t.Helper()
	h, tg := s3test.NewHostileStore(c.t, c.ns.Target)
	return h, append(c.without(envEndpoint), envEndpoint+"="+tg.Endpoint)
}

// seedEpochs writes epochs 1 to n of the lock name as released leases, as a
// history that no cleanup shortened would hold (by PUT, not by n runs).
func (c *cli) seedEpochs(name string, n uint64) {
	c.t.Helper()
	var wg sync.WaitGroup
	epochs := make(chan uint64)
	for range 8 {
		wg.Go(func() {
			for e := range epochs {
				key := s3lock.Token{Name: name, Epoch: e}.Key()
				if _, err := c.ns.Client.PutObject(c.t.Context(), &s3.PutObjectInput{Bucket: aws.String(c.ns.Bucket), Key: aws.String(key),
					Body: strings.NewReader(fmt.Sprintf(`{"leaderId":"earlier","validityMs":60000,"expired":true,"s3lock":1,"epoch":%d,"renewals":1}`, e))}); err != nil {
					c.t.Error(err)
				}
			}
		})
	}
	for e := uint64(1); e <= n; e++ {
		epochs <- e
	}
	close(epochs)
	wg.Wait()
}

// acceptanceLimit is how long status and acquire --wait 5s may take against
// a store whose listings would not end (issue 35's acceptance): a bound
// proving that they end, not a measure of speed.
const acceptanceLimit = 20 * time.Second

// TestHostileStore_StatusAndAcquireEndOnListingsThatWouldNotEnd: against a
// store that ignores StartAfter, with a lock of 1,000 epochs, s3lock status
// sent about 2,100 LISTs in 20 s and went on, and acquire --wait 5s ran
// until it was killed; against one that answers a listing of a lock's line
// with the same continuation token forever, status made 449 LISTs in 20 s.
// Both now end at once, exit 1, with an error that names what the store did
// and points to s3lock verify.
func TestHostileStore_StatusAndAcquireEndOnListingsThatWouldNotEnd(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	h, env := c.hostileEnv()
	// Two locks with a waiter in their line (whose common prefix follows
	// the epochs in a listing): one with 1,000 epochs, one held.
	history, lined := c.name("history"), c.name("lined")
	c.seedEpochs(history, 1000)
	l, err := c.sdk.TryAcquire(t.Context(), lined)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // t.Context has ended
		defer cancel()
		_ = l.Release(ctx)
	})
	for _, name := range []string{history, lined} {
		if _, err := c.ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(c.ns.Bucket),
			Key: aws.String(name + "/lock-line/0000000001-fifo-0123456789abcdef.json"), Body: strings.NewReader("{}")}); err != nil {
			t.Fatal(err)
		}
	}

	// Honestly listed, the 1,000 epochs and the line fill more than a
	// page: status searches beyond the first (two LISTs), then lists the
	// line (twice: for the count of waiters, and to show them).
	before := h.Lists()
	if r := c.runWith(env, "", "status", history, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"epoch":1000,`) {
		t.Fatalf("status on an honest store: %s; want epoch 1000", r)
	}
	if n := h.Lists() - before; n < 4 {
		t.Fatalf("status on an honest store sent %d LISTs; want at least 4: the 1,000 epochs fill the first page", n)
	}

	for _, tc := range []struct {
		name string
		x    s3test.Hostility
		lock string
		says string
	}{
		{"ignores StartAfter", s3test.Hostility{IgnoreStartAfter: true}, history, "it does not honour StartAfter"},
		{"repeats a continuation token", s3test.Hostility{RepeatToken: true}, lined, "repeats its continuation token"},
		{"repeats a continuation token in the line", s3test.Hostility{RepeatToken: true, Prefix: lined + "/lock-line/"}, lined,
			"repeats its continuation token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.Set(tc.x)
			for _, args := range [][]string{{"status", tc.lock}, {"acquire", "--wait", "5s", tc.lock}} {
				before, start := h.Lists(), time.Now()
				r := c.runWith(env, "", args...)
				took := time.Since(start)
				if r.code != exitError || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, "s3lock verify") {
					t.Errorf("s3lock %q: %s; want exit %d saying %q and pointing to s3lock verify", args, r, exitError, tc.says)
				}
				if took > acceptanceLimit {
					t.Errorf("s3lock %q took %s; want it to end within %s", args, took, acceptanceLimit)
				}
				t.Logf("s3lock %q: %d LISTs, %s: %s", args, h.Lists()-before, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
			}
		})
	}
}

// TestHostileStore_SlowStoreEndsStatusAndAcquire: status had no deadline,
// and acquire's --wait bounded only the wait for a holder, not the first
// attempt, so a store that answered slowly (or a listing that never ended)
// held both as long as it liked. status now gives up at --timeout, and
// acquire --wait 2s gives its attempts 10s (the least any wait gives them).
func TestHostileStore_SlowStoreEndsStatusAndAcquire(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	h, env := c.hostileEnv()
	name := c.name("slow")
	h.Set(s3test.Hostility{Delay: 30 * time.Second})
	for _, tc := range []struct {
		args  []string
		says  string
		limit time.Duration // a bound proving that it ended
	}{
		{[]string{"status", name, "--timeout", "1s"}, "status did not finish within 1s (--timeout)", 10 * time.Second},
		{[]string{"acquire", "--wait", "2s", name}, "no attempt to acquire it finished within 10s", acceptanceLimit},
	} {
		start := time.Now()
		r := c.runWith(env, "", tc.args...)
		took := time.Since(start)
		if r.code != exitError || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("s3lock %q on a store that answers after 30s: %s; want exit %d saying %q", tc.args, r, exitError, tc.says)
		}
		if took > tc.limit {
			t.Errorf("s3lock %q took %s; want it to end within %s", tc.args, took, tc.limit)
		}
		t.Logf("s3lock %q: %s: %s", tc.args, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	}
}
