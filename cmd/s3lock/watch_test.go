//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// watching is a running `s3lock watch`, its stdout read line by line.
type watching struct {
	cmd    *exec.Cmd
	lines  chan string // closed at the end of stdout
	stderr *testkit.Buffer
}

// startWatch starts `s3lock watch` with args; its stdout is a pipe, not a
// terminal.
func (c *cli) startWatch(args ...string) *watching {
	c.t.Helper()
	w := &watching{cmd: c.command(c.t.Context(), append([]string{"watch"}, args...)...), lines: make(chan string, 100), stderr: &testkit.Buffer{}}
	w.cmd.Stderr = w.stderr
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = w.cmd.Process.Kill() })
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	return w
}

// next returns the next line watch prints, within limit (a safeguard against
// hangs, not an assertion on speed).
func (w *watching) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok {
			t.Fatalf("watch ended; stderr: %s", w.stderr.String())
		}
		return line
	case <-time.After(limit):
		t.Fatalf("watch printed nothing within %s; stderr: %s", limit, w.stderr.String())
	}
	return ""
}

// nextChange returns the next change watch prints as JSON.
func (w *watching) nextChange(t *testing.T, limit time.Duration) watchChange {
	t.Helper()
	line := w.next(t, limit)
	var ch watchChange
	if err := json.Unmarshal([]byte(line), &ch); err != nil {
		t.Fatalf("watch printed %q: %v", line, err)
	}
	if ch.ObservedAt.IsZero() {
		t.Fatalf("watch printed %q, without observed_at", line)
	}
	return ch
}

// expect checks that the next change is the lock in state at epoch, held
// by (or last held by) holder.
func (w *watching) expect(t *testing.T, limit time.Duration, state string, epoch uint64, holder string) watchChange {
	t.Helper()
	ch := w.nextChange(t, limit)
	if ch.State != state || ch.Epoch != epoch || ch.Holder != holder {
		t.Fatalf("watch saw %+v; want %s at epoch %d by %q", ch, state, epoch, holder)
	}
	return ch
}

// end waits for watch to exit and returns what it printed after the last
// line read, and its exit code.
func (w *watching) end(t *testing.T) (rest []string, code int) {
	t.Helper()
	for line := range w.lines {
		rest = append(rest, line)
	}
	return rest, waitExit(t, w.cmd)
}

// A follower watching a lock sees every change as one JSON line (stdout is
// not a terminal): the lock free, acquired, released, acquired by another
// whose lease lapses unrenewed, force-released; and a watch ends with
// exit 0 when it is stopped, or when the lock reaches the --until state.
func TestWatch_FollowsTheLock(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("cluster/leader")
	const limit = 10 * time.Second
	w := c.startWatch(name)
	untilLapsed := c.startWatch(name, "--until", "lapsed")
	for _, x := range []*watching{w, untilLapsed} {
		if ch := x.expect(t, time.Minute, "free", 0, ""); ch.Name != name || ch.Held || ch.Key != "" {
			t.Fatalf("a lock never acquired: %+v", ch)
		}
	}

	// Each change is awaited by both watchers before the next is made: a
	// watch sees every epoch that lasts longer than a poll interval or two.
	token := c.mustRun("acquire", "--quiet", "--holder", "alpha", "--metadata", "role=leader", name).stdout
	held := w.expect(t, limit, "held", 1, "alpha")
	if !held.Held || held.Key == "" || held.AcquiredAt.IsZero() || held.ExpiresAt.IsZero() || held.ExpiresInSeconds == nil ||
		held.Metadata["role"] != "leader" || held.LeaseDuration != defaultTokenLease.String() {
		t.Fatalf("a held lock: %+v", held)
	}
	untilLapsed.expect(t, limit, "held", 1, "alpha")
	c.mustRun("release", "--quiet", "--token", token)
	if ch := w.expect(t, limit, "released", 1, "alpha"); ch.Held || ch.ReleasedAt.IsZero() || !ch.ExpiresAt.IsZero() || ch.ReleasedBy != "" {
		t.Fatalf("a released lock: %+v", ch)
	}
	untilLapsed.expect(t, limit, "released", 1, "alpha")

	// acquire's lease is not renewed: with the shortest lease it lapses
	// seconds later (its validity plus the store's slack, by its clock).
	c.mustRun("acquire", "--quiet", "--holder", "beta", "--lease", "2s", name)
	w.expect(t, limit, "held", 2, "beta")
	untilLapsed.expect(t, limit, "held", 2, "beta")
	lapsed := w.expect(t, limit, "lapsed", 2, "beta")
	if lapsed.Held || !lapsed.ExpiresAt.IsZero() || !lapsed.ReleasedAt.IsZero() {
		t.Fatalf("a lapsed lock: %+v", lapsed)
	}
	// --until lapsed stops there.
	untilLapsed.expect(t, limit, "lapsed", 2, "beta")
	if rest, code := untilLapsed.end(t); code != 0 || len(rest) != 0 {
		t.Fatalf("watch --until lapsed exited %d after the lapse, printing %q; want 0 and nothing more", code, rest)
	}

	c.mustRun("acquire", "--quiet", "--holder", "gamma", name)
	w.expect(t, limit, "held", 3, "gamma")
	c.mustRun("force-release", name, "--epoch", "3", "--holder", "oncall")
	if ch := w.expect(t, limit, "released", 3, "gamma"); ch.ReleasedBy != "oncall" {
		t.Fatalf("a force-released lock: %+v; want released_by oncall", ch)
	}

	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rest, code := w.end(t); code != 0 || len(rest) != 0 || w.stderr.String() != "" {
		t.Fatalf("watch exited %d on SIGTERM, printing %q and stderr %q; want 0 and nothing", code, rest, w.stderr.String())
	}
}

// --until waits: a watch interrupted before the state comes exits 128+N, as
// an interrupted wait does; a lock already in the state ends it at once.
// --output text prints a line a person reads.
func TestWatch_UntilAndText(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("deploy/prod")

	r := c.mustRun("watch", "-o", "text", "--until", "not-held", name)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], name+"  free (never acquired)") {
		t.Fatalf("watch --until not-held of a lock never acquired printed %q; want one line saying it is free", r.stdout)
	}

	w := c.startWatch("--until", "held,released", name)
	w.expect(t, time.Minute, "free", 0, "")
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if rest, code := w.end(t); code != 128+int(syscall.SIGINT) || len(rest) != 0 {
		t.Fatalf("watch --until interrupted exited %d, printing %q; want %d and nothing more", code, rest, 128+int(syscall.SIGINT))
	}
	if want := `interrupted by SIGINT before lock "` + name + `" was held or released`; !strings.Contains(w.stderr.String(), want) {
		t.Fatalf("stderr %q lacks %q", w.stderr.String(), want)
	}

	lease, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	r = c.mustRun("watch", "-o", "text", "--until", "held", name)
	if !strings.Contains(r.stdout, "  "+name+"  held by test-sdk (epoch 1), lapses in ") {
		t.Fatalf("watch -o text of a held lock printed %q", r.stdout)
	}
}
