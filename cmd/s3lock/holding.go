package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/lockset"
)

// holding is what `s3lock run` runs its command under: one lease, or the
// leases of a lock set (several names), which end together.
type holding struct {
	leases []*s3lock.Lease // one, or the set's in its order (the names sorted)
	set    *lockset.Set    // nil for one lock
}

func holdingLease(l *s3lock.Lease) *holding { return &holding{leases: []*s3lock.Lease{l}} }

func holdingSet(s *lockset.Set) *holding { return &holding{leases: s.Leases(), set: s} }

// Done is closed when the holding ends: its lease ends, or any of the set's.
func (h *holding) Done() <-chan struct{} {
	if h.set != nil {
		return h.set.Done()
	}
	return h.leases[0].Done()
}

// Err says why the holding ended; nil while it holds.
func (h *holding) Err() error {
	if h.set != nil {
		return h.set.Err()
	}
	return h.leases[0].Err()
}

// soonest is the lease whose trust deadline comes first: the holding's
// deadline, which the command must not outlive.
func (h *holding) soonest() *s3lock.Lease {
	first := h.leases[0]
	for _, l := range h.leases[1:] {
		if l.State().ExpiresAt.Before(first.State().ExpiresAt) {
			first = l
		}
	}
	return first
}

// capped returns the soonest cap (--max-hold) of the holding's leases and
// that lease's maximum hold; zero without one.
func (h *holding) capped() (at time.Time, maxHold time.Duration) {
	for _, l := range h.leases {
		st := l.State()
		if c := st.HeldUntilAtMost; !c.IsZero() && (at.IsZero() || c.Before(at)) {
			at, maxHold = c, c.Sub(st.AcquiredAt)
		}
	}
	return at, maxHold
}

// expiresAt is when the holding stops being trusted unless renewed.
func (h *holding) expiresAt() time.Time { return h.soonest().State().ExpiresAt }

// duration is the shortest of the leases' durations: within it every lease
// lapses by itself.
func (h *holding) duration() time.Duration {
	d := h.leases[0].State().LeaseDuration
	for _, l := range h.leases[1:] {
		d = min(d, l.State().LeaseDuration)
	}
	return d
}

// objects names the leases' epoch objects, for messages.
func (h *holding) objects() string {
	var where []string
	for _, l := range h.leases {
		t := l.Token()
		where = append(where, fmt.Sprintf("s3://%s/%s", t.Bucket, t.Key()))
	}
	return strings.Join(where, ", ")
}

// release releases the holding with a context of its own: the command's
// context may have been cancelled by the signal that stopped the command.
func (h *holding) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if h.set != nil {
		return h.set.Release(ctx)
	}
	return h.leases[0].Release(ctx)
}

// lapsedUnseen is the error of a holding whose watchdog killed the command at
// the deadline while s3lock could not act on it: the soonest lease's.
func (h *holding) lapsedUnseen() error {
	if err := h.Err(); errors.Is(err, s3lock.ErrLeaseLost) {
		return err // s3lock's own timer saw it too, as the watchdog acted
	}
	t := h.soonest().Token()
	return &s3lock.LeaseLostError{Bucket: t.Bucket, Name: t.Name, Key: t.Key(), Epoch: t.Epoch, Reason: s3lock.LostLapsed,
		Detail: "its trust deadline passed while s3lock could not act on it (stopped or starved?), so its watchdog killed the command"}
}

// environ is the command's environment: environ without s3lock's secrets,
// then the holding's (runenv).
func (h *holding) environ(environ []string) []string {
	ls := make([]runenv.Lease, len(h.leases))
	for i, l := range h.leases {
		t := l.Token()
		ls[i] = runenv.Lease{Bucket: t.Bucket, Name: t.Name, Key: t.Key(), Holder: l.State().Holder, Epoch: t.Epoch,
			Slot: t.Slot, Slots: max(t.Slots, 1)}
	}
	if h.set == nil {
		return ls[0].Command(environ)
	}
	return runenv.SetEnviron(environ, ls)
}
