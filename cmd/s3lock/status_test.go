package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	held, released, never := c.name("team/held"), c.name("team/released"), c.name("team/never")
	lease, err := c.sdk.TryAcquire(t.Context(), held, s3lock.WithMetadata(map[string]string{"job": "deploy"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	l2, err := c.sdk.TryAcquire(t.Context(), released)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	t.Run("table", func(t *testing.T) {
		r := c.mustRun("status", "--prefix", c.name("team/"))
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") {
			t.Fatalf("want a header and two locks:\n%s", r.stdout)
		}
		if f := strings.Fields(lines[1]); len(f) < 5 || f[0] != held || f[1] != "held" || f[2] != "1" || f[3] != "test-sdk" || f[4] != "in" {
			t.Fatalf("row %q does not show %s held by test-sdk at epoch 1", lines[1], held)
		}
		if f := strings.Fields(lines[2]); len(f) < 3 || f[0] != released || f[1] != "released" || f[2] != "1" {
			t.Fatalf("row %q does not show %s released", lines[2], released)
		}
	})

	t.Run("json for a prefix", func(t *testing.T) {
		r := c.mustRun("status", "--prefix", c.name("team/"), "--output", "json")
		var got []lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if len(got) != 2 || got[0].Name != held || got[1].Name != released {
			t.Fatalf("got %+v, want %s and %s", got, held, released)
		}
		h := got[0]
		if h.State != "held" || !h.Held || h.Epoch != 1 || h.Holder != "test-sdk" || h.Key != lease.Token().Key() ||
			h.ExpiresInSeconds == nil || *h.ExpiresInSeconds <= 0 || h.Metadata["job"] != "deploy" || h.LeaseDuration != "1m0s" {
			t.Fatalf("held lock reported as %+v", h)
		}
		if r := got[1]; r.State != "released" || r.Held || !r.ExpiresAt.IsZero() || r.ReleasedAt.IsZero() {
			t.Fatalf("released lock reported as %+v", r)
		}
	})

	t.Run("json for one name, flags after the name", func(t *testing.T) {
		r := c.mustRun("status", held, "-o", "json")
		var got lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if got.Name != held || got.State != "held" || got.Epoch != lease.Token().Epoch {
			t.Fatalf("got %+v", got)
		}
	})

	t.Run("a lock never acquired", func(t *testing.T) {
		r := c.mustRun("status", never, "--output", "json")
		var got lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if got.Name != never || got.State != "free" || got.Epoch != 0 || got.Held {
			t.Fatalf("got %+v", got)
		}
		r = c.mustRun("status", never)
		if f := strings.Fields(strings.Split(r.stdout, "\n")[1]); len(f) < 2 || f[0] != never || f[1] != "free" {
			t.Fatalf("table: %s", r.stdout)
		}
	})
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("stuck")
	lease, err := c.sdk.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Detach()

	if r := c.run("force-release", name); r.code != exitUsage || !strings.Contains(r.stderr, "--epoch") {
		t.Fatalf("without --epoch: %s", r)
	}
	if r := c.run("force-release", name, "--epoch", "9"); r.code != exitError {
		t.Fatalf("a missing epoch: %s", r)
	}

	c.mustRun("force-release", name, "--epoch", "1", "--holder", "oncall")
	st := c.current(name)
	if !st.Released || st.ReleasedBy != "oncall" || st.Epoch != 1 {
		t.Fatalf("after force-release the lock is %+v", st)
	}
	if err := lease.Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("the holder's renewal got %v, want ErrLeaseLost", err)
	} else if reason := lostReason(err); reason != s3lock.LostForceReleased {
		t.Fatalf("the holder's renewal says the lease was %v, want %v", reason, s3lock.LostForceReleased)
	}
	r := c.mustRun("status", name)
	if !strings.Contains(r.stdout, "forced by oncall") {
		t.Fatalf("status does not show the forced release:\n%s", r.stdout)
	}
	// The lock is free at once.
	if r := c.run("run", "--wait", "0", "--quiet", name, "--", "true"); r.code != 0 {
		t.Fatalf("run after force-release: %s", r)
	}
}

