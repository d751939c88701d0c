package s3lock_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// A cap on tenure (WithMaxHold, PROTOCOL.md §6): a lease is not renewed past
// its cap, and says so when it ends there.

// capLease is what the tests take: a 2 s lease renewed every 200 ms, capped
// at 3 s, so that the renewals of its last 1.2 s are cut for the cap.
const (
	capLeaseDuration = 2 * time.Second
	capMaxHold       = 3 * time.Second
)

func capOptions() []s3lock.Option {
	return []s3lock.Option{s3lock.WithLeaseDuration(capLeaseDuration), s3lock.WithRenewInterval(200 * time.Millisecond)}
}

// TestMaxHold_RenewalsEndAtTheCap: every renewal of a capped lease writes a
// validity whose trust ends by the cap (those near it are cut), the holder
// never trusts the lease past it, and at the cap the lease ends as lost with
// LostMaxHold, naming the cap; a Renew then fails the same way.
func TestMaxHold_RenewalsEndAtTheCap(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("capped")
	rec := &bodyRecorder{}
	c := newLockClient(t, ns, "holder", capOptions(), s3test.WithTransport(rec.wrap))
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithMaxHold(capMaxHold))
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)
	st := l.State()
	capAt := st.HeldUntilAtMost
	if got := capAt.Sub(st.AcquiredAt); got != capMaxHold {
		t.Fatalf("State().HeldUntilAtMost is %s after AcquiredAt; want the maximum hold, %s", got, capMaxHold)
	}
	limit := time.After(waitLimit)
	for l.Err() == nil { // sample the holder's trust until the lease ends
		if tu := l.State().TrustedUntil; tu.After(capAt) {
			t.Fatalf("the holder trusts its lease until %s, %s past its cap", tu, tu.Sub(capAt))
		}
		select {
		case <-l.Done():
		case <-time.After(50 * time.Millisecond):
		case <-limit:
			t.Fatal("the capped lease did not end")
		}
	}
	wantLost(t, "Err at the cap", l.Err(), s3lock.LostMaxHold)
	if !strings.Contains(l.Err().Error(), "maximum hold of 3s") {
		t.Errorf("Err at the cap = %v; want it to name the maximum hold, 3s", l.Err())
	}
	wantLost(t, "Renew after the cap", l.Renew(t.Context()), s3lock.LostMaxHold)

	cut := 0
	for _, p := range rec.leaseBodies(t) {
		if !p.MaxHoldUntil.Equal(capAt) {
			t.Errorf("a write carries the cap %s; want %s", p.MaxHoldUntil, capAt)
		}
		if p.RenewedAt.IsZero() || p.Released {
			continue // the create: one lease, well within the cap (the option's check)
		}
		v := time.Duration(p.ValidityMs) * time.Millisecond
		if end := p.RenewedAt.Add(v - s3lock.SafetyMargin(v)); end.After(p.MaxHoldUntil) {
			t.Errorf("renewal %d at %s wrote a validity of %s, trusted until %s past the cap", p.Renewals, p.RenewedAt, v, end.Sub(p.MaxHoldUntil))
		}
		if v < capLeaseDuration {
			cut++
		}
	}
	if cut == 0 {
		t.Errorf("no renewal was cut for the cap (writes: %d)", len(rec.leaseBodies(t)))
	}
}

// TestMaxHold_ReleaseAtTheCapFreesTheLockAtOnce: everyone sees a lease's
// cap (Current's HeldUntilAtMost; zero without one); a Release after the
// cap still says that the lease ended there, releases it with one write, and
// the next acquirer takes the lock at once.
func TestMaxHold_ReleaseAtTheCapFreesTheLockAtOnce(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("capped-release")
	counter, copt := counting()
	holder := newLockClient(t, ns, "holder", capOptions(), copt)
	other := newLockClient(t, ns, "other", nil)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithMaxHold(capMaxHold))
	if err != nil {
		t.Fatal(err)
	}
	st, err := other.Current(t.Context(), name)
	if err != nil || !st.Held || !st.HeldUntilAtMost.Equal(l.State().HeldUntilAtMost) {
		t.Fatalf("Current of a capped lease = %+v, %v; want it held until at most %s", st, err, l.State().HeldUntilAtMost)
	}
	select {
	case <-l.Done():
	case <-time.After(waitLimit):
		t.Fatal("the capped lease did not end")
	}
	counter.Reset()
	wantLost(t, "Release after the cap", l.Release(t.Context()), s3lock.LostMaxHold)
	if n := counter.Count("PutObject"); n != 1 {
		t.Errorf("Release after the cap sent %d PUTs; want 1, the release", n)
	}
	next, err := other.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire right after the capped lease was released: %v", err)
	}
	mustRelease(t, next)
	if st := next.State(); st.Epoch != 2 || !st.HeldUntilAtMost.IsZero() {
		t.Errorf("the next lease = epoch %d, held until at most %v; want epoch 2 without a cap", st.Epoch, st.HeldUntilAtMost)
	}
	counter.Reset()
	wantLost(t, "a second Release", l.Release(t.Context()), s3lock.LostMaxHold)
	if n := counter.Total(); n != 0 {
		t.Errorf("a second Release after the cap made %d requests; want none", n)
	}
}

