package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// --max-hold caps a lease's tenure (s3lock.WithMaxHold): run stops its
// command at the cap as at any lost lease, and status shows the cap.

// TestRun_MaxHoldStopsTheCommandAtTheCap: a command that outlives --max-hold
// gets SIGTERM before the cap with the cap named, s3lock exits as at a lost
// lease (4) and the lock is released, not left to lapse.
func TestRun_MaxHoldStopsTheCommandAtTheCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string // $0 is a marker file
		want         string // in stderr
	}{
		{"exits on SIGTERM", `trap 'echo terminated >> "$0"; exit 0' TERM; echo ready >> "$0"; while :; do sleep 0.1; done`,
			"was about to reach its maximum hold of 4s (--max-hold)"},
		{"ignores SIGTERM and is killed", `trap '' TERM; echo ready >> "$0"; while :; do sleep 0.1; done`,
			"reached its maximum hold of 4s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			name := c.name("capped")
			marker := filepath.Join(c.dir, "marker")
			var stderr testkit.Buffer
			cmd := c.command(t.Context(), "run", "--lease", "2s", "--max-hold", "4s", name, "--", "sh", "-c", tc.script, marker)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, time.Minute, "the command to start", func() bool { return fileHas(marker, "ready") })
			if st := c.current(name); st.HeldUntilAtMost.Sub(st.AcquiredAt) != 4*time.Second {
				t.Errorf("the lease is held until at most %v, acquired at %v; want 4s later", st.HeldUntilAtMost, st.AcquiredAt)
			}
			if code := waitExit(t, cmd); code != exitLost {
				t.Fatalf("s3lock exited %d, want %d (as at a lost lease); stderr: %s", code, exitLost, stderr.String())
			}
			for _, want := range []string{"reaches its maximum hold of 4s (--max-hold) in", "SIGTERM now", tc.want, "raise --max-hold"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q: %s", want, stderr.String())
				}
			}
			if st := c.current(name); st.Phase() != s3lock.PhaseReleased {
				t.Errorf("after the cap the lock is %s; want released (not left to lapse)", st.Phase())
			}
		})
	}
}

// TestMaxHold_MustOutlastTheLease: --max-hold must be longer than --lease; a
// usage error names both, before anything is acquired.
func TestMaxHold_MustOutlastTheLease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("refused")
	for _, args := range [][]string{
		{"run", "--lease", "1m", "--max-hold", "30s", name, "--", "true"},
		{"acquire", "--lease", "10m", "--max-hold", "10m", name},
	} {
		r := c.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--max-hold") || !strings.Contains(r.stderr, "must be longer than --lease") {
			t.Errorf("s3lock %q: %s; want a usage error naming --max-hold and --lease", args, r)
		}
	}
	if st := c.current(name); st.Epoch != 0 {
		t.Errorf("a refused --max-hold took epoch %d; want none", st.Epoch)
	}
}

// TestStatus_ShowsTheCap: status (table and JSON), acquire's token and
// watch show a capped lease's "held at most until".
func TestStatus_ShowsTheCap(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("capped-status")
	r := c.mustRun("acquire", "--lease", "1m", "--max-hold", "1h", name)
	var tok struct {
		HeldUntilAtMost time.Time `json:"held_until_at_most"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil || tok.HeldUntilAtMost.IsZero() {
		t.Fatalf("acquire's token %s (%v) lacks held_until_at_most", r.stdout, err)
	}
	capText := tok.HeldUntilAtMost.Format(time.RFC3339)
	if table := c.mustRun("status", name).stdout; !strings.Contains(table, "held at most until "+capText) {
		t.Errorf("status does not show the cap %s:\n%s", capText, table)
	}
	var ls lockStatus
	if err := json.Unmarshal([]byte(c.mustRun("status", name, "--output", "json").stdout), &ls); err != nil ||
		!ls.HeldUntilAtMost.Equal(tok.HeldUntilAtMost) {
		t.Errorf("status --output json = %+v, %v; want held_until_at_most %s", ls, err, tok.HeldUntilAtMost)
	}
	st := c.current(name)
	if got := changeText(st, time.Now()); !strings.Contains(got, "held at most until "+capText) {
		t.Errorf("watch's line %q does not show the cap %s", got, capText)
	}
	env := append(c.env, envToken+"="+strings.TrimSpace(r.stdout))
	if rel := c.runWith(env, "", "release"); rel.code != 0 {
		t.Errorf("release of the capped lease: %s", rel)
	}
}

// TestRun_ASetWhoseFirstLockReachesItsCapWhileWaiting: each lock of a set
// is capped from its own acquisition, so the first may reach --max-hold
// while the set waits for another; the set is then given up, what it took
// released, and the exit is not 4 (no command ran under it).
func TestRun_ASetWhoseFirstLockReachesItsCapWhileWaiting(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a, b := c.name("capset/a"), c.name("capset/b")
	held, err := c.sdk.TryAcquire(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	r := c.run("run", "--lease", "2s", "--max-hold", "3s", "--wait", "1m", a, b, "--", "true")
	if r.code == exitLost || r.code == 0 || !strings.Contains(r.stderr, "maximum hold of 3s") {
		t.Errorf("s3lock run of a set whose first lock reached its cap while waiting: %s; want it given up, naming the cap, not exit %d", r, exitLost)
	}
	if st := c.current(a); st.Held {
		t.Errorf("%s after the set was given up: %+v; want not held", a, st)
	}
}
