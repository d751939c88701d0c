//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Slot locks (--slots N, PROTOCOL.md §14): at most N holders at once, each
// with its slot and that slot's fencing token; s3lock run and acquire take a
// slot, status lists the holders, force-release --slot frees one, and a
// holder that asks for another N exits 7.

// slotEntry is one critical section of the pool test, as its worker
// recorded it on entering.
type slotEntry struct {
	who         string
	slot, slots int
	epoch       uint64
	inside      int // markers in the directory, the worker's own included
}

// slotWork is the critical section of the pool test, for the s3lock run
// workers: enter (a marker file), count who is inside, record it with the
// slot and epoch from the environment, work a little, leave.
const slotWork = `set -e
marker="$1/$2.$$"
: > "$marker"
n=$(ls "$1" | wc -l)
echo "$2 $S3LOCK_SLOT $S3LOCK_SLOTS $S3LOCK_EPOCH $n" >> "$3"
sleep 0.2
rm "$marker"`

// sdkSlotWork is slotWork for the SDK workers, under lease.
func sdkSlotWork(inside, log, who string, l *s3lock.Lease) error {
	marker := filepath.Join(inside, who+"."+strconv.FormatUint(l.Token().Epoch, 10)+"."+strconv.Itoa(l.Token().Slot))
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return err
	}
	entries, err := os.ReadDir(inside)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// One write with O_APPEND: lines of concurrent workers never mix.
	_, err = fmt.Fprintf(f, "%s %d %d %d %d\n", who, l.Token().Slot, max(l.Token().Slots, 1), l.Token().Epoch, len(entries))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	return os.Remove(marker)
}

