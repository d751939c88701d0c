package s3lock_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestResume_HandsALeaseToAnotherProcess: one step acquires and detaches,
// another resumes by token, renews and releases.
func TestResume_HandsALeaseToAnotherProcess(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pipeline")
	step1 := newLockClient(t, ns, "step-1", nil)
	step2 := newLockClient(t, ns, "step-2", nil)

	l, err := step1.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Detach()
	parsed, err := s3lock.ParseToken(tok.String())
	if err != nil || parsed != tok {
		t.Fatalf("ParseToken(%s) = %+v, %v", tok, parsed, err)
	}

	r, err := step2.Resume(t.Context(), parsed, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if r.Token().Epoch != l.Token().Epoch || r.State().Holder != "step-1" {
		t.Errorf("resumed lease = epoch %d holder %s; want epoch %d holder step-1", r.Token().Epoch, r.State().Holder, l.Token().Epoch)
	}
	if err := r.Renew(t.Context()); err != nil {
		t.Fatalf("Renew of a resumed lease: %v", err)
	}
	if err := r.Release(t.Context()); err != nil {
		t.Fatalf("Release of a resumed lease: %v", err)
	}
	_, err = step2.Resume(t.Context(), parsed)
	wantLost(t, "Resume of a released lease", err, s3lock.LostReleased)
	forged := parsed
	forged.Nonce = "0000"
	_, err = step2.Resume(t.Context(), forged)
	wantLost(t, "Resume with a wrong nonce", err, s3lock.LostNotThisLease)
	other := parsed
	other.Bucket = "another-bucket"
	if _, err := step2.Resume(t.Context(), other); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("Resume of another bucket's token = %v; want ErrInvalidConfig", err)
	}
	for _, bad := range []string{"", "{}", "not json", `{"bucket":"b","name":"../x","epoch":1,"nonce":"n"}`} {
		if _, err := s3lock.ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) = nil error", bad)
		}
	}
}

// TestAdopt_TakesOnlyTheCurrentHeldEpoch: Adopt refuses, as lost with the
// reason, an epoch that never existed, was released or was superseded.
func TestAdopt_TakesOnlyTheCurrentHeldEpoch(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("adopt")
	c := newLockClient(t, ns, "first", nil)
	op := newLockClient(t, ns, "importer", nil)
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	_, err = op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 2})
	wantLost(t, "Adopt of a future epoch", err, s3lock.LostDeleted)
	a, err := op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 1}, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Adopt of the held epoch: %v", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 1})
	wantLost(t, "Adopt of a released epoch", err, s3lock.LostReleased)
	l2, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l2)
	_, err = op.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 1})
	wantLost(t, "Adopt of a superseded epoch", err, s3lock.LostReplaced)
}

// TestParseToken_NeverEchoesTheNonce: a token's nonce releases its lease, so
// errors about a malformed token (which end up in CI logs) must not print it.
func TestParseToken_NeverEchoesTheNonce(t *testing.T) {
	for _, bad := range []string{
		`{"bucket":"b","name":"n","epoch":0,"nonce":"SECRET-NONCE"}`,
		`{"name":"n","epoch":3,"nonce":"SECRET-NONCE"}`,
		`{"bucket":"b","name":"n","epoch":99999999999,"nonce":"SECRET-NONCE"}`,
		`{"bucket":"b","name":"../n","epoch":1,"nonce":"SECRET-NONCE"}`,
		`{"bucket":"b","nonce":"SECRET-NONCE",`,
	} {
		_, err := s3lock.ParseToken(bad)
		if err == nil || strings.Contains(err.Error(), "SECRET-NONCE") {
			t.Errorf("ParseToken(%s) = %v; want an error that does not print the nonce", bad, err)
		}
	}
}

// laggingDate is a transport that makes the store's Date header lag as
// versitygw's can at worst: a second of truncation plus a refresh that is
// one second behind (Date = the whole second before the current one).
type laggingDate struct{ next http.RoundTripper }

func (l laggingDate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil {
		resp.Header.Set("Date", time.Now().Truncate(time.Second).Add(-time.Second).UTC().Format(http.TimeFormat))
	}
	return resp, err
}

