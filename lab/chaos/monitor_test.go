//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// monitorEvery is how often the monitor reads the lock's state: often
// enough to read each epoch object before a later holder's history cleanup
// may delete it (cleanup keeps the newest ten).
const monitorEvery = 100 * time.Millisecond

// maxLeaseObject bounds the monitor's read of an epoch object: s3lock
// writes none larger (its maxPayloadBytes, 64 KiB).
const maxLeaseObject = 64 << 10

// monitor watches the lock from the suite's side, straight at the store:
// when the epoch moves on, it reads the epochs it passed and tells a handoff
// (the epoch was released) from a takeover (it lapsed).
type monitor struct {
	l    *lab
	done chan struct{}

	mu       sync.Mutex
	newest   uint64
	lapsed   map[uint64]bool // epoch -> it lapsed (true) or was released (false)
	unknown  int             // epochs gone before the monitor could read them
	problems int             // reads that failed (the store was down, say)
}

func startMonitor(ctx context.Context, l *lab) *monitor {
	m := &monitor{l: l, done: make(chan struct{}), lapsed: map[uint64]bool{}}
	go m.loop(ctx)
	return m
}

func (m *monitor) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := m.l.lock.Current(ctx, lockName)
		if err != nil {
			m.note(func() { m.problems++ })
			continue
		}
		m.mu.Lock()
		from := m.newest
		m.newest = max(m.newest, st.Epoch)
		m.mu.Unlock()
		for e := max(from, 1); e < st.Epoch; e++ {
			m.classify(ctx, e)
		}
	}
}

// classify reads epoch e, which a later epoch has followed.
func (m *monitor) classify(ctx context.Context, e uint64) {
	out, err := m.l.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.l.bucket), Key: aws.String(s3lock.Token{Name: lockName, Epoch: e}.Key())})
	if err != nil {
		m.note(func() { m.unknown++ })
		return
	}
	defer out.Body.Close()
	var p struct {
		Released bool `json:"expired"`
	}
	if err := json.NewDecoder(io.LimitReader(out.Body, maxLeaseObject)).Decode(&p); err != nil {
		m.note(func() { m.unknown++ })
		return
	}
	m.note(func() { m.lapsed[e] = !p.Released })
}

func (m *monitor) note(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

// stop ends the monitor and waits for it.
func (m *monitor) stop(cancel context.CancelFunc) {
	cancel()
	<-m.done
}

// takeovers returns the epochs that lapsed and were taken over.
func (m *monitor) takeovers() map[uint64]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[uint64]bool{}
	for e, lapsed := range m.lapsed {
		if lapsed {
			out[e] = true
		}
	}
	return out
}

// event is one fault the suite injected into a process.
type event struct {
	kind   faultKind // faultPause or faultKill
	proc   string
	holder bool   // the process held the lock (by the store) when it struck
	epoch  uint64 // the epoch it held
	at     int64  // CLOCK_MONOTONIC
	dur    time.Duration
}

// eventLog collects the events of a run.
type eventLog struct {
	mu  sync.Mutex
	all []event
}

func (e *eventLog) add(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.at == 0 {
		ev.at = record.Now()
	}
	e.all = append(e.all, ev)
}

func (e *eventLog) list() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]event(nil), e.all...)
}
