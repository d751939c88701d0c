//go:build linux

package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The fault schedule. Pauses, blackholes and store outages last longer
// than a lease, so that the lease is lost and someone else takes over.
const (
	// gapMin and gapMax space the monkey's strikes; several faults may be
	// in force at once (at most one of each kind).
	gapMin, gapMax = 2 * time.Second, 5 * time.Second
	// pauseMin and pauseMax bound how much longer than the lease a holder
	// stays stopped: the lease lapses after lease + 2 s, then a waiter
	// takes over while the holder is still stopped.
	pauseMin, pauseMax = 2500 * time.Millisecond, 4 * time.Second
	// killHolderShare is how many kills strike the lock's holder; the rest
	// strike any process (a waiter, an `s3lock run` about to acquire).
	killHolderShare = 0.7
	// blackholeMin and blackholeMax bound how much longer than the lease a
	// proxied process's network swallows its requests.
	blackholeMin, blackholeMax = 500 * time.Millisecond, 2500 * time.Millisecond
	// windowMin and windowMax bound how long a delay or drop fault stays
	// on.
	windowMin, windowMax = 3 * time.Second, 6 * time.Second
	// dropShare is the share of write answers a drop fault drops.
	dropShare = 0.5
	// restartGap spaces store restarts: each one costs every holder its
	// lease, and the run must make progress in between.
	restartGap = 40 * time.Second
	// downMin and downMax bound how long the store stays down.
	downMin, downMax = 500 * time.Millisecond, 3 * time.Second
)

// faultKind is one kind of fault the monkey injects.
type faultKind string

const (
	faultPause     faultKind = "pause"
	faultKill      faultKind = "kill"
	faultBlackhole faultKind = "blackhole"
	faultDelay     faultKind = "delay"
	faultDrop      faultKind = "drop-response"
	faultRestart   faultKind = "store-restart"
)

// weights says how often the monkey picks each kind after its first round,
// in which it tries every kind once.
var weights = []struct {
	kind   faultKind
	weight int
}{{faultPause, 3}, {faultKill, 3}, {faultBlackhole, 2}, {faultDelay, 2}, {faultDrop, 2}, {faultRestart, 1}}

// monkey injects faults into a running lab.
type monkey struct {
	l       *lab
	rng     *rand.Rand // run's goroutine only
	actions sync.WaitGroup

	mu          sync.Mutex
	busy        map[faultKind]bool
	lastRestart time.Time
	restarts    int
}

func newMonkey(l *lab) *monkey {
	return &monkey{l: l, rng: rand.New(rand.NewPCG(l.sc.seed, 0x6d6f6e6b6579)), busy: map[faultKind]bool{}}
}

// run strikes until ctx ends, then waits for the faults in force to be
// undone (stopped processes continued, proxies healed, the store up).
func (m *monkey) run(ctx context.Context) {
	first := make([]faultKind, len(weights))
	for i, w := range weights {
		first[i] = w.kind
	}
	m.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	for sleep(ctx, gapMin+m.random(gapMax-gapMin)) {
		if len(first) > 0 {
			if m.strike(ctx, first[0]) {
				first = first[1:]
			}
			continue
		}
		m.strike(ctx, m.pick())
	}
	m.actions.Wait()
}

func (m *monkey) pick() faultKind {
	total := 0
	for _, w := range weights {
		total += w.weight
	}
	n := m.rng.IntN(total)
	for _, w := range weights {
		if n < w.weight {
			return w.kind
		}
		n -= w.weight
	}
	return faultPause
}

// strike starts a fault of kind, unless one is in force or it cannot strike
// now (nobody holds the lock, say); it reports whether it started one.
func (m *monkey) strike(ctx context.Context, kind faultKind) bool {
	m.mu.Lock()
	busy := m.busy[kind]
	m.mu.Unlock()
	if busy {
		return false
	}
	do := m.plan(ctx, kind)
	if do == nil {
		return false
	}
	m.setBusy(kind, true)
	m.actions.Go(func() {
		defer m.setBusy(kind, false)
		do(ctx)
	})
	return true
}

func (m *monkey) setBusy(kind faultKind, b bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busy[kind] = b
}

