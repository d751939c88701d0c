package s3lock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/witness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The direct create (PROTOCOL.md §5, "The direct create"): a waiter whose poll reads
// the holder's epoch released creates the next one at once, with the lock's
// LIST sent beside the create rather than before it.

// pollGate holds a waiter's requests at chosen moments: the answer to the
// first poll that reads the watched epoch changed (a conditional GET
// answered 200: a waiter paused between its poll and its create), or, with
// holdList, every LIST the waiter sends after that poll. It notes the order
// in which the waiter's requests reached the store.
type pollGate struct {
	next     http.RoundTripper
	holdPoll bool
	holdList bool
	failList bool // the first LIST after the poll fails on the way

	mu      sync.Mutex
	read    bool     // a poll has read the epoch changed
	sent    []string // the waiter's requests after that poll, as they reach the store
	polling chan struct{}
	reached chan struct{} // closed when a held request waits
	open    chan struct{}
	once    sync.Once
	pollsOn sync.Once

	// Once holdLists is called: LISTs wait until its channel is closed,
	// and a create that reaches the store meanwhile is counted.
	lists            chan struct{}
	createsMeanwhile int
}

// holdLists makes the waiter's LISTs wait from now until the returned
// function is called, which returns how many creates reached the store
// while a LIST waited.
func (g *pollGate) holdLists() func() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lists = make(chan struct{})
	g.createsMeanwhile = 0
	return func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		close(g.lists)
		g.lists = nil
		return g.createsMeanwhile
	}
}

func newPollGate() *pollGate {
	return &pollGate{polling: make(chan struct{}), reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *pollGate) RoundTrip(req *http.Request) (*http.Response, error) {
	list := req.Method == http.MethodGet && req.URL.Query().Has("list-type")
	poll := req.Method == http.MethodGet && !list && req.Header.Get("If-None-Match") != ""
	if poll {
		g.pollsOn.Do(func() { close(g.polling) })
	}
	g.mu.Lock()
	after := g.read
	if after {
		g.sent = append(g.sent, req.Method+map[bool]string{true: " list", false: ""}[list])
	}
	lists := g.lists
	if lists != nil && req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*" {
		g.createsMeanwhile++
	}
	fail := after && list && g.failList
	if fail {
		g.failList = false
	}
	g.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by the test")
	}
	if lists != nil && list {
		<-lists
	}
	if after && list && g.holdList {
		g.wait()
	}
	resp, err := g.next.RoundTrip(req)
	if err == nil && poll && resp.StatusCode == http.StatusOK {
		g.mu.Lock()
		g.read = true
		g.mu.Unlock()
		if g.holdPoll {
			g.wait() // the store answered; the waiter hears it only now
		}
	}
	return resp, err
}

func (g *pollGate) wait() {
	g.once.Do(func() { close(g.reached) })
	<-g.open
}

// requests returns the waiter's requests since its poll read the change.
func (g *pollGate) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

// waitingFor starts an Acquire of name by a client whose requests pass
// through g, and returns once it polls the holder.
func waitingFor(t *testing.T, ns *s3test.Namespace, wit *witness.Witness, name string, g *pollGate, copts ...s3test.Option) <-chan attemptResult {
	t.Helper()
	copts = append(copts, through(wit, func(next http.RoundTripper) http.RoundTripper {
		g.next = next
		return g
	}))
	w := newLockClient(t, ns, "waiter", []s3lock.Option{s3lock.WithRequestTimeout(time.Minute)}, copts...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	result := make(chan attemptResult, 1)
	go func() {
		l, err := w.Acquire(ctx, name)
		result <- attemptResult{l, err}
	}()
	select {
	case <-g.polling:
	case r := <-result:
		t.Fatalf("the waiter did not wait: %v", r.err)
	}
	return result
}

// TestDirectCreate_TheCreateDoesNotWaitForTheList: after its poll reads the
// release, the waiter's create reaches the store while the LIST sent with it
// is still held on the way: the handoff costs the poll and one round trip.
func TestDirectCreate_TheCreateDoesNotWaitForTheList(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("direct")
	wit := witnessed(t, ns)
	holder := newLockClient(t, ns, "holder", nil, through(wit, nil))
	l1, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	g := newPollGate()
	g.holdList = true
	result := waitingFor(t, ns, wit, name, g)
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-g.reached // the waiter's LIST is held
	deadline := time.Now().Add(30 * time.Second)
	for !epochObjectExists(t, ns, s3lock.Token{Name: name, Epoch: 2}.Key()) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's create of epoch 2 did not reach the store while its LIST was held; its requests: %v", g.requests())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(g.open)
	r := <-result
	if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}
	mustRelease(t, r.l)
	if got := r.l.Token().Epoch; got != 2 {
		t.Errorf("epoch = %d; want 2", got)
	}
	if got := strings.Join(g.requests(), ", "); got != "GET list, PUT" && got != "PUT, GET list" {
		t.Errorf("after the poll that read the release the waiter sent %q; want the create and one LIST", got)
	}
}