// readSlotLog returns the pool test's entries in the order the critical
// sections ran.
func readSlotLog(t *testing.T, log string) []slotEntry {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []slotEntry
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 5 {
			t.Fatalf("log line %q: want who, slot, slots, epoch and how many were inside", line)
		}
		var e slotEntry
		var errs [4]error
		e.who = f[0]
		e.slot, errs[0] = strconv.Atoi(f[1])
		e.slots, errs[1] = strconv.Atoi(f[2])
		e.epoch, errs[2] = strconv.ParseUint(f[3], 10, 64)
		e.inside, errs[3] = strconv.Atoi(f[4])
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestSlots_TwelveWorkersShareThreeSlots is the acceptance test of slot
// locks in the CLI: 12 workers — 6 of them separate `s3lock run --slots 3`
// processes, 6 goroutines of this test using the SDK with WithSlots(3) — each do
// work under one 3-slot lock, several rounds: never more than 3 inside at
// once (counted by the workers' marker files), the slots used together,
// every worker served every round, and each slot's fencing tokens strictly
// increasing in the order its critical sections ran.
func TestSlots_TwelveWorkersShareThreeSlots(t *testing.T) {
	t.Parallel()
	const slots, procs, goroutines, rounds = 3, 6, 6, 3
	c := newCLI(t)
	name := c.name("pool")
	inside, log := filepath.Join(c.dir, "inside"), filepath.Join(c.dir, "log")
	if err := os.Mkdir(inside, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for p := range procs {
		who := fmt.Sprintf("run-%d", p)
		wg.Go(func() {
			for round := range rounds {
				cmd := c.command(ctx, "run", "--slots", strconv.Itoa(slots), "--holder", who, "--wait", "2m", "--quiet", name, "--",
					"sh", "-c", slotWork, "sh", inside, who, log)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s round %d: %v\n%s", who, round, err, out)
					return
				}
			}
		})
	}
	for g := range goroutines {
		who := fmt.Sprintf("sdk-%d", g)
		sdk, err := s3lock.New(c.ns.Client, c.ns.Bucket, s3lock.WithHolder(who))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for round := range rounds {
				// FIFO, as s3lock run waits by default: one line for all.
				l, err := sdk.Acquire(ctx, name, s3lock.WithSlots(slots), s3lock.WithOrder(s3lock.OrderFIFO))
				if err != nil {
					t.Errorf("%s round %d: Acquire: %v", who, round, err)
					return
				}
				werr := sdkSlotWork(inside, log, who, l)
				if err := errors.Join(werr, l.Release(ctx)); err != nil {
					t.Errorf("%s round %d: %v", who, round, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	entries := readSlotLog(t, log)
	served := map[string]int{}
	lastEpoch := map[int]uint64{}
	maxInside := 0
	for i, e := range entries {
		served[e.who]++
		maxInside = max(maxInside, e.inside)
		if e.slots != slots || e.slot < 1 || e.slot > slots {
			t.Errorf("entry %d (%s): slot %d of %d; want a slot of %d", i, e.who, e.slot, e.slots, slots)
		}
		if e.epoch <= lastEpoch[e.slot] {
			t.Errorf("entry %d (%s): slot %d at epoch %d after epoch %d; a slot's fencing tokens must increase",
				i, e.who, e.slot, e.epoch, lastEpoch[e.slot])
		}
		lastEpoch[e.slot] = e.epoch
	}
	if len(entries) != (procs+goroutines)*rounds {
		t.Errorf("%d critical sections ran; want %d", len(entries), (procs+goroutines)*rounds)
	}
	for p := range procs {
		if who := fmt.Sprintf("run-%d", p); served[who] != rounds {
			t.Errorf("%s was served %d times; want %d", who, served[who], rounds)
		}
	}
	for g := range goroutines {
		if who := fmt.Sprintf("sdk-%d", g); served[who] != rounds {
			t.Errorf("%s was served %d times; want %d", who, served[who], rounds)
		}
	}
	t.Logf("%d critical sections, at most %d inside at once, per slot up to epoch %v", len(entries), maxInside, lastEpoch)
	if maxInside > slots {
		t.Errorf("%d workers were inside at once; the lock admits %d", maxInside, slots)
	}
	if maxInside < 2 {
		t.Errorf("at most %d worker was inside at once: the %d slots were never used together", maxInside, slots)
	}
	if st := c.current(name); st.Slots != slots || len(st.Holders) != 0 || st.Phase() != s3lock.PhaseFree {
		t.Errorf("after every worker: %+v; want a free lock of %d slots", st, slots)
	}
}

// slotLease takes a slot of the lock name for holder, with its own client;
// the test releases it at the end unless it was released.
func (c *cli) slotLease(name, holder string, slots int, opts ...s3lock.Option) *s3lock.Lease {
	c.t.Helper()
	sdk, err := s3lock.New(c.ns.Client, c.ns.Bucket, s3lock.WithHolder(holder))
	if err != nil {
		c.t.Fatal(err)
	}
	l, err := sdk.TryAcquire(c.t.Context(), name, append([]s3lock.Option{s3lock.WithSlots(slots)}, opts...)...)
	if err != nil {
		c.t.Fatalf("%s: TryAcquire(WithSlots(%d)): %v", holder, slots, err)
	}
	c.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// singleLine fails the test unless r printed nothing on stdout and one line
// on stderr, and returns that line.
func (r result) singleLine(t *testing.T) string {
	t.Helper()
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.stdout != "" || line == "" || strings.Contains(line, "\n") {
		t.Fatalf("want nothing on stdout and one line on stderr: %s", r)
	}
	return line
}

// status NAME and status --prefix show a slot lock with how many of its
// slots are held and a row per holder (table), slots and holders (JSON);
// a mutex's output keeps its fields and gets neither.
func TestSlots_StatusShowsEveryHolder(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pool, solo := c.name("team/pool"), c.name("team/solo")
	a := c.slotLease(pool, "worker-a", 3, s3lock.WithMetadata(map[string]string{"job": "a"}))
	b := c.slotLease(pool, "worker-b", 3)
	mutex, err := c.sdk.TryAcquire(t.Context(), solo)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mutex.Release(context.Background()) }()
	bySlot := map[int]*s3lock.Lease{a.Token().Slot: a, b.Token().Slot: b}
	if len(bySlot) != 2 {
		t.Fatalf("both holders got slot %d", a.Token().Slot)
	}
	marker := c.current(pool)

	// checkRows checks the pool's row and the rows of its two holders.
	checkRows := func(t *testing.T, lines []string) {
		t.Helper()
		if f := strings.Fields(lines[0]); len(f) != 11 || f[0] != pool || strings.Join(f[1:6], " ") != "held (2 of 3 slots)" ||
			f[6] != strconv.FormatUint(marker.Epoch, 10) || f[7] != "-" || f[8] != "-" || f[10] != "0" {
			t.Fatalf("row %q; want %s held, 2 of 3 slots, at its marker's epoch %d, no one holder, no expiry", lines[0], pool, marker.Epoch)
		}
		for k, line := range lines[1:3] {
			f := strings.Fields(line)
			slot, _ := strconv.Atoi(f[1])
			l := bySlot[slot]
			if len(f) != 9 || f[0] != "slot" || l == nil || f[2] != "held" || f[3] != strconv.FormatUint(l.Token().Epoch, 10) ||
				f[4] != l.State().Holder || f[5] != "in" || f[8] != "-" {
				t.Fatalf("row %q; want a held slot with its epoch, holder and expiry", line)
			}
			if k == 1 && slot <= mustAtoi(t, strings.Fields(lines[1])[1]) {
				t.Errorf("holder rows %q, %q are not sorted by slot", lines[1], line)
			}
			if _, err := time.Parse(time.RFC3339, f[7]); err != nil {
				t.Errorf("row %q: the acquisition time: %v", line, err)
			}
		}
	}

	t.Run("table for NAME", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(c.mustRun("status", pool).stdout), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
			t.Fatalf("want a header, the lock and its two holders:\n%s", strings.Join(lines, "\n"))
		}
		checkRows(t, lines[1:])
	})

	t.Run("table for a prefix", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(c.mustRun("status", "--prefix", c.name("team/")).stdout), "\n")
		if len(lines) != 5 {
			t.Fatalf("want a header, the pool and its two holders, and the mutex:\n%s", strings.Join(lines, "\n"))
		}
		checkRows(t, lines[1:4])
		if f := strings.Fields(lines[4]); len(f) != 8 || f[0] != solo || f[1] != "held" || f[3] != "test-sdk" {
			t.Fatalf("row %q; want the mutex %s held by test-sdk", lines[4], solo)
		}
	})

	// checkJSON checks the pool's JSON object.
	checkJSON := func(t *testing.T, got lockStatus) {
		t.Helper()
		if got.Name != pool || got.State != "held" || !got.Held || got.Slots != 3 || got.Epoch != marker.Epoch ||
			got.Holder != "" || got.ExpiresInSeconds != nil || len(got.Holders) != 2 {
			t.Fatalf("pool = %+v; want held, 3 slots, 2 holders, no one holder or expiry of its own", got)
		}
		for k, h := range got.Holders {
			l := bySlot[h.Slot]
			if l == nil || h.Epoch != l.Token().Epoch || h.Key != l.Token().Key() || h.Holder != l.State().Holder || h.AcquiredAt.IsZero() ||
				h.ExpiresAt.IsZero() || h.ExpiresInSeconds == nil || *h.ExpiresInSeconds <= 0 || h.LeaseDuration != "1m0s" {
				t.Errorf("holders[%d] = %+v; want a held slot with its epoch, key, holder and expiry", k, h)
			}
			if k > 0 && h.Slot <= got.Holders[k-1].Slot {
				t.Errorf("holders are not sorted by slot: %+v", got.Holders)
			}
		}
		if h := got.Holders[0]; (h.Slot == a.Token().Slot) != (h.Metadata["job"] == "a") {
			t.Errorf("holders[0] = %+v; the metadata belongs to slot %d", h, a.Token().Slot)
		}
	}

	t.Run("json for NAME", func(t *testing.T) {
		var got lockStatus
		r := c.mustRun("status", pool, "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		checkJSON(t, got)
	})

	t.Run("json for a prefix", func(t *testing.T) {
		r := c.mustRun("status", "--prefix", c.name("team/"), "-o", "json")
		var got []lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if len(got) != 2 {
			t.Fatalf("got %+v; want the pool and the mutex", got)
		}
		checkJSON(t, got[0])
		var raw []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
			t.Fatal(err)
		}
		m := raw[1]
		_, hasSlots := m["slots"]
		_, hasHolders := m["holders"]
		if m["name"] != solo || m["holder"] != "test-sdk" || m["state"] != "held" || m["expires_in_seconds"] == nil || hasSlots || hasHolders {
			t.Errorf("the mutex = %v; want its fields as before, without slots or holders", m)
		}
	})

	if err := errors.Join(a.Release(t.Context()), b.Release(t.Context())); err != nil {
		t.Fatal(err)
	}
	r := c.mustRun("status", pool, "-o", "json")
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if hs, ok := raw["holders"].([]any); !ok || len(hs) != 0 || raw["state"] != "free" || raw["slots"] != float64(3) {
		t.Errorf("with no slot held: %s; want a free lock of 3 slots with \"holders\": []", r.stdout)
	}
	if line := strings.Split(c.mustRun("status", pool).stdout, "\n")[1]; !strings.Contains(line, "free (0 of 3 slots)") {
		t.Errorf("row %q; want the pool free, 0 of 3 slots held", line)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A holder that asks for another number of slots than the lock admits, or
// for a mutex, exits 7 at once with one line that names the remedy, and run
// does not start its command; watch refuses a slot lock the same way.
func TestSlots_AnotherNumberOfSlotsExits7(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pool")
	c.slotLease(name, "holder", 3)
	ran := filepath.Join(c.dir, "ran")
	for _, tc := range []struct {
		what string
		args []string
		says string
	}{
		{"run as a mutex", []string{"run", "--wait", "0", name, "--", "touch", ran}, "asked for as a mutex"},
		{"run with --slots 2, waiting", []string{"run", "--slots", "2", "--wait", "1m", name, "--", "touch", ran}, "--slots 2 was given"},
		{"acquire with --slots 1", []string{"acquire", "--slots", "1", name}, "asked for as a mutex"},
		{"acquire with --slots 5 in order", []string{"acquire", "--slots", "5", "--order", "newest", name}, "--slots 5 was given"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			start := time.Now()
			r := c.run(tc.args...)
			line := r.singleLine(t)
			if r.code != exitSlotsMismatch || !strings.Contains(line, tc.says) || !strings.Contains(line, fmt.Sprintf("lock %q admits 3 holders", name)) ||
				!strings.Contains(line, "use --slots 3") || strings.Contains(line, "--help'") {
				t.Fatalf("got %s; want exit %d saying the lock admits 3 holders, %q and the remedy", r, exitSlotsMismatch, tc.says)
			}
			// At once: a mismatch is not waited out (generously below --wait).
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("the mismatch took %s to report", took)
			}
		})
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("a run whose --slots did not match started its command (%v)", err)
	}
	if st := c.current(name); st.Slots != 3 || len(st.Holders) != 1 {
		t.Errorf("after the mismatches the lock is %+v; want 3 slots, its one holder", st)
	}

	for _, args := range [][]string{{"watch", name, "--until", "not-held"}, {"watch", name, "-o", "json"}} {
		r := c.run(args...)
		line := r.singleLine(t)
		if r.code != exitSlotsMismatch || !strings.Contains(line, "admits 3 holders") || !strings.Contains(line, "s3lock status "+name) {
			t.Errorf("s3lock %q: %s; want exit %d, one line pointing to status", args, r, exitSlotsMismatch)
		}
	}
}

// A lock whose slots are all held turns away run --wait 0 and a wait that
// runs out (exit 3), saying that all N slots are held and which runs out
// first; the progress says so while it waits.
func TestSlots_AllSlotsHeld(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pool")
	a, b := c.slotLease(name, "holder-a", 2), c.slotLease(name, "holder-b", 2)
	holders := map[int]string{a.Token().Slot: "holder-a", b.Token().Slot: "holder-b"}

	r := c.run("run", "--slots", "2", "--wait", "0", name, "--", "true")
	line := r.singleLine(t)
	if r.code != exitHeld || !strings.Contains(line, fmt.Sprintf("all 2 slots of lock %q in bucket ", name)) ||
		!strings.Contains(line, " are held; the first to run out is slot") ||
		!strings.Contains(line, "use --wait to wait for a slot") {
		t.Fatalf("--wait 0: %s; want exit %d saying all 2 slots are held", r, exitHeld)
	}
	slot := mustAtoi(t, strings.TrimSuffix(strings.Fields(strings.SplitAfter(line, "is slot ")[1])[0], ","))
	if !strings.Contains(line, fmt.Sprintf("held by %q", holders[slot])) {
		t.Errorf("%q: slot %d is held by %s", line, slot, holders[slot])
	}

	r = c.run("acquire", "--slots", "2", "--wait", "1s", name)
	if r.code != exitHeld || r.stdout != "" {
		t.Fatalf("--wait 1s: %s; want exit %d and no token", r, exitHeld)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, fmt.Sprintf("after waiting 1s (--wait), all 2 slots of lock %q in bucket ", name)) {
		t.Errorf("last line %q; want it to say all 2 slots are still held", last)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("waiting for lock %q: all 2 slots of lock %q in bucket ", name, name)) {
		t.Errorf("the progress does not say that all slots are held:\n%s", r.stderr)
	}
}

// acquire --slots prints a token that names its slot; renew and release
// --token act on that slot, and leave the other holder alone.
func TestSlots_TokenOfASlot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pipeline-pool")
	r := c.mustRun("acquire", "--slots", "2", "--holder", "step-1", name)
	tok := parseTokenOutput(t, r.stdout)
	if tok.Slot < 1 || tok.Slot > 2 || tok.Slots != 2 || tok.Name != name || tok.Epoch != 1 || tok.Holder != "step-1" ||
		!strings.Contains(r.stderr, fmt.Sprintf("acquired slot %d of 2 of lock %q (epoch 1", tok.Slot, name)) {
		t.Fatalf("token %+v, stderr %q; want slot 1 or 2 of 2 of %s at epoch 1", tok, r.stderr, name)
	}
	other := c.slotLease(name, "other", 2)
	st := c.current(name)
	if len(st.Holders) != 2 {
		t.Fatalf("the lock is %+v; want both slots held", st)
	}
	for _, h := range st.Holders {
		if h.Slot == tok.Slot && (h.Holder != "step-1" || h.Epoch != tok.Epoch || h.Key != tok.Key) {
			t.Fatalf("slot %d = %+v; want the token's lease (%+v)", h.Slot, h, tok)
		}
	}
	if other.Token().Slot == tok.Slot {
		t.Fatalf("the token's slot %d was granted twice", tok.Slot)
	}

	r = c.mustRun("renew", "--token", tokenJSON(t, tok), "-o", "json")
	if again := parseTokenOutput(t, r.stdout); again.Token != tok.Token {
		t.Fatalf("renew printed %+v; want the same token", again)
	}
	r = c.mustRun("release", "--token", tokenJSON(t, tok))
	if !strings.Contains(r.stderr, fmt.Sprintf("released slot %d of 2 of lock %q (epoch 1)", tok.Slot, name)) {
		t.Errorf("release said %q", r.stderr)
	}
	st = c.current(name)
	if len(st.Holders) != 1 || st.Holders[0].Slot != other.Token().Slot || other.Err() != nil {
		t.Fatalf("after the release the lock is %+v (other: %v); want only the other slot held", st, other.Err())
	}
	r = c.mustRun("release", "--token", tokenJSON(t, tok))
	if !strings.Contains(r.stderr, fmt.Sprintf("slot %d of 2 of lock %q (epoch 1) was already released", tok.Slot, name)) {
		t.Errorf("a second release said %q", r.stderr)
	}
	// The freed slot goes to the next acquirer, at its next epoch.
	next := parseTokenOutput(t, c.mustRun("acquire", "--slots", "2", "--wait", "0", "--quiet", name).stdout)
	if next.Slot != tok.Slot || next.Epoch != tok.Epoch+1 {
		t.Errorf("the next acquirer got slot %d at epoch %d; want slot %d at epoch %d", next.Slot, next.Epoch, tok.Slot, tok.Epoch+1)
	}
	c.mustRun("release", "--quiet", "--token", tokenJSON(t, next))
}