// TestResume_EstimateNeverLaterThanTheHolders: a lease taken over by its
// token is never trusted longer than its holder trusts it, even when the
// store's Date lags real time by almost two seconds. (Regression: Resume
// allowed one second, and a resumed lease could outlast its holder's view by
// up to a second.)
func TestResume_EstimateNeverLaterThanTheHolders(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	lagging := s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return laggingDate{next} })
	holder := newLockClient(t, ns, "holder", nil)
	taker := newLockClient(t, ns, "taker", nil, lagging)
	// Acquire just after a second boundary and resume half a second later,
	// so that the store's truncated Last-Modified and the lagging Date are
	// as far from real time as they get.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	l, err := holder.TryAcquire(t.Context(), ns.Name("estimate"), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	own := l.State().ExpiresAt
	tok := l.Detach()
	time.Sleep(500 * time.Millisecond)
	r, err := taker.Resume(t.Context(), tok, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Release(context.Background()) }()
	if later := r.State().ExpiresAt.Sub(own); later > 0 {
		t.Errorf("the resumed lease is trusted until %s, %s after its holder's own deadline %s",
			r.State().ExpiresAt.Format(time.StampMilli), later, own.Format(time.StampMilli))
	}
}

// TestLookup_ReadsATokensLeaseWithoutTakingItOver: Lookup reports a held
// lease's state, never later than its holder's own deadline, writes nothing
// (the holder renews as before), and reports every way the lease can be over
// as Resume does.
func TestLookup_ReadsATokensLeaseWithoutTakingItOver(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("lookup")
	holder := newLockClient(t, ns, "holder", nil)
	counter, opt := counting()
	reader := newLockClient(t, ns, "reader", nil, opt)

	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	counter.Reset()
	st, err := reader.Lookup(t.Context(), tok)
	if err != nil {
		t.Fatalf("Lookup of a held lease: %v", err)
	}
	if counter.Total() != 2 || counter.Count("ListObjectsV2") != 1 || counter.Count("GetObject") != 1 {
		t.Errorf("Lookup made %v; want one LIST and one GET, no write", counter)
	}
	if st.Phase() != s3lock.PhaseHeld || st.Epoch != l.Token().Epoch || st.Holder != "holder" {
		t.Errorf("Lookup = %+v; want held by holder at epoch %d", st, l.Token().Epoch)
	}
	if st.TrustedUntil.IsZero() || st.TrustedUntil.After(l.State().ExpiresAt) {
		t.Errorf("TrustedUntil = %v; want set and not after the holder's own deadline %v", st.TrustedUntil, l.State().ExpiresAt)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("the holder's Renew after a Lookup: %v (Lookup must not write)", err)
	}

	forged := tok
	forged.Nonce = "0000"
	_, err = reader.Lookup(t.Context(), forged)
	wantLost(t, "Lookup with a wrong nonce", err, s3lock.LostNotThisLease)
	if err := holder.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: l.Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Lookup(t.Context(), tok)
	wantLost(t, "Lookup of a force-released lease", err, s3lock.LostForceReleased)
	wantLost(t, "Renew of a force-released lease", l.Renew(t.Context()), s3lock.LostForceReleased)

	next, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, next)
	_, err = reader.Lookup(t.Context(), tok)
	wantLost(t, "Lookup of a superseded lease", err, s3lock.LostReplaced)
	tok.Bucket = "another-bucket"
	if _, err := reader.Lookup(t.Context(), tok); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("Lookup of another bucket's token = %v; want ErrInvalidConfig", err)
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
	adopted, err := c.Resume(t.Context(), s3lock.Token{Name: name, Epoch: orig.Token().Epoch}, s3lock.WithoutAutoRenew())
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
		wantLost(t, "renewal by the "+what+" handle after the takeover", l.Renew(t.Context()), s3lock.LostTakenOver)
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
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(la.Token().Key())})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(out.Body)
	out.Body.Close()
	fresh := strings.Replace(body.String(), `"renewals":0`, `"renewals":1`, 1)
	putRaw(t, ns, la.Token().Key(), []byte(fresh))

	if _, err := a.Resume(t.Context(), tok); !errors.Is(err, s3lock.ErrLeaseLost) || !strings.Contains(err.Error(), "replaced by a newer epoch") {
		t.Fatalf("Resume of a replaced epoch = %v; want ErrLeaseLost (replaced by a newer epoch)", err)
	}
}

