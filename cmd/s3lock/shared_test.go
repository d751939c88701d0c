//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Shared leases (--shared, PROTOCOL.md §17): any number of shared holders at
// once, or one holder without --shared alone; run and acquire take a share,
// status and watch show the shared holders and a writer that waits for
// them, force-release --share deletes one.

// sharedReader is the command of a `run --shared` in the overlap test: it
// records its epoch and key, marks itself inside ($dir/$me.in), waits until
// the other reader is inside too — which it can only be while both hold
// their shares at once — then until the test says go, logs its name and
// leaves. It exits 9 if the other reader never comes.
const sharedReader = `dir=$1 me=$2 other=$3
echo "$S3LOCK_EPOCH $S3LOCK_KEY" > "$dir/$me.env"
: > "$dir/$me.in"
i=0; while [ ! -e "$dir/$other.in" ]; do i=$((i+1)); [ $i -gt 900 ] && exit 9; sleep 0.1; done
i=0; while [ ! -e "$dir/go" ]; do i=$((i+1)); [ $i -gt 900 ] && exit 9; sleep 0.1; done
echo "$me" >> "$dir/log"
rm "$dir/$me.in"`

// sharedWriter is the command of the run without --shared: it exits 9 if a
// reader is still inside, else records its epoch and logs its name.
const sharedWriter = `dir=$1
for f in "$dir"/*.in; do [ -e "$f" ] && exit 9; done
echo "$S3LOCK_EPOCH" > "$dir/writer.env"
echo writer >> "$dir/log"`

// TestRun_SharedRunsOverlapAndAnExclusiveRunWaits: two `run --shared`
// commands run at once (each waits for the other to be inside); a run
// without --shared started while they hold the lock waits until both have
// ended and then runs alone; a `run --shared` started while that writer
// waits does not get in before it.
func TestRun_SharedRunsOverlapAndAnExclusiveRunWaits(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("tf/prod")
	dir := c.dir
	var readers []*queued
	for _, rw := range [][2]string{{"reader-1", "reader-2"}, {"reader-2", "reader-1"}} {
		readers = append(readers, c.start(rw[0], "run", "--shared", "--holder", rw[0], "--wait", "2m", name, "--",
			"sh", "-c", sharedReader, "sh", dir, rw[0], rw[1]))
	}
	testkit.Eventually(t, time.Minute, "both shared runs to start their commands", func() bool {
		return fileHas(filepath.Join(dir, "reader-1.env"), "\n") && fileHas(filepath.Join(dir, "reader-2.env"), "\n")
	})

	writer := c.start("writer", "run", "--holder", "writer", "--wait", "2m", name, "--", "sh", "-c", sharedWriter, "sh", dir)
	testkit.Eventually(t, time.Minute, "the writer to wait for the shared holders", func() bool {
		st := c.current(name)
		return st.Pending && st.Holder == "writer" && len(st.Holders) == 2
	})
	// A reader that comes while the writer waits must wait behind it.
	late := c.startQueued(name, "reader-3", filepath.Join(dir, "log"), "--shared")
	c.waitInLine(name, "reader-3")
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range append(readers, writer, late) {
		q.mustSucceed(t)
	}

	order := served(t, filepath.Join(dir, "log"))
	if len(order) != 4 || !slices.Contains(order[:2], "reader-1") || !slices.Contains(order[:2], "reader-2") ||
		order[2] != "writer" || order[3] != "reader-3" {
		t.Fatalf("the commands ran in the order %q; want reader-1 and reader-2 (either order), then writer, then reader-3", order)
	}
	e1, k1 := readerEnv(t, dir, "reader-1")
	e2, k2 := readerEnv(t, dir, "reader-2")
	if e1 != e2 || k1 == k2 {
		t.Errorf("the shared runs saw epochs %d and %d, keys %s and %s; want one shared epoch and a share each", e1, e2, k1, k2)
	}
	b, err := os.ReadFile(filepath.Join(dir, "writer.env"))
	if err != nil {
		t.Fatal(err)
	}
	if we, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil || we <= e1 {
		t.Errorf("the writer ran at epoch %q; want one above the shared epoch %d", b, e1)
	}
	if st := c.current(name); st.Held {
		t.Errorf("after every run the lock is %+v; want it not held", st)
	}
}

// readerEnv returns the epoch and key a shared run's command recorded.
func readerEnv(t *testing.T, dir, who string) (uint64, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, who+".env"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("%s recorded %q; want its epoch and key", who, b)
	}
	e, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		t.Fatalf("%s recorded epoch %q: %v", who, f[0], err)
	}
	return e, f[1]
}