// --slots outside 1 to 64 is a usage error that writes nothing; --slots 1 is
// a plain mutex, and a mutex's command sees S3LOCK_SLOT=0 and S3LOCK_SLOTS=1
// whatever it inherited.
func TestSlots_FlagValidation(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pool")
	for _, tc := range []struct{ value, says string }{
		{"0", "0 is out of range: a lock admits 1 to 64 holders"},
		{"65", "65 is out of range"},
		{"-1", "out of range"},
		{"three", "not a whole number"},
		{"", "not a whole number"},
	} {
		for _, args := range [][]string{
			{"run", "--slots", tc.value, name, "--", "true"},
			{"acquire", name, "--slots=" + tc.value},
		} {
			r := c.run(args...)
			line := r.singleLine(t)
			if r.code != exitUsage || !strings.Contains(line, `"--slots"`) || !strings.Contains(line, tc.says) || !strings.Contains(line, "--help'") {
				t.Errorf("s3lock %q: %s; want exit %d saying %q, with the --help hint", args, r, exitUsage, tc.says)
			}
		}
	}
	if st := c.current(name); st.Epoch != 0 {
		t.Fatalf("a rejected --slots wrote to the lock: %+v", st)
	}

	env := append(c.without(), "S3LOCK_SLOT=9", "S3LOCK_SLOTS=9") // as inside another s3lock run
	r := c.runWith(env, "", "run", "--slots", "1", "--quiet", name, "--", "sh", "-c", `printf '%s/%s/%s' "$S3LOCK_SLOT" "$S3LOCK_SLOTS" "$S3LOCK_EPOCH"`)
	if r.code != 0 || r.stdout != "0/1/1" {
		t.Fatalf("run --slots 1: %s; want the command to see slot 0 of 1 at epoch 1", r)
	}
	if st := c.current(name); st.Slots != 0 || st.Epoch != 1 || !st.Released {
		t.Fatalf("after run --slots 1 the lock is %+v; want a mutex released at epoch 1", st)
	}

	r = c.mustRun("run", "--help")
	for _, want := range []string{"--slots", "S3LOCK_SLOT ", "S3LOCK_SLOTS", "7    the lock admits another number of holders"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}

// force-release --slot releases one slot's epoch, whoever holds it: its
// holder finds its lease force-released, the other slots stay held, and the
// slot goes to the next acquirer.
func TestSlots_ForceReleaseOfASlot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pool")
	stuck := c.slotLease(name, "crashed", 2, s3lock.WithoutAutoRenew())
	other := c.slotLease(name, "other", 2)
	epoch := strconv.FormatUint(stuck.Token().Epoch, 10)

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"force-release", name, "--epoch", epoch, "--slot", "0"}, exitUsage, "slot 0 is outside [1, 64]"},
		{[]string{"force-release", name, "--epoch", epoch, "--slot", "65"}, exitUsage, "slot 65"},
		{[]string{"force-release", name, "--epoch", "9", "--slot", strconv.Itoa(stuck.Token().Slot)}, exitError, "no such epoch"},
	} {
		r := c.run(tc.args...)
		if line := r.singleLine(t); r.code != tc.code || !strings.Contains(line, tc.says) {
			t.Errorf("s3lock %q: %s; want exit %d saying %q", tc.args, r, tc.code, tc.says)
		}
	}

	r := c.mustRun("force-release", name, "--epoch", epoch, "--slot", strconv.Itoa(stuck.Token().Slot), "--holder", "oncall")
	if !strings.Contains(r.stderr, fmt.Sprintf("released epoch %s of slot %d of lock %q", epoch, stuck.Token().Slot, name)) {
		t.Errorf("force-release said %q", r.stderr)
	}
	if err := stuck.Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Errorf("the slot's holder renewed: %v; want ErrLeaseLost", err)
	} else if reason := lostReason(err); reason != s3lock.LostForceReleased {
		t.Errorf("the slot's holder lost its lease as %v; want %v", reason, s3lock.LostForceReleased)
	}
	st := c.current(name)
	if len(st.Holders) != 1 || st.Holders[0].Slot != other.Token().Slot || other.Err() != nil {
		t.Fatalf("after force-release the lock is %+v (other: %v); want only the other slot held", st, other.Err())
	}
	r = c.mustRun("run", "--slots", "2", "--wait", "0", "--quiet", name, "--", "sh", "-c", `printf '%s/%s' "$S3LOCK_SLOT" "$S3LOCK_EPOCH"`)
	if want := fmt.Sprintf("%d/%d", stuck.Token().Slot, stuck.Token().Epoch+1); r.stdout != want {
		t.Errorf("the next run got slot/epoch %q; want %q", r.stdout, want)
	}
}

// Regression: --stats of a slot run showed the lock "held at exit" and its
// slot released on a line of its own (the SDK names a slot lease by its
// slot after the acquisition); the lease's events count for the lock.
func TestSlots_StatsCountTheSlotForTheLock(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("pool")
	r := c.mustRun("run", "--slots", "2", "--stats", "--quiet", name, "--", "true")
	var locks []string
	for line := range strings.Lines(r.stderr) {
		if strings.HasPrefix(line, "s3lock: stats: lock ") {
			locks = append(locks, strings.TrimSpace(line))
		}
	}
	want := fmt.Sprintf(`s3lock: stats: lock %q: waited `, name)
	if len(locks) != 1 || !strings.HasPrefix(locks[0], want) || !strings.HasSuffix(locks[0], "acquired epoch 1; renewals: 0 ok, 0 failed; released") {
		t.Errorf("stats lines %q; want one for %s, acquired and released", locks, name)
	}
}
