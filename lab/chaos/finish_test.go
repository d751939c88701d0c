//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
)

// pollEvery is how often the end of a run polls the lock's state.
const pollEvery = 100 * time.Millisecond

// workerFailed is the worker's exit code for a failure of its own (it could
// not write its history, say), which `s3lock run` passes through; the
// worker's main defines it too.
const workerFailed = 70

// outcome is what a run recorded and what the checks found.
type outcome struct {
	recs  []record.Record
	torn  int
	final Op
	h     *History
	// The checks of the history: nil when it passed.
	linearizable, exclusive, epochOrder error
	// storeClock is the check of the store's record (internal/witness):
	// succession, trust and cleanup by the store's clock; witnessed and
	// claims are how many writes it saw and how many deadlines it judged.
	storeClock        error
	witnessed, claims int
	// orphanFree is how long after its holder was killed the last lease
	// was free; -1 if the check could not run.
	orphanFree time.Duration
	takeovers  map[uint64]bool
	restarts   int
	elapsed    time.Duration
}

// run runs the scenario to its end and checks what it recorded.
func (l *lab) run() *outcome {
	ctx := l.t.Context()
	l.start = time.Now()
	monCtx, stopMon := context.WithCancel(ctx)
	mon := startMonitor(monCtx, l)
	l.t.Cleanup(func() { mon.stop(stopMon) }) // if the run ends early
	slotCtx, stopSlots := context.WithCancel(ctx)
	l.startSlots(slotCtx)
	var mk *monkey
	if l.sc.faults {
		mk = newMonkey(l)
	}
	l.chaos(ctx, mk)
	o := &outcome{orphanFree: l.windDown(ctx, stopSlots)}
	mon.stop(stopMon)
	for _, p := range l.proxies {
		p.Close() // and wait for the requests it delayed to reach the store
	}
	o.final = l.finalRead(ctx)
	l.store.kill()
	o.elapsed, o.takeovers = time.Since(l.start), mon.takeovers()
	if mk != nil {
		o.restarts = mk.restartCount()
	}
	l.check(o)
	return o
}

// chaos lets the processes contend for the scenario's duration, with the
// monkey striking if there is one.
func (l *lab) chaos(ctx context.Context, mk *monkey) {
	if mk == nil {
		sleep(ctx, l.sc.duration)
		return
	}
	mctx, stop := context.WithTimeout(ctx, l.sc.duration)
	defer stop()
	mk.run(mctx) // returns when every fault it struck is undone
}

