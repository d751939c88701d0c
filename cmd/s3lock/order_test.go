//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// Waiting in order (--order, PROTOCOL.md §13): runs that wait for a held lock
// are served in the order they joined its line (fifo, the default); with
// --order newest only the newest waits, the older ones exit 5; --order none
// races as s3lock did before the line.

// holdWithRun takes name with an `s3lock run` whose command holds it until
// release is called.
func (c *cli) holdWithRun(name string) (release func() int) {
	c.t.Helper()
	ready, done := filepath.Join(c.dir, "holder.ready"), filepath.Join(c.dir, "holder.done")
	holder := c.command(c.t.Context(), "run", "--quiet", "--holder", "holder", name, "--",
		"sh", "-c", `echo ready > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done`, ready, done)
	if err := holder.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = holder.Process.Kill() })
	testkit.Eventually(c.t, time.Minute, "the holder's command to start", func() bool { return fileHas(ready, "ready") })
	return func() int {
		c.t.Helper()
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			c.t.Fatal(err)
		}
		return waitExit(c.t, holder)
	}
}

func TestRun_WaitersAreServedInJoiningOrder(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("migrations")
	log := filepath.Join(c.dir, "served")
	release := c.holdWithRun(name)
	var runs []*queued
	var want []string
	for i := range 10 {
		who := fmt.Sprintf("run-%d", i)
		runs = append(runs, c.startQueued(name, who, log)) // --order fifo is the default
		want = append(want, who)
		c.waitInLine(name, who) // joined: the next one starts 100 ms later
		time.Sleep(100 * time.Millisecond)
	}
	if got := lineHolders(c.line(name)); !slices.Equal(got, want) {
		t.Fatalf("line %v; want %v", got, want)
	}
	if code := release(); code != 0 {
		t.Fatalf("the holder exited %d", code)
	}
	for _, q := range runs {
		q.mustSucceed(t)
	}
	if got := served(t, log); !slices.Equal(got, want) {
		t.Errorf("served in order %v; want %v", got, want)
	}
	// While in line, a run says how many wait before it.
	if last := runs[len(runs)-1].stderr.String(); !strings.Contains(last, "9 waiters ahead in line") {
		t.Errorf("the last run's progress does not show its place in line:\n%s", last)
	}
	if ws := c.line(name); len(ws) != 0 {
		t.Errorf("line after every run was served: %+v; want it empty", ws)
	}
}

// A run killed while in line holds the others up only until its place
// lapses (6 s without a heartbeat, plus 2 s slack, by the store's clock);
// the others keep their order.
func TestRun_KilledWaiterLeavesTheLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("deploy")
	log := filepath.Join(c.dir, "served")
	holder, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(context.Background()) }()
	var runs []*queued
	for i := range 10 {
		who := fmt.Sprintf("run-%d", i)
		runs = append(runs, c.startQueued(name, who, log))
		c.waitInLine(name, who)
		time.Sleep(100 * time.Millisecond)
	}
	killed := runs[4]
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.cmd.Wait()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The runs ahead of the killed one are served; then its ticket heads
	// the line: the lock stays free until it lapses, then the next in line
	// takes it.
	for _, q := range runs[:4] {
		q.mustSucceed(t)
	}
	reached := time.Now()
	testkit.Eventually(t, time.Minute, "run-5 to be served", func() bool { return slices.Contains(served(t, log), "run-5") })
	took := time.Since(reached)
	t.Logf("the line moved past the killed run %s after it reached the head", took.Round(time.Millisecond))
	// The bound: 8 s after its last heartbeat (sent before the kill) by
	// the store's clock, whose one-second resolution can add a second,
	// plus a poll of the line; generously.
	if limit := 12 * time.Second; took > limit {
		t.Errorf("the line moved on %s after the killed run reached its head; want within %s", took.Round(time.Millisecond), limit)
	}
	for _, q := range runs[5:] {
		q.mustSucceed(t)
	}
	want := []string{"run-0", "run-1", "run-2", "run-3", "run-5", "run-6", "run-7", "run-8", "run-9"}
	if got := served(t, log); !slices.Equal(got, want) {
		t.Errorf("served in order %v; want %v", got, want)
	}
}

// Newest wins: of three runs waiting with --order newest, the older two give
// up at once, while the holder still holds the lock, naming a newer run;
// only the newest runs its command.
func TestRun_OrderNewestOnlyTheNewestRuns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("deploy/prod")
	log := filepath.Join(c.dir, "served")
	holder, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(context.Background()) }()
	var runs []*queued
	for i := 1; i <= 3; i++ {
		who := fmt.Sprintf("commit-%d", i)
		runs = append(runs, c.startQueued(name, who, log, "--order", "newest", "--stats"))
		c.waitInLine(name, who)
	}
	newest := time.Now()
	exits := make(chan int, 2)
	for _, q := range runs[:2] {
		go func() { exits <- waitExit(t, q.cmd) }()
	}
	// A superseded waiter leaves at most a line poll (1 s) after the newer
	// one joined; 5 s is generous.
	const limit = 5 * time.Second
	for range 2 {
		select {
		case code := <-exits:
			if code != exitSuperseded {
				t.Fatalf("a superseded run exited %d, want %d", code, exitSuperseded)
			}
		case <-time.After(time.Until(newest.Add(limit))):
			t.Fatalf("the older runs did not give way within %s of the newest joining", limit)
		}
	}
	t.Logf("the older runs gave way %s after the newest joined", time.Since(newest).Round(time.Millisecond))
	for i, newer := range [][]string{{"commit-2", "commit-3"}, {"commit-3"}} {
		lines := strings.Split(strings.TrimSpace(runs[i].stderr.String()), "\n")
		last := lines[len(lines)-1] // after the progress lines
		names := false
		for _, n := range newer {
			names = names || strings.Contains(last, fmt.Sprintf("superseded by the newer run %q", n))
		}
		if !names || strings.Contains(last, "--help") {
			t.Errorf("%s's last line does not name a newer run (%s): %q", runs[i].who, strings.Join(newer, " or "), last)
		}
		statsNotAcquired(t, runs[i].stderr.String(), name)
	}
	if st := c.current(name); !st.Held || st.Epoch != holder.Token().Epoch || holder.Err() != nil {
		t.Fatalf("the lock is %+v (holder: %v); the older runs must give way while it is held", st, holder.Err())
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	runs[2].mustSucceed(t)
	if got := served(t, log); !slices.Equal(got, []string{"commit-3"}) {
		t.Errorf("served %v; want only commit-3", got)
	}
}

// By default a free lock goes to the runs waiting in its line: --wait 0
// turns away a newcomer while someone waits (exit 3), and only --order none
// takes the lock past the line.
func TestRun_FreeLockGoesToTheLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("queue")
	holder, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(context.Background()) }()
	// A waiter that is killed keeps its place for 6 to 8 s after its last
	// heartbeat: long enough to try the free lock while it heads the line.
	q := c.startQueued(name, "crashed", filepath.Join(c.dir, "served"))
	c.waitInLine(name, "crashed")
	if err := q.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = q.cmd.Wait()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := c.run("run", "--wait", "0", name, "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, "is free, but its line has 1 waiter") {
		if len(c.line(name)) == 0 {
			t.Fatalf("the killed waiter's place lapsed before the test could try the lock (a very slow machine?): %s", r)
		}
		t.Fatalf("--wait 0 with someone in line: %s; want exit %d saying the line goes first", r, exitHeld)
	}
	c.mustRun("run", "--wait", "0", "--order", "none", "--quiet", name, "--", "true")
}
