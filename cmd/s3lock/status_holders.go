package main

import (
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// holderStatus is one holder of a lock that has several in status's JSON
// output: a held slot of a slot lock (Slot set), or a shared holder (Share
// set, its share id).
type holderStatus struct {
	Slot             int               `json:"slot,omitempty"`
	Share            string            `json:"share,omitempty"`
	Epoch            uint64            `json:"epoch"`
	Key              string            `json:"key"`
	Holder           string            `json:"holder,omitempty"`
	AcquiredAt       time.Time         `json:"acquired_at,omitzero"`
	ExpiresAt        time.Time         `json:"expires_at,omitzero"`
	ExpiresInSeconds *float64          `json:"expires_in_seconds,omitempty"`
	HeldUntilAtMost  time.Time         `json:"held_until_at_most,omitzero"`
	LeaseDuration    string            `json:"lease_duration,omitempty"`
	Renewals         uint64            `json:"renewals"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// holdersOf returns the holders of a lock that may have several: the held
// slots of a slot lock, by slot, or the shared holders of a shared lock (or
// those a waiting writer waits for). nil for a mutex; an empty list for a
// slot lock whose slots are all free or a shared lock whose shares have all
// ended (so that JSON shows "holders": []).
func holdersOf(s s3lock.State, now time.Time) []holderStatus {
	if s.Slots <= 1 && modeOf(s) == "" {
		return nil
	}
	out := make([]holderStatus, 0, len(s.Holders))
	for _, h := range s.Holders {
		hs := holderStatus{
			Slot: h.Slot, Share: h.Share, Epoch: h.Epoch, Key: h.Key, Holder: h.Holder, AcquiredAt: h.AcquiredAt.UTC(),
			Renewals: h.Renewals, Metadata: h.Metadata, HeldUntilAtMost: h.HeldUntilAtMost.UTC(),
		}
		hs.ExpiresAt, hs.ExpiresInSeconds = expiry(h, now)
		if h.LeaseDuration > 0 {
			hs.LeaseDuration = h.LeaseDuration.String()
		}
		out = append(out, hs)
	}
	return out
}