// windDown ends the run: it kills the lock's holder (leaving its lease
// orphaned), stops every other process with SIGTERM, reports those that do
// not exit in time or leave processes behind, and returns how soon the
// orphaned lease was free (-1 if there was no holder to kill).
func (l *lab) windDown(ctx context.Context, stopSlots context.CancelFunc) time.Duration {
	holder, epoch := l.awaitHolder(ctx)
	l.procs.close()
	stopSlots()
	// The orphan is watched from the kill on, while the others wind down:
	// watched only after they exited, which under load takes seconds, it
	// would be seen free late and measured as freed late.
	free := make(chan time.Duration, 1)
	if holder != nil && holder.signal(syscall.SIGKILL) {
		killedAt := record.Now() // not a fault of the run: the figures do not count it
		go func() { free <- l.awaitFree(ctx, killedAt, epoch) }()
	} else {
		l.t.Errorf("orphan check: nobody held the lock within %s at the end of the run, so no lease was left orphaned", heldWithin)
		free <- -1
	}
	for _, p := range l.procs.live() {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range waitAll(l.procs.live(), l.sc.exitGrace()) {
		l.t.Errorf("process hung: %s did not exit within %s of SIGTERM; killed it\n%s", p.name, l.sc.exitGrace(), l.logTail(p.name))
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	l.slots.Wait()
	l.checkStrays()
	l.checkExits()
	return <-free
}

// awaitHolder waits until a live process of the run holds the lock.
func (l *lab) awaitHolder(ctx context.Context) (*proc, uint64) {
	ctx, cancel := context.WithTimeout(ctx, heldWithin)
	defer cancel()
	for {
		st, err := l.lock.Current(ctx, lockName)
		if err == nil && st.Held {
			if p := l.procs.named(st.Holder); p != nil {
				return p, st.Epoch
			}
		}
		if !sleep(ctx, pollEvery) {
			return nil, 0
		}
	}
}

// awaitFree returns how long after killedAt the orphaned lease of epoch
// was free, failing the test past orphanBound.
func (l *lab) awaitFree(ctx context.Context, killedAt int64, epoch uint64) time.Duration {
	orphanBound := l.sc.orphanBound()
	ctx, cancel := context.WithTimeout(ctx, 2*orphanBound)
	defer cancel()
	for {
		st, err := l.lock.Current(ctx, lockName)
		if err == nil && (!st.Held || st.Epoch != epoch) {
			free := time.Duration(record.Now() - killedAt)
			if free > orphanBound {
				l.t.Errorf("orphan check: the lease of epoch %d was free %s after its holder was killed; the bound is %s (lease + 5 s)", epoch, free, orphanBound)
			}
			return free
		}
		if !sleep(ctx, pollEvery) {
			l.t.Errorf("orphan check: the lease of epoch %d was still held %s after its holder was killed (state: %+v, err: %v)", epoch, 2*orphanBound, st, err)
			return -1
		}
	}
}

// checkStrays reports (and kills) processes of the run that outlived it:
// watchdogs and commands of `s3lock run`s, which are not the suite's children.
func (l *lab) checkStrays() {
	deadline := time.Now().Add(strayGrace)
	for {
		left := strays(l.bins.dir, l.procs.snapshot())
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for pid, cmdline := range left {
				l.t.Errorf("process hung: pid %d outlived the run by %s (killed it): %s", pid, strayGrace, cmdline)
				killPid(pid)
			}
			return
		}
		time.Sleep(pollEvery)
	}
}

// checkExits fails the test for a worker that exited with an error of its
// own (not one the suite killed), and an `s3lock run` that was misused.
func (l *lab) checkExits() {
	for _, p := range l.procs.snapshot() {
		p.mu.Lock()
		code, killed := p.code, p.killed
		p.mu.Unlock()
		switch {
		case killed:
		case !p.run && code != 0:
			l.t.Errorf("worker %s exited with %d\n%s", p.name, code, l.logTail(p.name))
		case p.run && code == workerFailed:
			l.t.Errorf("the command of s3lock run %s failed (exit %d)\n%s", p.name, code, l.logTail(p.name))
		case p.run && (code == 2 || code == 126 || code == 127):
			l.t.Errorf("s3lock run %s exited with %d (usage, or its command could not run)\n%s", p.name, code, l.logTail(p.name))
		}
	}
}

// finalRead reads the register once every process is gone: the operation
// that closes the history.
func (l *lab) finalRead(ctx context.Context) Op {
	var lastErr error
	for range 10 {
		call := record.Now()
		out, err := l.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(registerKey)})
		if err != nil {
			lastErr = err
			sleep(ctx, pollEvery)
			continue
		}
		var b struct {
			Value int64 `json:"value"`
		}
		err = json.NewDecoder(io.LimitReader(out.Body, 1<<16)).Decode(&b)
		_ = out.Body.Close()
		if err != nil {
			l.t.Fatalf("final read: decoding the register: %v", err)
		}
		return Op{Proc: "test", Kind: OpRead, Call: call, Return: record.Now(), Value: b.Value}
	}
	l.t.Fatalf("final read of the register failed: %v", lastErr)
	return Op{}
}

// check reads the histories and runs the three checks on them.
func (l *lab) check(o *outcome) {
	recs, torn, err := record.ReadDir(l.history)
	if err != nil {
		l.t.Fatal(err)
	}
	if len(recs) == 0 {
		l.t.Fatalf("no history was recorded (logs in %s)", l.logs)
	}
	o.recs, o.torn = recs, torn
	o.h = NewHistory(recs, o.final)
	o.linearizable = CheckLinearizable(o.h.Ops, filepath.Join(l.dir, "linearizability.html"))
	o.exclusive = CheckExclusive(o.h.Sections)
	o.epochOrder = CheckEpochOrder(o.h.Sections)
	claims := Claims(recs, lockName)
	o.storeClock = l.witness.Check(claims...)
	o.witnessed, o.claims = len(l.witness.Writes()), len(claims)
	if o.witnessed == 0 {
		l.t.Errorf("the store's witness saw no write to the lock's epoch objects (logs in %s)", l.logs)
	}
}