// sharedLease takes a share of the lock name for holder, with its own
// client; the test releases it at the end unless it was released.
func (c *cli) sharedLease(name, holder string, opts ...s3lock.Option) *s3lock.Lease {
	c.t.Helper()
	sdk, err := s3lock.New(c.ns.Client, c.ns.Bucket, s3lock.WithHolder(holder))
	if err != nil {
		c.t.Fatal(err)
	}
	l, err := sdk.TryAcquire(c.t.Context(), name, append([]s3lock.Option{s3lock.WithShared()}, opts...)...)
	if err != nil {
		c.t.Fatalf("%s: TryAcquire(WithShared()): %v", holder, err)
	}
	c.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// TestStatus_SharedHoldersAndAWaitingWriter: status (table and JSON) and
// watch show a lock held by shared holders with mode "shared" and a row
// each (share id, holder, expiry); while a writer waits for them, the writer
// and how many it waits for.
func TestStatus_SharedHoldersAndAWaitingWriter(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("plans")
	a := c.sharedLease(name, "reader-a", s3lock.WithMetadata(map[string]string{"job": "plan-a"}))
	b := c.sharedLease(name, "reader-b")
	byShare := map[string]*s3lock.Lease{a.Token().Share: a, b.Token().Share: b}
	epoch := a.Token().Epoch

	// checkShares checks the shared holders in JSON.
	checkShares := func(t *testing.T, got lockStatus) {
		t.Helper()
		if got.Mode != "shared" || !got.Held || len(got.Holders) != 2 {
			t.Fatalf("got %+v; want mode shared, held, two holders", got)
		}
		for _, h := range got.Holders {
			l := byShare[h.Share]
			if l == nil || h.Key != l.Token().Key() || h.Epoch != epoch || h.Holder != l.State().Holder || h.Slot != 0 ||
				h.ExpiresInSeconds == nil || *h.ExpiresInSeconds <= 0 || h.LeaseDuration != "1m0s" {
				t.Errorf("holder %+v; want one of the shares %v of epoch %d with its key, holder and expiry", h, byShare, epoch)
			}
			if h.Holder == "reader-a" && h.Metadata["job"] != "plan-a" {
				t.Errorf("reader-a's metadata %v; want job=plan-a", h.Metadata)
			}
		}
	}
	// show runs status (table and JSON), checks the shared holders' rows
	// and their JSON, and returns the lock's row and its JSON.
	show := func(t *testing.T) (string, lockStatus) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(c.mustRun("status", name).stdout), "\n")
		if len(lines) != 4 {
			t.Fatalf("want a header, the lock and a row per shared holder:\n%s", strings.Join(lines, "\n"))
		}
		for _, line := range lines[2:] {
			f := strings.Fields(line)
			if len(f) != 9 || f[0] != "share" || byShare[f[1]] == nil || f[2] != "held" || f[3] != strconv.FormatUint(epoch, 10) ||
				f[4] != byShare[f[1]].State().Holder || f[5] != "in" {
				t.Errorf("row %q; want share ID held %d HOLDER in ...", line, epoch)
			}
		}
		var ls lockStatus
		if err := json.Unmarshal([]byte(c.mustRun("status", name, "-o", "json").stdout), &ls); err != nil {
			t.Fatal(err)
		}
		checkShares(t, ls)
		return lines[1], ls
	}

	t.Run("shared holders", func(t *testing.T) {
		row, got := show(t)
		if !strings.Contains(row, "held (shared, 2 holders)") {
			t.Errorf("the lock's row %q does not say it is held by 2 shared holders", row)
		}
		if got.Pending || got.Holder != "" || got.Epoch != epoch {
			t.Errorf("got %+v; want epoch %d, no holder of its own, nothing pending", got, epoch)
		}
		var listed []lockStatus
		if err := json.Unmarshal([]byte(c.mustRun("status", "--prefix", name, "-o", "json").stdout), &listed); err != nil || len(listed) != 1 {
			t.Fatalf("status --prefix: %v, %+v; want the one lock", err, listed)
		}
		checkShares(t, listed[0])
		w := c.mustRun("watch", name, "-o", "json", "--until", "held")
		var ch watchChange
		if err := json.Unmarshal([]byte(w.stdout), &ch); err != nil {
			t.Fatalf("watch printed %q: %v", w.stdout, err)
		}
		checkShares(t, ch.lockStatus)
	})

	wsdk, err := s3lock.New(c.ns.Client, c.ns.Bucket, s3lock.WithHolder("writer"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := wsdk.Acquire(t.Context(), name, s3lock.WithWait(2*time.Minute))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	testkit.Eventually(t, time.Minute, "the writer to wait for the shared holders", func() bool { return c.current(name).Pending })

	t.Run("a writer waits for them", func(t *testing.T) {
		row, st := show(t)
		if !strings.Contains(row, "held (shared); writer waits for 2 shared holders") {
			t.Errorf("the lock's row %q does not say that the writer waits for 2 shared holders", row)
		}
		if !st.Pending || st.Holder != "writer" || st.Epoch <= epoch || st.ExpiresInSeconds == nil {
			t.Errorf("got %+v; want the writer pending above epoch %d, with its expiry", st, epoch)
		}
		r := c.run("run", "--shared", "--wait", "0", name, "--", "true")
		if r.code != exitHeld || !strings.Contains(r.stderr, `held by "writer"`) || !strings.Contains(r.stderr, "waits for the shared holders before it") {
			t.Errorf("run --shared --wait 0 while the writer waits: %s; want exit %d, the writer named as waiting", r, exitHeld)
		}
		w := c.mustRun("watch", name, "-o", "text", "--until", "held")
		if !strings.Contains(w.stdout, "writer (epoch "+strconv.FormatUint(st.Epoch, 10)+") waits for 2 shared holders: ") ||
			!strings.Contains(w.stdout, "reader-a (lapses in ") || !strings.Contains(w.stdout, "reader-b (lapses in ") {
			t.Errorf("watch printed %q; want the writer waiting for reader-a and reader-b", w.stdout)
		}
	})

	for _, l := range []*s3lock.Lease{a, b} {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}

// TestShared_DoesNotMixWithSlots: --shared with --slots N > 1 is a usage
// error naming both, before anything is acquired.
func TestShared_DoesNotMixWithSlots(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("mixed")
	for _, args := range [][]string{
		{"run", "--shared", "--slots", "3", name, "--", "true"},
		{"acquire", "--slots", "2", "--shared", name},
	} {
		r := c.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--shared and --slots") || !strings.Contains(r.stderr, "do not mix") {
			t.Errorf("s3lock %q: %s; want a usage error naming --shared and --slots", args, r)
		}
	}
	if st := c.current(name); st.Epoch != 0 {
		t.Errorf("a refused --shared took epoch %d; want none", st.Epoch)
	}
	c.mustRun("run", "--shared", "--slots", "1", "--quiet", name, "--", "true")
}

// TestAcquire_SharedTokens: acquire --shared prints a token that carries
// its share; two of them hold the lock at once, which an acquire without
// --shared finds held by both. renew and release act on the share;
// force-release refuses the shared epoch and deletes a share with --share.
func TestAcquire_SharedTokens(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("tokens")
	var toks []tokenOutput
	for _, who := range []string{"step-a", "step-b"} {
		r := c.mustRun("acquire", "--shared", "--holder", who, "--lease", "1m", name)
		var tok tokenOutput
		if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil {
			t.Fatalf("%s: token %q: %v", who, r.stdout, err)
		}
		if tok.Share == "" || tok.Key != tok.Token.Key() || tok.Holder != who || !strings.Contains(r.stderr, "acquired share "+tok.Share) {
			t.Fatalf("%s: token %+v, stderr %q; want a share with its key", who, tok, r.stderr)
		}
		toks = append(toks, tok)
	}
	if toks[0].Epoch != toks[1].Epoch || toks[0].Share == toks[1].Share {
		t.Fatalf("tokens %+v and %+v; want two shares of one shared epoch", toks[0], toks[1])
	}
	epoch := strconv.FormatUint(toks[0].Epoch, 10)
	withToken := func(tok tokenOutput) []string {
		b, err := json.Marshal(tok)
		if err != nil {
			t.Fatal(err)
		}
		return append(c.without(envToken), envToken+"="+string(b))
	}

	r := c.run("acquire", "--wait", "0", name)
	if r.code != exitHeld || !strings.Contains(r.stderr, "held by 2 shared holders (epoch "+epoch+", ") || !strings.Contains(r.stderr, "until the shared holders have ended") {
		t.Errorf("acquire without --shared: %s; want exit %d, held by 2 shared holders", r, exitHeld)
	}
	if st := c.current(name); st.Pending || len(st.Holders) != 2 {
		t.Errorf("after the acquire that tried once: %+v; want the two shares and no writer left pending", st)
	}

	r = c.runWith(withToken(toks[0]), "", "renew", "-o", "json")
	var renewed tokenOutput
	if err := json.Unmarshal([]byte(r.stdout), &renewed); r.code != 0 || err != nil || renewed.Token != toks[0].Token || !renewed.ExpiresAt.After(toks[0].ExpiresAt) {
		t.Errorf("renew of a share: %s (%v); want the same token, a later expiry", r, err)
	}
	if r := c.runWith(withToken(toks[0]), "", "release"); r.code != 0 || !strings.Contains(r.stderr, "released share "+toks[0].Share) {
		t.Errorf("release of a share: %s; want it released", r)
	}
	if r := c.runWith(withToken(toks[0]), "", "release"); r.code != exitLost || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("a second release of the share: %s; want exit %d: a released share is gone, as a force-released one", r, exitLost)
	}
	if st := c.current(name); len(st.Holders) != 1 || st.Holders[0].Holder != "step-b" {
		t.Errorf("after step-a's release: %+v; want step-b's share alone", st)
	}

	r = c.run("force-release", name, "--epoch", epoch)
	if r.code != exitUsage || !strings.Contains(r.stderr, "is a shared epoch") || !strings.Contains(r.stderr, "--share "+toks[1].Share+" (step-b)") {
		t.Errorf("force-release of the shared epoch: %s; want a usage error naming --share %s", r, toks[1].Share)
	}
	if r := c.run("force-release", name, "--epoch", epoch, "--share", toks[1].Share, "--slot", "1"); r.code != exitUsage {
		t.Errorf("force-release with --share and --slot: %s; want a usage error", r)
	}
	if r := c.mustRun("force-release", name, "--epoch", epoch, "--share", toks[1].Share); !strings.Contains(r.stderr, "force-released share "+toks[1].Share) {
		t.Errorf("force-release --share: %s; want it to say the share was force-released", r)
	}
	if r := c.runWith(withToken(toks[1]), "", "renew"); r.code != exitLost {
		t.Errorf("renew of a force-released share: %s; want exit %d", r, exitLost)
	}
	if st := c.current(name); st.Held {
		t.Errorf("after both shares ended: %+v; want the lock not held", st)
	}
}