// TestDirectCreate_AfterAPauseNeverReusesADeletedEpoch is hazard 4 (§7) for
// the direct create: the waiter's poll reads epoch 1 released, then the
// waiter pauses; meanwhile epochs 2..4 are taken and cleanup deletes 1 and
// 2. Its create of epoch 2 then lands on a free key, quickly (step 5 does
// not list again): the LIST sent with it, which shows epoch 4, must make the
// waiter abandon epoch 2 and wait for epoch 4's holder — and so must the
// LIST it makes after the create when the one sent with it failed.
func TestDirectCreate_AfterAPauseNeverReusesADeletedEpoch(t *testing.T) {
	s3lock.SetTimingForTest(t, 300*time.Millisecond)
	for _, failList := range []bool{false, true} {
		t.Run(map[bool]string{false: "its LIST answered", true: "its LIST failed"}[failList], func(t *testing.T) {
			pausedWaiterMeetsEpoch4(t, failList)
		})
	}
}

func pausedWaiterMeetsEpoch4(t *testing.T, failList bool) {
	t.Helper()
	ns := s3test.New(t)
	name := ns.Name("direct-stale")
	wit := witnessed(t, ns)
	bob := newLockClient(t, ns, "bob", []s3lock.Option{s3lock.WithHistory(1)}, through(wit, nil))
	l1, err := bob.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	g := newPollGate()
	g.holdPoll, g.failList = true, failList
	result := waitingFor(t, ns, wit, name, g, s3test.WithoutRetries())
	s := &staleScene{t: t, name: name, bob: bob}
	s.release(l1)
	<-g.reached // the waiter read epoch 1 released, and is paused
	l4 := s.takeUpTo4(ns)
	close(g.open)
	select {
	case r := <-result:
		if r.err == nil {
			_ = r.l.Release(t.Context())
			t.Fatalf("the waiter got epoch %d while bob holds epoch 4", r.l.Token().Epoch)
		}
		t.Fatalf("the waiter gave up: %v", r.err)
	case <-time.After(3 * time.Second): // it waits for bob's epoch 4
	}
	st, err := bob.Current(t.Context(), name)
	if err != nil || st.Epoch != 4 || !st.Held || st.Holder != "bob" {
		t.Fatalf("state after the waiter's create: %+v, %v; want epoch 4 held by bob", st, err)
	}
	if err := l4.Release(t.Context()); err != nil {
		t.Fatalf("bob's lease suffered from the waiter's create: %v", err)
	}
	r := <-result
	if r.err != nil {
		t.Fatalf("Acquire after bob's release: %v", r.err)
	}
	mustRelease(t, r.l)
	if got := r.l.Token().Epoch; got != 5 {
		t.Errorf("the waiter got epoch %d; want 5, after bob's epoch 4", got)
	}
	if failList && !strings.Contains(strings.Join(g.requests(), ","), "GET list") {
		t.Errorf("the waiter's requests after its poll: %v; want the failed LIST made again", g.requests())
	}
}

// TestDirectCreate_AWaiterThatLostListsFirstAfterwards: two waiters read
// the same release and both create at once; the one that loses knows that
// others poll the lock, and lists before it creates from then on (each
// waiter that creates at once pays a create and a read-back to lose).
func TestDirectCreate_AWaiterThatLostListsFirstAfterwards(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("direct-contended")
	wit := witnessed(t, ns)
	holder := newLockClient(t, ns, "holder", nil, through(wit, nil))
	l1, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := newPollGate(), newPollGate()
	g1.holdPoll, g2.holdPoll = true, true
	r1, r2 := waitingFor(t, ns, wit, name, g1), waitingFor(t, ns, wit, name, g2)
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-g1.reached // both read the release, and both create now
	<-g2.reached
	close(g1.open)
	close(g2.open)
	var won attemptResult
	loser, gate := r2, g2
	select {
	case won = <-r1:
	case won = <-r2:
		loser, gate = r1, g1
	}
	if won.err != nil {
		t.Fatalf("Acquire: %v", won.err)
	}
	release := gate.holdLists()
	if err := won.l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the loser to list after the next release", func() bool {
		return strings.Contains(strings.Join(gate.requests(), ","), "GET list")
	})
	time.Sleep(300 * time.Millisecond) // a create sent beside the LIST would have arrived
	if n := release(); n != 0 {
		t.Errorf("the waiter that lost created %d time(s) while its LIST waited; want it to list first", n)
	}
	r := <-loser
	if r.err != nil {
		t.Fatalf("the loser's Acquire: %v", r.err)
	}
	mustRelease(t, r.l)
	if got := r.l.Token().Epoch; got != 3 {
		t.Errorf("the loser got epoch %d; want 3", got)
	}
}
