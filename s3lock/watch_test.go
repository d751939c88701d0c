package s3lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// watchEvent is one state a watcher yielded, reduced to what changes.
type watchEvent struct {
	epoch  uint64
	phase  s3lock.Phase
	holder string
}

// startWatch watches name with c until ctx ends, sending each state on the
// returned channel.
func startWatch(ctx context.Context, t *testing.T, c *s3lock.Client, name string) <-chan watchEvent {
	t.Helper()
	events := make(chan watchEvent, 1000)
	go func() {
		defer close(events)
		for st, err := range c.Watch(ctx, name) {
			if err != nil {
				t.Errorf("Watch yielded %v", err)
				return
			}
			events <- watchEvent{epoch: st.Epoch, phase: st.Phase(), holder: st.Holder}
		}
	}()
	return events
}

// nextEvent returns the next state the watcher yields, within limit.
func nextEvent(t *testing.T, events <-chan watchEvent, limit time.Duration) watchEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(limit):
		t.Fatalf("no change seen within %s", limit)
	}
	return watchEvent{}
}

func TestWatch_SeesEveryHandoffAndALapse(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("leader")
	counter, withCounter := counting()
	watcher := newLockClient(t, ns, "follower", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)}, withCounter)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	events := startWatch(ctx, t, watcher, name)
	if ev := nextEvent(t, events, 5*time.Second); ev.phase != s3lock.PhaseFree {
		t.Fatalf("first state %+v; want the lock free (never held)", ev)
	}

	// The lock changes hands 20 times, at once: each holder's successor is
	// already waiting in Acquire, and each holds it for three poll
	// intervals, or until the watcher has seen its epoch held, if that takes
	// longer (on a loaded machine a poll came late and missed a 150 ms
	// holder). The watcher sees every epoch held.
	var seenMu sync.Mutex
	seen := map[uint64]chan struct{}{}
	seenCh := func(e uint64) chan struct{} {
		seenMu.Lock()
		defer seenMu.Unlock()
		if seen[e] == nil {
			seen[e] = make(chan struct{})
		}
		return seen[e]
	}
	start := time.Now()
	counter.Reset()
	leaders := []*s3lock.Client{newLockClient(t, ns, "leader-a", []s3lock.Option{s3lock.WithPollInterval(10 * time.Millisecond)}),
		newLockClient(t, ns, "leader-b", []s3lock.Option{s3lock.WithPollInterval(10 * time.Millisecond)})}
	var wg sync.WaitGroup
	for _, who := range leaders {
		wg.Go(func() {
			for range 10 {
				l, err := who.Acquire(t.Context(), name)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(150 * time.Millisecond)
				select {
				case <-seenCh(l.Token().Epoch):
				case <-time.After(10 * time.Second):
					t.Errorf("the watcher did not see epoch %d held within 10s", l.Token().Epoch)
				}
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
				time.Sleep(20 * time.Millisecond) // the other one, waiting, takes it first
			}
		})
	}
	heldSeen := map[uint64]string{}
	for len(heldSeen) < 20 {
		ev := nextEvent(t, events, 5*time.Second)
		if ev.phase == s3lock.PhaseHeld && heldSeen[ev.epoch] == "" {
			heldSeen[ev.epoch] = ev.holder
			close(seenCh(ev.epoch))
		}
	}
	wg.Wait()
	for e := uint64(1); e <= 20; e++ {
		if heldSeen[e] == "" {
			t.Errorf("the watcher never saw epoch %d held (saw %v)", e, heldSeen)
		}
	}
	for ev := nextEvent(t, events, 5*time.Second); ev != (watchEvent{20, s3lock.PhaseReleased, heldSeen[20]}); ev = nextEvent(t, events, 5*time.Second) {
	}
	t.Logf("20 handoffs watched with %d requests (%s) in %s: %.1f requests/s",
		counter.Total(), counter, time.Since(start).Round(time.Millisecond), float64(counter.Total())/time.Since(start).Seconds())

	// A holder that stops renewing (killed, say): the watcher sees its lease
	// lapse by the store's clock.
	l, err := newLockClient(t, ns, "doomed", []s3lock.Option{s3lock.WithLeaseDuration(s3lock.MinLeaseDuration)}).
		TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events, 5*time.Second); ev != (watchEvent{21, s3lock.PhaseHeld, "doomed"}) {
		t.Fatalf("after epoch 21 was acquired the watcher saw %+v", ev)
	}
	_ = l.Detach()
	if ev := nextEvent(t, events, 10*time.Second); ev != (watchEvent{21, s3lock.PhaseLapsed, "doomed"}) {
		t.Fatalf("after epoch 21's holder stopped, the watcher saw %+v; want it lapsed", ev)
	}
	// An operator releases the lapsed lease: that is a change too.
	if err := watcher.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 21}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events, 5*time.Second); ev != (watchEvent{21, s3lock.PhaseReleased, "doomed"}) {
		t.Fatalf("after epoch 21 was force-released, the watcher saw %+v", ev)
	}
}

func TestWatch_RefusesBadNamesAndEndsWithItsContext(t *testing.T) {
	ns := s3test.New(t)
	c := newLockClient(t, ns, "w", nil)
	for _, err := range c.Watch(t.Context(), "bad//name") {
		if !errors.Is(err, s3lock.ErrInvalidName) {
			t.Errorf("Watch(bad name) yielded %v; want ErrInvalidName", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	n := 0
	for _, err := range c.Watch(ctx, ns.Name("quiet")) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("a quiet lock yielded %d states before the context ended; want 1 (the first)", n)
	}
}

// Leader election: whoever holds the lock leads and does the work; the
// others follow, learning from Watch who leads.
func ExampleClient_Watch() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	leader, _ := s3lock.New(api, bucket, s3lock.WithHolder("node-1"))
	follower, _ := s3lock.New(api, bucket, s3lock.WithHolder("node-2"))

	watching, stop := context.WithCancel(ctx)
	defer stop()
	changes := follower.Watch(watching, "cluster/leader")
	seen := make(chan string)
	go func() {
		for st, err := range changes {
			if err != nil {
				return
			}
			switch st.Phase() {
			case s3lock.PhaseHeld:
				seen <- "leader: " + st.Holder
			case s3lock.PhaseReleased, s3lock.PhaseLapsed:
				seen <- "no leader; " + st.Holder + " stepped down"
			}
		}
	}()

	err := leader.Do(ctx, "cluster/leader", func(ctx context.Context, l *s3lock.Lease) error {
		fmt.Println(<-seen) // the follower knows who leads
		// ... lead until done, or until ctx is cancelled because the lease was lost ...
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-seen)
	// Output:
	// leader: node-1
	// no leader; node-1 stepped down
}
