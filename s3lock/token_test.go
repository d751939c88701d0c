package s3lock_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// A Token names a lease for every verb that acts on one. A token without a
// Nonce (an import ID, an operator's command) names an epoch whoever holds
// it, in the client's bucket when Bucket is empty: Lookup reads it, Resume
// adopts it, ForceRelease ends it. Each costs what the protocol says.
func TestToken_NamesAMutexLeaseForEveryVerb(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("named")
	counter, withCounter := counting()
	holder := newLockClient(t, ns, "holder", nil)
	operator := newLockClient(t, ns, "operator", nil, withCounter)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	byEpoch := s3lock.Token{Name: name, Epoch: l.Token().Epoch}
	if want := fmt.Sprintf("%s/lock-%010d.json", name, l.Token().Epoch); byEpoch.Key() != want || l.Token().Key() != want {
		t.Errorf("Key of the epoch's token = %s, of the lease's %s; want %s", byEpoch.Key(), l.Token().Key(), want)
	}

	counter.Reset()
	st, err := operator.Lookup(t.Context(), byEpoch)
	if err != nil || !st.Held || st.Holder != "holder" || st.Epoch != l.Token().Epoch {
		t.Fatalf("Lookup of the epoch = %+v, %v; want it held by holder", st, err)
	}
	if n := counter.Total(); n != 2 {
		t.Errorf("Lookup by epoch made %d requests (%s); want a LIST and a GET", n, counter)
	}

	counter.Reset()
	adopted, err := operator.Resume(t.Context(), byEpoch, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Resume of a token without a nonce (adopt) = %v", err)
	}
	if n := counter.Total(); n != 2 {
		t.Errorf("adopting made %d requests (%s); want a LIST and a GET", n, counter)
	}
	if adopted.Token().Epoch != l.Token().Epoch || adopted.State().Holder != "holder" || adopted.Token().Nonce == "" {
		t.Errorf("the adopted lease: epoch %d holder %q token %+v; want the holder's epoch %d, with its nonce",
			adopted.Token().Epoch, adopted.State().Holder, adopted.Token(), l.Token().Epoch)
	}
	adopted.Detach()

	if err := operator.ForceRelease(t.Context(), byEpoch); err != nil {
		t.Fatalf("ForceRelease of the epoch = %v", err)
	}
	wantLost(t, "Lookup after the force-release", func() error { _, err := operator.Lookup(t.Context(), byEpoch); return err }(), s3lock.LostForceReleased)

	other := byEpoch
	other.Bucket = ns.Bucket + "-other"
	for verb, err := range map[string]error{
		"Lookup":       func() error { _, err := operator.Lookup(t.Context(), other); return err }(),
		"Resume":       func() error { _, err := operator.Resume(t.Context(), other); return err }(),
		"ForceRelease": operator.ForceRelease(t.Context(), other),
	} {
		if !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("%s of another bucket's token = %v; want ErrInvalidConfig", verb, err)
		}
	}
	for verb, err := range map[string]error{
		"Lookup":       func() error { _, err := operator.Lookup(t.Context(), s3lock.Token{Name: name}); return err }(),
		"ForceRelease": operator.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: s3lock.MaxEpoch + 1}),
	} {
		if !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("%s of a token without a valid epoch = %v; want ErrInvalidConfig", verb, err)
		}
	}
}