// plan returns the fault to inject, or nil if kind cannot strike now. A
// fault undoes itself when it ends, also when ctx ends early.
func (m *monkey) plan(ctx context.Context, kind faultKind) func(context.Context) {
	switch kind {
	case faultPause:
		return m.planPause(ctx)
	case faultKill:
		return m.planKill(ctx)
	case faultBlackhole, faultDelay, faultDrop:
		return m.planNetwork(ctx, kind)
	case faultRestart:
		return m.planRestart()
	}
	return nil
}

// holder returns the process that holds the lock, by the store, and its
// epoch.
func (m *monkey) holder(ctx context.Context) (*proc, s3lock.State) {
	st, err := m.l.lock.Current(ctx, lockName)
	if err != nil || !st.Held {
		return nil, st
	}
	return m.l.procs.named(st.Holder), st
}

// planPause stops the holder (an SDK worker, or the s3lock of an `s3lock
// run`, whose watchdog then kills its command) for longer than its lease.
func (m *monkey) planPause(ctx context.Context) func(context.Context) {
	p, st := m.holder(ctx)
	if p == nil {
		return nil
	}
	d := m.l.sc.leaseDuration() + pauseMin + m.random(pauseMax-pauseMin)
	return func(ctx context.Context) {
		if !p.signal(syscall.SIGSTOP) {
			return
		}
		m.l.events.add(event{kind: faultPause, proc: p.name, holder: true, epoch: st.Epoch, dur: d})
		sleep(ctx, d)
		p.signal(syscall.SIGCONT)
	}
}

// planKill kills the holder, or now and then any live process.
func (m *monkey) planKill(ctx context.Context) func(context.Context) {
	p, st := m.holder(ctx)
	holder := p != nil && m.rng.Float64() < killHolderShare
	if !holder {
		live := m.l.procs.live()
		if len(live) == 0 {
			return nil
		}
		p = live[m.rng.IntN(len(live))]
		holder = p.name == st.Holder && st.Held
	}
	return func(context.Context) {
		if p.signal(syscall.SIGKILL) {
			ev := event{kind: faultKill, proc: p.name, holder: holder}
			if holder {
				ev.epoch = st.Epoch
			}
			m.l.events.add(ev)
		}
	}
}

// planNetwork switches a fault on in a proxy: the holder's if it is behind
// one, else a random proxied slot's.
func (m *monkey) planNetwork(ctx context.Context, kind faultKind) func(context.Context) {
	if len(m.l.proxies) == 0 {
		return nil
	}
	var slot string
	if p, _ := m.holder(ctx); p != nil && m.l.proxies[p.slot] != nil {
		slot = p.slot
	} else {
		slots := make([]string, 0, len(m.l.proxies))
		for s := range m.l.proxies {
			slots = append(slots, s)
		}
		slot = slots[m.rng.IntN(len(slots))]
	}
	px := m.l.proxies[slot]
	d := windowMin + m.random(windowMax-windowMin)
	switch kind {
	case faultBlackhole:
		d = m.l.sc.leaseDuration() + blackholeMin + m.random(blackholeMax-blackholeMin)
		return func(ctx context.Context) { px.Blackhole(); sleep(ctx, d); px.Heal() }
	case faultDelay:
		return func(ctx context.Context) { px.Delay(m.l.sc.maxDelay()); sleep(ctx, d); px.Heal() }
	}
	return func(ctx context.Context) { px.Drop(dropShare); sleep(ctx, d); px.Heal() }
}

// planRestart kills the store and starts it again on the same data
// directory and port, unless it was restarted less than restartGap ago.
func (m *monkey) planRestart() func(context.Context) {
	down := downMin + m.random(downMax-downMin)
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.lastRestart) < restartGap {
		return nil
	}
	m.lastRestart = time.Now()
	return func(ctx context.Context) {
		if err := m.l.store.restart(context.WithoutCancel(ctx), down); err != nil {
			m.l.t.Errorf("restarting the store: %v", err)
			return
		}
		m.mu.Lock()
		m.restarts++
		m.mu.Unlock()
	}
}

func (m *monkey) restartCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restarts
}

// random returns a duration in [0, limit). Like every use of m.rng, it is
// called only from run's goroutine (plan runs there).
func (m *monkey) random(limit time.Duration) time.Duration {
	return time.Duration(m.rng.Int64N(int64(limit)))
}