// TestRun_SharedWaitsAndExitsAsExclusive: a shared run waits for (or, with
// --wait 0, exits 3 at) a holder without --shared, and --max-hold stops its
// command and exits 4 as it does any run's; a lock set is taken shared
// whole.
func TestRun_SharedWaitsAndExitsAsExclusive(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name, other := c.name("excl/a"), c.name("excl/b")
	l, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range []string{"0", "2s"} {
		r := c.run("run", "--shared", "--wait", wait, name, "--", "true")
		if r.code != exitHeld || !strings.Contains(r.stderr, `held by "test-sdk" (epoch `) {
			t.Errorf("run --shared --wait %s on a held lock: %s; want exit %d naming the holder", wait, r, exitHeld)
		}
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	r := c.run("run", "--shared", "--lease", "2s", "--max-hold", "4s", name, "--", "sh", "-c", "sleep 30")
	if r.code != exitLost || !strings.Contains(r.stderr, "maximum hold of 4s") {
		t.Errorf("run --shared --max-hold 4s of a longer command: %s; want exit %d at the cap", r, exitLost)
	}

	c.sharedLease(other, "reader")
	if r := c.run("run", "--wait", "0", name, other, "--", "true"); r.code != exitHeld {
		t.Errorf("a set without --shared, one of its locks held shared: %s; want exit %d", r, exitHeld)
	}
	script := `printf '%s %s' "$S3LOCK_LOCKS" "$S3LOCK_KEY_2"`
	r = c.mustRun("run", "--shared", "--wait", "0", "--quiet", other, name, "--", "sh", "-c", script)
	if f := strings.Fields(r.stdout); len(f) != 2 || f[0] != "2" || !strings.HasPrefix(f[1], other+"/") || f[1] == (s3lock.Token{Name: other, Epoch: 1}).Key() {
		t.Errorf("the set's command printed %q; want 2 locks, the second's key a share of %s", r.stdout, other)
	}
}

// TestRun_AWriterWhoseWaitForSharedHoldersRunsOut: a run without --shared
// whose --wait runs out while shared holders hold the lock exits 3 (held),
// naming them, as it does when a holder without --shared holds it.
func TestRun_AWriterWhoseWaitForSharedHoldersRunsOut(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("long-plan")
	c.sharedLease(name, "reader")
	r := c.run("run", "--wait", "3s", name, "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, "a shared holder, reader (epoch ") {
		t.Errorf("run whose wait for a shared holder ran out: %s; want exit %d naming the shared holder", r, exitHeld)
	}
}
