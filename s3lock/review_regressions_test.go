package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// One regression test per bug found in review, named after what broke.

// TestSlowCleanup_DoesNotStallRenewal: a history cleanup that hangs on a slow
// store must not keep the lease from renewing (it used to run before the
// renewal loop, on the same goroutine, longer than the lease).
func TestSlowCleanup_DoesNotStallRenewal(t *testing.T) {
	s3lock.SetTimingForTest(t, 300*time.Millisecond)
	ns := s3test.New(t)
	name := ns.Name("slow-cleanup")
	setup := newLockClient(t, ns, "setup", []s3lock.Option{s3lock.WithHistory(1)})
	for range 2 {
		l, err := setup.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(cleanupWait()) // epoch 1 is now old enough to delete

	slow := s3test.NewFaults(1, s3test.Rule{Fault: s3test.Latency, Ops: []string{"DeleteObjects"}, Probability: 1, Delay: 6 * time.Second, Fixed: true})
	c := newLockClient(t, ns, "holder", []s3lock.Option{
		s3lock.WithHistory(1), s3lock.WithLeaseDuration(2 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond),
	}, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return slow.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the slow cleanup to start", func() bool { return slow.Injected()[s3test.Latency] > 0 })
	time.Sleep(3 * time.Second) // longer than the lease, while DeleteObjects hangs
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended while a cleanup was slow: %v", err)
	}
	st, err := c.Current(t.Context(), name)
	if err != nil || st.Renewals < 5 {
		t.Fatalf("state %+v, %v; want at least 5 renewals during the slow cleanup", st, err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.WaitCleanup()
}

// TestRelease_AfterForceReleaseIsLost: a release that finds its epoch
// force-released must say the lease was lost (it used to mistake the
// operator's write, which has the same renewal count, for its own).
func TestRelease_AfterForceReleaseIsLost(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("force-then-release")
	holder := newLockClient(t, ns, "holder", nil)
	op := newLockClient(t, ns, "operator", nil)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := op.ForceRelease(t.Context(), name, 1); err != nil {
		t.Fatal(err)
	}
	next, err := op.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, next)
	if err := l.Release(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) || !strings.Contains(err.Error(), "force-released by operator") {
		t.Fatalf("Release after a force-release = %v; want ErrLeaseLost naming the operator", err)
	}
}

// TestTakeover_OnlyOneHandleSurvives: an Adopt (or Resume) of a lease whose
// original handle is still in use leaves two handles; the first renewal of
// one of them must end the other (they used to renew forever, each reading
// the other's write as its own).
func TestTakeover_OnlyOneHandleSurvives(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("two-handles")
	c := newLockClient(t, ns, "original", nil)
	orig, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := c.Adopt(t.Context(), name, orig.Epoch(), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := c.Resume(t.Context(), orig.Token(), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.Renew(t.Context()); err != nil {
		t.Fatalf("renewal by the adopting handle: %v", err)
	}
	for what, l := range map[string]*s3lock.Lease{"original": orig, "resumed": resumed} {
		if err := l.Renew(t.Context()); !errors.Is(err, s3lock.ErrLeaseLost) {
			t.Errorf("renewal by the %s handle after the takeover = %v; want ErrLeaseLost", what, err)
		}
	}
	if err := adopted.Release(t.Context()); err != nil {
		t.Fatalf("release by the surviving handle: %v", err)
	}
}

// TestResume_SupersededEpochLooksAlive: an epoch object that looks fresh
// (a renewal that reached the store after its holder gave up) while a newer
// epoch exists must not be resumed.
func TestResume_SupersededEpochLooksAlive(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("late-renewal")
	a := newLockClient(t, ns, "late", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)})
	b := newLockClient(t, ns, "next", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	la, err := a.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	tok := la.Detach()
	lb, err := b.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, lb)
	// The late renewal: epoch 1 rewritten, fresh and unreleased.
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(la.Key())})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(out.Body)
	out.Body.Close()
	fresh := strings.Replace(body.String(), `"renewals":0`, `"renewals":1`, 1)
	putRaw(t, ns, la.Key(), []byte(fresh))

	if _, err := a.Resume(t.Context(), tok); !errors.Is(err, s3lock.ErrLeaseLost) || !strings.Contains(err.Error(), "superseded") {
		t.Fatalf("Resume of a superseded epoch = %v; want ErrLeaseLost (superseded)", err)
	}
}

// TestRelease_GivesUpWhenTheStoreIsDown: Release with a context that never
// ends must return once the lease can no longer be trusted (it used to retry
// forever while holding the lease's lock).
func TestRelease_GivesUpWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1)
	c := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)},
		s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), ns.Name("down"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Probability: 1})
	done := make(chan error, 1)
	go func() { done <- l.Release(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, s3lock.ErrLeaseLost) || !errors.Is(err, s3lock.ErrUnavailable) {
			t.Fatalf("Release against a failing store = %v; want ErrLeaseLost caused by ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Release did not give up after the lease's trust window")
	}
}