// status NAME shows the lock's line: who waits, since when, in the order
// they will be served; status --prefix lists locks, never their tickets.
func TestStatus_ShowsTheLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("line/deploy")
	log := filepath.Join(c.dir, "served")
	holder, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(context.Background()) }()

	r := c.mustRun("status", name)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 {
		t.Fatalf("with no one waiting, status shows more than the lock:\n%s", r.stdout)
	}

	want := []struct{ who, order string }{{"first", "fifo"}, {"second", "newest"}, {"third", "fifo"}}
	var runs []*queued
	for _, w := range want {
		runs = append(runs, c.startQueued(name, w.who, log, "--order", w.order))
		c.waitInLine(name, w.who)
	}

	t.Run("table", func(t *testing.T) {
		r := c.mustRun("status", name)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 7 || lines[2] != "" || strings.Join(strings.Fields(lines[3]), " ") != "POSITION WAITER ORDER JOINED" {
			t.Fatalf("want the lock, a blank line, then a header and three waiters:\n%s", r.stdout)
		}
		for i, w := range want {
			f := strings.Fields(lines[4+i])
			if len(f) != 4 || f[0] != strconv.Itoa(i+1) || f[1] != w.who || f[2] != w.order {
				t.Fatalf("row %q; want %d %s %s and when it joined", lines[4+i], i+1, w.who, w.order)
			}
			if _, err := time.Parse(time.RFC3339, f[3]); err != nil {
				t.Fatalf("row %q: the join time: %v", lines[4+i], err)
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		r := c.mustRun("status", name, "-o", "json")
		var got lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if got.State != "held" || len(got.Waiting) != len(want) {
			t.Fatalf("got %+v; want the held lock and %d waiters", got, len(want))
		}
		for i, w := range want {
			g := got.Waiting[i]
			if g.Position != i+1 || g.Holder != w.who || g.Order != w.order || g.JoinedAt.IsZero() || g.Ticket == 0 ||
				!strings.HasPrefix(g.Key, name+"/lock-line/") || g.Error != "" {
				t.Errorf("waiting[%d] = %+v; want %s (%s) at position %d, with its ticket and join time", i, g, w.who, w.order, i+1)
			}
			if i > 0 && g.JoinedAt.Before(got.Waiting[i-1].JoinedAt) {
				t.Errorf("waiting[%d] joined at %s, before the one ahead of it", i, g.JoinedAt)
			}
		}
	})

	t.Run("prefix", func(t *testing.T) {
		r := c.mustRun("status", "--prefix", c.name("line/"))
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(lines) != 2 || f[0] != name || f[len(f)-1] != strconv.Itoa(len(runs)) {
			t.Fatalf("want the one lock, with its waiters counted but not listed:\n%s", r.stdout)
		}
		r = c.mustRun("status", "--prefix", c.name("line/"), "-o", "json")
		var got []lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if len(got) != 1 || got[0].Name != name || got[0].Waiting != nil || got[0].Waiters != len(runs) {
			t.Fatalf("got %+v; want the one lock, %d waiters counted, its line not listed", got, len(runs))
		}
	})

	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, q := range runs {
		q.mustSucceed(t)
	}
	r = c.mustRun("status", name, "-o", "json")
	if strings.Contains(r.stdout, `"waiting"`) {
		t.Fatalf("the line is empty, but status shows: %s", r.stdout)
	}
}

// TestNameCollision_StatusAndAcquireSayWhich: an object where a lock needs a
// prefix of its own ("deploy" beside the lock "deploy/prod"). On a store that
// keeps both (S3) the lock is taken as usual; on one that refuses the lock's
// keys (versitygw) or hides them (MinIO), acquire exits 1 with one line naming
// the object. status never calls the lock free while nothing of it is listed.
func TestNameCollision_StatusAndAcquireSayWhich(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	object, name := c.name("deploy"), c.name("deploy/prod")
	if _, err := c.ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(c.ns.Bucket), Key: aws.String(object),
		Body: strings.NewReader("an object, not a lock")}); err != nil {
		t.Fatal(err)
	}
	r := c.run("status", name)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitError || len(lines) != 1 || !strings.Contains(lines[0], object) || strings.Contains(r.stdout, "free") {
		t.Errorf("status of a lock beside an object: %s\nwant exit %d, one line naming %s, never free", r, exitError, object)
	}
	r = c.run("acquire", name)
	if r.code == exitOK {
		t.Logf("the store keeps the lock beside the object: %s", r)
		return
	}
	lines = strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitError || len(lines) != 1 || !strings.Contains(lines[0], object+" exists") {
		t.Errorf("acquire of a lock beside an object: %s\nwant exit %d and one line naming %s", r, exitError, object)
	}
}

// lostReason is the Reason of the *s3lock.LeaseLostError in err's chain, ""
// when err does not say that a lease was lost.
func lostReason(err error) s3lock.LossReason {
	var lost *s3lock.LeaseLostError
	if errors.As(err, &lost) {
		return lost.Reason
	}
	return ""
}
