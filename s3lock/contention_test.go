package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

type contention struct {
	workers, rounds int
	// faults, when set, returns the fault injector of one worker's client.
	faults func(worker int) *s3test.Faults
	// opts are the workers' acquire options (an order, say).
	opts []s3lock.Option
}

// contentionLimit bounds a contention run (see run).
const contentionLimit = 12 * time.Minute

// span is one critical section: what a worker did while holding a lease.
type span struct {
	worker     int
	epoch      uint64
	start, end time.Time
}

// run makes every worker acquire the lock `rounds` times and, while holding
// it, do an unconditional read-modify-write of a counter object. Mutual
// exclusion is what keeps the counter exact.
func (cfg contention) run(t *testing.T) []span {
	t.Helper()
	ns := s3test.New(t)
	name := ns.Name("contended")
	counterKey := ns.Name("counter")
	putCounter(t, ns, counterKey, 0)

	// A safeguard against a hang, not a timing assertion: under a loaded
	// CI machine (the race detector, the CLI passes and the jobs alongside
	// on two cores) TestContention's 480 handoffs once needed more than
	// five minutes.
	ctx, cancel := context.WithTimeout(t.Context(), contentionLimit)
	defer cancel()
	var (
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
	)
	// The store's record of every write, below the fault injection: it
	// checks succession and trust by the store's clock, which the counter
	// and the spans below cannot see.
	wit := witnessed(t, ns)
	injectors := make([]*s3test.Faults, cfg.workers)
	for w := range cfg.workers {
		var wrap func(http.RoundTripper) http.RoundTripper
		if cfg.faults != nil {
			injectors[w] = cfg.faults(w)
			wrap = injectors[w].Wrap
		}
		c := newLockClient(t, ns, fmt.Sprintf("worker-%02d", w), []s3lock.Option{
			s3lock.WithLeaseDuration(10 * time.Second),
			s3lock.WithRequestTimeout(5 * time.Second),
		}, through(wit, wrap))
		wg.Go(func() {
			for r := range cfg.rounds {
				l, err := c.Acquire(ctx, name, cfg.opts...)
				if err != nil {
					t.Errorf("worker %d round %d: Acquire: %v", w, r, err)
					return
				}
				stopWatch := wit.Watch(l)
				s := span{worker: w, epoch: l.Token().Epoch, start: time.Now()}
				n, err := getCounter(ctx, ns, counterKey)
				if err == nil {
					err = putCounterCtx(ctx, ns, counterKey, n+1)
				}
				s.end = time.Now()
				if err != nil {
					t.Errorf("worker %d: counter: %v", w, err)
				}
				if lost := l.Err(); lost != nil {
					t.Errorf("worker %d: lease of epoch %d ended while held: %v", w, l.Token().Epoch, lost)
				}
				stopWatch()
				if err := l.Release(ctx); err != nil {
					t.Errorf("worker %d: Release epoch %d: %v", w, l.Token().Epoch, err)
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wit.Claims()) == 0 {
		t.Error("no lease's trust was sampled: the trust check would prove nothing")
	}
	for _, f := range injectors {
		if f != nil {
			f.Disable()
		}
	}
	if t.Failed() {
		return spans
	}

	total := cfg.workers * cfg.rounds
	if n, err := getCounter(t.Context(), ns, counterKey); err != nil || n != total {
		t.Errorf("counter = %d (%v); want %d: two holders overlapped", n, err, total)
	}
	// Epochs strictly increase in the order the critical sections ran, and
	// no two critical sections overlap in time.
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if cur.epoch <= prev.epoch {
			t.Errorf("epoch %d (worker %d) ran after epoch %d (worker %d): epochs must increase", cur.epoch, cur.worker, prev.epoch, prev.worker)
		}
		if cur.start.Before(prev.end) {
			t.Errorf("epoch %d (worker %d) started before epoch %d (worker %d) ended", cur.epoch, cur.worker, prev.epoch, prev.worker)
		}
	}
	// No lease is left behind: every epoch object still in the bucket is
	// released.
	checker := newLockClient(t, ns, "checker", nil)
	st, err := checker.Current(t.Context(), name)
	if err != nil || st.Held || !st.Released {
		t.Errorf("final state %+v, %v; want released", st, err)
	}
	for _, key := range s3test.Keys(t, ns.Client, ns.Bucket, name+"/") {
		if strings.HasPrefix(key, name+"/lock-line/") {
			continue // a served waiter's ticket, deleted in the background or lapsing
		}
		out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
		var gone *types.NoSuchKey
		if errors.As(err, &gone) {
			continue // deleted since the LIST by a last acquisition's history cleanup: no longer in the bucket
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Contains(body, []byte(`"expired":true`)) {
			t.Errorf("orphaned lease: %s is not released: %s", key, body)
		}
	}
	// Nobody is left in line (a ticket whose deletion failed lapses).
	deadline := time.Now().Add(15 * time.Second)
	for {
		ws, err := checker.Line(t.Context(), name)
		if err == nil && len(ws) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("line after every worker finished: %+v, %v; want empty", ws, err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return spans
}

func TestContention(t *testing.T) {
	t.Parallel()
	spans := contention{workers: 16, rounds: 30}.run(t)
	if len(spans) > 0 && spans[len(spans)-1].epoch != uint64(len(spans)) {
		t.Errorf("last epoch %d after %d acquisitions; without faults no epoch is skipped", spans[len(spans)-1].epoch, len(spans))
	}
}

func TestContention_Faults(t *testing.T) {
	t.Parallel()
	contentionWithFaults(t, contention{workers: 8, rounds: 15})
}

// TestContention_FIFO: the same contention with every worker waiting in
// order, with and without faults: no double grant, no lost update, nobody
// stuck in line.
func TestContention_FIFO(t *testing.T) {
	t.Parallel()
	contention{workers: 8, rounds: 6, opts: []s3lock.Option{s3lock.WithOrder(s3lock.OrderFIFO)}}.run(t)
}

func TestContention_FaultsFIFO(t *testing.T) {
	t.Parallel()
	contentionWithFaults(t, contention{workers: 6, rounds: 8, opts: []s3lock.Option{s3lock.WithOrder(s3lock.OrderFIFO)}})
}

// contentionWithFaults runs cfg with every worker's requests failing at
// random (responses dropped after the store applied a write, 5xx before and
// after, 409 conflicts, latency), and checks that each kind was injected.
func contentionWithFaults(t *testing.T, cfg contention) {
	t.Helper()
	var mu sync.Mutex
	var injectors []*s3test.Faults
	cfg.faults = func(w int) *s3test.Faults {
		f := s3test.NewFaults(uint64(w+1),
			s3test.Rule{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 0.06},
			s3test.Rule{Fault: s3test.ServerErrorAfter, Ops: []string{"PutObject"}, Probability: 0.04},
			s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 0.04},
			s3test.Rule{Fault: s3test.Conflict, Probability: 0.06},
			s3test.Rule{Fault: s3test.Latency, Probability: 0.10, Delay: 40 * time.Millisecond},
		)
		mu.Lock()
		injectors = append(injectors, f)
		mu.Unlock()
		return f
	}
	cfg.run(t)
	total := map[s3test.Fault]int{}
	for _, f := range injectors {
		for k, v := range f.Injected() {
			total[k] += v
		}
	}
	t.Logf("faults injected: %v", total)
	for _, k := range []s3test.Fault{s3test.DropResponse, s3test.ServerErrorAfter, s3test.ServerErrorBefore, s3test.Conflict, s3test.Latency} {
		if total[k] == 0 {
			t.Errorf("no %s fault was injected; the test did not exercise it", k)
		}
	}
}

func putCounter(t *testing.T, ns *s3test.Namespace, key string, n int) {
	t.Helper()
	if err := putCounterCtx(t.Context(), ns, key, n); err != nil {
		t.Fatal(err)
	}
}

func putCounterCtx(ctx context.Context, ns *s3test.Namespace, key string, n int) error {
	_, err := ns.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(strconv.Itoa(n))),
	})
	return err
}

func getCounter(ctx context.Context, ns *s3test.Namespace, key string) (int, error) {
	out, err := ns.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}