// TestMaxHold_ResumeKeepsTheCap: a lease taken over with Resume keeps the cap
// its acquisition wrote, ends there as its acquirer's would, and cannot be
// resumed past it.
func TestMaxHold_ResumeKeepsTheCap(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("capped-resume")
	// A taken-over lease is counted older than it looks by the store's
	// Date's staleness (2 s): a 5 s lease leaves the resumer time to renew.
	opts := []s3lock.Option{s3lock.WithLeaseDuration(5 * time.Second), s3lock.WithRenewInterval(200 * time.Millisecond)}
	first := newLockClient(t, ns, "step-1", opts)
	rec := &bodyRecorder{}
	second := newLockClient(t, ns, "step-2", opts, s3test.WithTransport(rec.wrap))
	l, err := first.TryAcquire(t.Context(), name, s3lock.WithMaxHold(5500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	capAt := l.State().HeldUntilAtMost
	tok := l.Detach()
	r, err := second.Resume(t.Context(), tok)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := r.State().HeldUntilAtMost; !got.Equal(capAt) {
		t.Errorf("the resumed lease is held until at most %v; want its acquisition's cap %v", got, capAt)
	}
	select {
	case <-r.Done():
	case <-time.After(waitLimit):
		t.Fatal("the resumed capped lease did not end")
	}
	wantLost(t, "Err of the resumed lease at the cap", r.Err(), s3lock.LostMaxHold)
	_, err = second.Resume(t.Context(), tok)
	wantLost(t, "Resume past the cap", err, s3lock.LostMaxHold)
	wantLost(t, "Release of the resumed lease", r.Release(t.Context()), s3lock.LostMaxHold)
	// A resumed handle writes the whole lease (its trust is cut at the cap
	// all the same): a shorter write could make the object lapse before the
	// window another handle of the lease still trusts ends.
	renewals := 0
	for _, b := range rec.leaseBodies(t) {
		if b.Released {
			continue
		}
		renewals++
		if b.ValidityMs != 5000 {
			t.Errorf("the resumed handle wrote a validity of %d ms; want the whole lease, 5000", b.ValidityMs)
		}
	}
	if renewals == 0 {
		t.Error("the resumed handle renewed nothing: the test proves nothing")
	}
}

// bodyRecorder records the bodies of the PUTs a client sends.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (b *bodyRecorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPut && req.Body != nil {
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			b.mu.Lock()
			b.bodies = append(b.bodies, body)
			b.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

// capBody is what the tests read of a lease's body.
type capBody struct {
	ValidityMs   int64     `json:"validityMs"`
	Released     bool      `json:"expired"`
	Renewals     uint64    `json:"renewals"`
	RenewedAt    time.Time `json:"renewedAt"`
	MaxHoldUntil time.Time `json:"maxHoldUntil"`
}

// leaseBodies returns the lease bodies recorded (the JSON object in each
// PUT, whatever the transfer encoding around it).
func (b *bodyRecorder) leaseBodies(t *testing.T) []capBody {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []capBody
	for _, raw := range b.bodies {
		i, j := bytes.IndexByte(raw, '{'), bytes.LastIndexByte(raw, '}')
		var p capBody
		if i < 0 || j < i || json.Unmarshal(raw[i:j+1], &p) != nil {
			t.Fatalf("a PUT's body is not a lease: %q", raw)
		}
		out = append(out, p)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestMaxHold_CheckedAgainstEachAcquisitionsLease: a cap must outlast the
// lease it caps, whichever of the client and the acquisition gives each; a
// refused acquisition makes no request.
func TestMaxHold_CheckedAgainstEachAcquisitionsLease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	counter, copt := counting()
	c := newLockClient(t, ns, "holder", []s3lock.Option{s3lock.WithMaxHold(2 * time.Minute)}, copt)
	_, err := c.TryAcquire(t.Context(), ns.Name("refused"), s3lock.WithLeaseDuration(5*time.Minute))
	if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), "maximum hold 2m0s (WithMaxHold) must be longer than the lease duration 5m0s") {
		t.Errorf("an acquisition whose lease outlasts the client's cap = %v; want ErrInvalidConfig naming both", err)
	}
	_, err = c.TryAcquire(t.Context(), ns.Name("refused"), s3lock.WithMaxHold(time.Minute))
	if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), "maximum hold 1m0s (WithMaxHold) must be longer than the lease duration 1m0s") {
		t.Errorf("an acquisition's cap within the client's lease = %v; want ErrInvalidConfig naming both", err)
	}
	if n := counter.Total(); n != 0 {
		t.Errorf("refused acquisitions made %d requests; want none", n)
	}
}

// TestMaxHold_NobodyElseTakesTheLockWhileItIsTrusted: a contender tries
// the lock through the capped holder's shortened renewals and its cap; it
// gets the lock only once the holder has stopped trusting its lease (the
// holder does not release here: the lock lapses), and the store's record of
// every write (the witness) keeps the protocol's rules.
func TestMaxHold_NobodyElseTakesTheLockWhileItIsTrusted(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("capped-contended")
	wit := witnessed(t, ns)
	holder := newLockClient(t, ns, "holder", capOptions(), through(wit, nil))
	other := newLockClient(t, ns, "other", nil, through(wit, nil))
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithMaxHold(capMaxHold))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(capMaxHold + 2*waitLimit)
	attempts := 0
	for {
		got, err := other.TryAcquire(t.Context(), name)
		attempts++
		if err == nil {
			stillTrusted := l.Err() == nil
			mustRelease(t, got)
			if stillTrusted {
				t.Fatalf("the contender got epoch %d while the capped holder still trusted its lease", got.Token().Epoch)
			}
			break
		}
		if !errors.Is(err, s3lock.ErrHeld) {
			t.Fatalf("TryAcquire while the capped lease is held: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the contender never got the lock after the cap")
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantLost(t, "the holder's lease", l.Err(), s3lock.LostMaxHold)
	if attempts < 10 {
		t.Errorf("the contender tried %d times; want it refused through the renewals first", attempts)
	}
}