// A slot lease's own token (with its Nonce) says how many slots its lock
// has, so resuming it reads no marker; a token without a Nonce names the
// slot's epoch, and the lock's marker is read to check that the lock has
// that slot. Releasing a slot's epoch leaves the other slots alone.
func TestToken_NamesASlotLeaseForEveryVerb(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("pool")
	counter, withCounter := counting()
	holder := newLockClient(t, ns, "holder", nil)
	operator := newLockClient(t, ns, "operator", nil, withCounter)
	first, err := holder.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	second, err := holder.TryAcquire(t.Context(), name, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, second)
	tok := first.Detach()
	if tok.Slot < 1 || tok.Slots != 2 {
		t.Fatalf("a slot lease's token %+v; want its slot and the lock's 2 slots", tok)
	}

	counter.Reset()
	resumed, err := operator.Resume(t.Context(), tok, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Resume of the slot lease's token = %v", err)
	}
	if n, lists := counter.Total(), counter.Count("ListObjectsV2"); n != 2 || lists != 1 {
		t.Errorf("resuming with the lease's own token made %d requests (%s); want a LIST and a GET, no marker read", n, counter)
	}
	bySlot := s3lock.Token{Name: name, Slot: tok.Slot, Epoch: tok.Epoch}
	resumed.Detach()

	counter.Reset()
	adopted, err := operator.Resume(t.Context(), bySlot, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Resume of the slot's epoch without a nonce = %v", err)
	}
	if n := counter.Total(); n != 4 {
		t.Errorf("adopting a slot made %d requests (%s); want two LISTs and two GETs (the marker, then the slot)", n, counter)
	}
	if got := adopted.Token(); got.Slot != tok.Slot || got.Slots != 2 || got.Epoch != tok.Epoch {
		t.Errorf("the adopted slot lease's token %+v; want slot %d of 2 at epoch %d", got, tok.Slot, tok.Epoch)
	}
	adopted.Detach()

	if _, err := operator.Lookup(t.Context(), s3lock.Token{Name: name, Slot: 3, Epoch: 1}); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("Lookup of slot 3 of a lock with 2 = %v; want ErrSlotsMismatch", err)
	}
	wrongN := bySlot
	wrongN.Slots = 3
	if _, err := operator.Resume(t.Context(), wrongN); !errors.Is(err, s3lock.ErrSlotsMismatch) {
		t.Errorf("Resume of a slot by a token that says the lock has 3 slots, not 2 = %v; want ErrSlotsMismatch", err)
	}
	if err := operator.ForceRelease(t.Context(), bySlot); err != nil {
		t.Fatalf("ForceRelease of the slot's epoch = %v", err)
	}
	st, err := operator.Current(t.Context(), name)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Slot == tok.Slot {
		t.Errorf("after releasing slot %d: %+v, %v; want the other slot still held", tok.Slot, st, err)
	}
}

// WithWait is the one way to say how long Acquire waits: WithWait(0) tries
// once, exactly as TryAcquire does (the same requests, the same ErrHeld, an
// event marked Try), and a negative wait is refused.
func TestAcquire_WithWaitZeroTriesOnce(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("once")
	counter, withCounter := counting()
	var tries []bool
	holder := newLockClient(t, ns, "holder", nil)
	c := newLockClient(t, ns, "impatient", []s3lock.Option{s3lock.WithObserver(observerFunc(func(e observe.Event) {
		if e.Kind == observe.AcquireFailed {
			tries = append(tries, e.Try)
		}
	}))}, withCounter)
	l, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, l)

	counter.Reset()
	_, tryErr := c.TryAcquire(t.Context(), name)
	tryCost := counter.String()
	counter.Reset()
	_, err = c.Acquire(t.Context(), name, s3lock.WithWait(0))
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "holder" || !errors.Is(tryErr, s3lock.ErrHeld) {
		t.Fatalf("Acquire(WithWait(0)) of a held lock = %v (TryAcquire: %v); want ErrHeld naming the holder", err, tryErr)
	}
	if got := counter.String(); got != tryCost {
		t.Errorf("Acquire(WithWait(0)) made %s; TryAcquire %s: want the same single attempt", got, tryCost)
	}
	if len(tries) != 2 || !tries[0] || !tries[1] {
		t.Errorf("acquire-failed events marked Try: %v; want both tries marked", tries)
	}
	if _, err := c.Acquire(t.Context(), name, s3lock.WithWait(-1)); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("Acquire(WithWait(-1)) = %v; want ErrInvalidConfig", err)
	}
}