// TestLookup_ByEpochAndHandlesOfAReleasedLease: Lookup of a token without a
// nonce checks a lease by its epoch as Resume of it would adopt it, writing
// nothing; once one handle of a lease has
// released it, a takeover or lookup finds it released (a release already
// done), while another handle that still used it finds it taken over.
func TestLookup_ByEpochAndHandlesOfAReleasedLease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("handles")
	first := newLockClient(t, ns, "first", nil)
	second := newLockClient(t, ns, "second", nil)

	l, err := first.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	st, err := second.Lookup(t.Context(), s3lock.Token{Name: name, Epoch: l.Token().Epoch})
	if err != nil || st.Phase() != s3lock.PhaseHeld || st.Holder != "first" || st.TrustedUntil.After(l.State().ExpiresAt) {
		t.Fatalf("Lookup by epoch of the held epoch = %+v, %v; want held by first, trusted no later than its deadline", st, err)
	}
	_, err = second.Lookup(t.Context(), s3lock.Token{Name: name, Epoch: l.Token().Epoch + 1})
	wantLost(t, "Lookup by epoch of a future epoch", err, s3lock.LostDeleted)
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("the holder's Renew after Lookup by epoch: %v (Lookup must not write)", err)
	}

	resumed, err := second.Resume(t.Context(), l.Token(), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := resumed.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantLost(t, "Renew by the handle the token came from, after the resumed handle released", l.Renew(t.Context()), s3lock.LostTakenOver)
	_, err = second.Lookup(t.Context(), l.Token())
	wantLost(t, "Lookup of the released lease", err, s3lock.LostReleased)
	_, err = second.Lookup(t.Context(), s3lock.Token{Name: name, Epoch: l.Token().Epoch})
	wantLost(t, "Lookup by epoch of the released lease", err, s3lock.LostReleased)
	if !errors.Is(resumed.Err(), s3lock.ErrReleased) {
		t.Errorf("Err of the handle that released = %v; want ErrReleased", resumed.Err())
	}
}

// An epoch object that no s3lock acquisition wrote (it has no nonce) is no
// lease: Lookup and Resume of a token naming it say the token names no lease
// of the lock, as for another acquisition's object.
func TestLookup_AnObjectNoAcquisitionWroteIsNotThisLease(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "reader", nil)
	name := ns.Name("no-nonce")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 1}.Key(),
		[]byte(`{"leaderId":"someone","validityMs":600000,"expired":false,"s3lock":1,"epoch":1}`))
	_, err := c.Lookup(t.Context(), s3lock.Token{Name: name, Epoch: 1})
	wantLost(t, "Lookup by epoch of an object without a nonce", err, s3lock.LostNotThisLease)
	_, err = c.Resume(t.Context(), s3lock.Token{Name: name, Epoch: 1}, s3lock.WithoutAutoRenew())
	wantLost(t, "Resume by epoch of an object without a nonce", err, s3lock.LostNotThisLease)
}

// Resume takes over a lease whose duration, metadata, order and slots its
// acquisition set: it takes WithoutAutoRenew, and refuses, by name and
// before any request, the options that would not apply.
func TestResume_RefusesOptionsThatWouldNotApply(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	counter, copt := counting()
	c := newLockClient(t, ns, "resumer", nil, copt)
	tok := s3lock.Token{Name: ns.Name("resume-options"), Epoch: 1, Nonce: "n"}
	for name, opt := range map[string]s3lock.Option{"WithLeaseDuration": s3lock.WithLeaseDuration(time.Minute),
		"WithMetadata": s3lock.WithMetadata(map[string]string{"a": "b"}), "WithOrder": s3lock.WithOrder(s3lock.OrderFIFO),
		"WithSlots": s3lock.WithSlots(3), "WithWait": s3lock.WithWait(time.Second), "WithMaxHold": s3lock.WithMaxHold(time.Hour)} {
		_, err := c.Resume(t.Context(), tok, s3lock.WithoutAutoRenew(), opt)
		if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), name+" does not apply to Resume") {
			t.Errorf("Resume with %s = %v; want ErrInvalidConfig naming it", name, err)
		}
	}
	if n := counter.Total(); n != 0 {
		t.Errorf("refused Resumes made %d requests; want none", n)
	}
}