// TestLostLease_KeepsItsCause: a lease that ends because renewals kept
// failing says why.
func TestLostLease_KeepsItsCause(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	f := s3test.NewFaults(1)
	c := newLockClient(t, ns, "holder", []s3lock.Option{
		s3lock.WithLeaseDuration(2 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond),
	}, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) }))
	l, err := c.TryAcquire(t.Context(), ns.Name("cause"))
	if err != nil {
		t.Fatal(err)
	}
	f.SetRules(s3test.Rule{Fault: s3test.ServerErrorBefore, Ops: []string{"PutObject"}, Probability: 1})
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease never ended")
	}
	if err := l.Err(); !errors.Is(err, s3lock.ErrLeaseLost) || !errors.Is(err, s3lock.ErrUnavailable) {
		t.Fatalf("Err = %v; want ErrLeaseLost caused by ErrUnavailable", err)
	}
}

// TestNestedLockNames_DoNotInflateListing: a lock nested under another
// lock's key prefix ("jobs" and "jobs/lock-cleanup") with a long history
// must not make acquiring the outer lock page through the inner one's keys.
func TestNestedLockNames_DoNotInflateListing(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	outer, inner := ns.Name("jobs"), ns.Name("jobs/lock-cleanup")
	seedHistory(t, ns, inner, 1200)
	counter, withCounter := counting()
	c := newLockClient(t, ns, "x", nil, withCounter)
	l, err := c.TryAcquire(t.Context(), outer)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	if n := counter.Count("ListObjectsV2"); n != 1 || l.Epoch() != 1 {
		t.Fatalf("acquiring %s beside %s's 1,200 epochs took %d LISTs (epoch %d); want 1 (epoch 1)", outer, inner, n, l.Epoch())
	}
	states, err := c.List(t.Context(), ns.Name("jobs"))
	if err != nil || len(states) != 2 {
		t.Fatalf("List = %+v, %v; want both locks", states, err)
	}
}

// TestMissingCredentials_AreNotAnOutage: a client without usable
// credentials gets ErrAccessDenied at once, not ErrUnavailable and a wait.
func TestMissingCredentials_AreNotAnOutage(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	noCreds := s3.New(s3.Options{
		Region: ns.Target.Region, BaseEndpoint: aws.String(ns.Target.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials in the environment")
		}),
	})
	c, err := s3lock.New(noCreds, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.Acquire(ctx, ns.Name("x"))
	if !errors.Is(err, s3lock.ErrAccessDenied) || errors.Is(err, s3lock.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Acquire without credentials = %v; want ErrAccessDenied at once", err)
	}
	if !strings.Contains(err.Error(), "no usable credentials") {
		t.Errorf("error %q does not say what to do", err)
	}
}

// lateCreate lets the first create through only after its caller gave up:
// the client sees its context end, and the request reaches the store later.
type lateCreate struct {
	next    http.RoundTripper
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
	landed  chan error
}

func (g *lateCreate) RoundTrip(req *http.Request) (*http.Response, error) {
	first := false
	if req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*" {
		g.once.Do(func() { first = true })
	}
	if !first {
		return g.next.RoundTrip(req)
	}
	late := req.Clone(context.Background())
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		late.Body = io.NopCloser(bytes.NewReader(body))
	}
	close(g.reached)
	<-req.Context().Done()
	go func() {
		<-g.open
		resp, err := g.next.RoundTrip(late)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		g.landed <- err
	}()
	return nil, req.Context().Err()
}

// TestAbandon_LateCreateLeavesNoOrphan: a create that reaches the store only
// after its caller gave up must not hold the lock for nobody.
func TestAbandon_LateCreateLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("late-create")
	g := &lateCreate{reached: make(chan struct{}), open: make(chan struct{}), landed: make(chan error, 1)}
	a := newLockClient(t, ns, "gives-up", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		g.next = next
		return g
	}))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := a.TryAcquire(ctx, name)
		errc <- err
	}()
	<-g.reached // the create is on its way
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire after cancel = %v; want context.Canceled", err)
	}
	close(g.open) // the create arrives late: the abandoned key refuses it
	if err := <-g.landed; err == nil {
		t.Fatal("the late create was accepted after the attempt was abandoned")
	}
	b := newLockClient(t, ns, "next", nil)
	l, err := b.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("the abandoned epoch holds the lock for nobody: %v", err)
	}
	mustRelease(t, l)
	if l.Epoch() != 2 {
		t.Errorf("epoch = %d; want 2 (epoch 1 was abandoned)", l.Epoch())
	}
}

func TestSafetyMargin_CoversDriftOfLongLeases(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, time.Minute, time.Hour, 30 * 24 * time.Hour} {
		if m := s3lock.SafetyMargin(d); m < d/10_000 || m >= d/2 {
			t.Errorf("SafetyMargin(%s) = %s; want at least 100 ppm of it and less than half", d, m)
		}
	}
}
