package witness

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// lapseAge is how much longer than its validity, at least, a lease has gone
// without a write when anyone may create the next epoch over it (PROTOCOL.md
// §6): an observer judges it lapsed once the store's Date is validity +
// serverSlack (2 s) past its Last-Modified, and since Last-Modified is
// truncated to the second, and Date lags real time, the true age then
// exceeds validity + 1 s.
const lapseAge = time.Second

// tolerance absorbs a wall clock that the store reads for Last-Modified and
// that NTP slews against the witness's monotonic clock (at most 500 ppm:
// 8 ms over a 15 s lease).
const tolerance = 50 * time.Millisecond

// maxShown bounds how many violations of each rule a report lists.
const maxShown = 5

// Claim is a holder's trust in its lease, sampled: at At, it trusted the
// lease of Lock's epoch Epoch until Until (the witness's clock). Sample by
// reading the clock before the lease's deadline and At after it, so that
// Until is never later than the deadline and every write the holder had
// confirmed answered before At.
type Claim struct {
	Lock      string
	Epoch     uint64
	Holder    string
	At, Until int64
}

// Check returns the violations of the protocol's rules that the writes,
// deletions and claims show (nil if none): succession, trust and cleanup
// (see the package documentation). Times in its messages are seconds since
// the first write.
func Check(writes []Write, deletes []Delete, claims []Claim) error {
	if len(writes) == 0 {
		return nil
	}
	zero := slices.MinFunc(writes, func(a, b Write) int { return cmp.Compare(a.In, b.In) }).In
	h := newHistory(writes)
	var errs []error
	for _, check := range []func() []string{
		func() []string { return h.succession(zero) },
		func() []string { return h.trust(claims, zero) },
		func() []string { return h.cleanup(deletes, zero) },
	} {
		if found := check(); len(found) > 0 {
			errs = append(errs, errors.New(strings.Join(found, "\n")))
		}
	}
	return errors.Join(errs...)
}

// Check checks what w recorded: its writes and deletions, the claims its
// Watch sampled, and claims gathered elsewhere (Check).
func (w *Witness) Check(claims ...Claim) error {
	w.mu.Lock()
	unread := append([]string(nil), w.unread...)
	w.mu.Unlock()
	err := Check(w.Writes(), w.Deletes(), append(w.Claims(), claims...))
	if len(unread) > 0 {
		err = errors.Join(err, fmt.Errorf("the witness could not read the body of %d requests, whose writes it cannot judge (first: %s)", len(unread), unread[0]))
	}
	return err
}

// epochID names one epoch object.
type epochID struct {
	lock  string
	epoch uint64
}

// history is the writes grouped by epoch object, each group in the order
// the writes reached the witness.
type history map[epochID][]Write

func newHistory(writes []Write) history {
	h := history{}
	for _, w := range writes {
		id := epochID{w.Lock, w.Epoch}
		h[id] = append(h[id], w)
	}
	for _, ws := range h {
		slices.SortStableFunc(ws, func(a, b Write) int { return cmp.Compare(a.In, b.In) })
	}
	return h
}

// ids returns the epoch objects in order: by lock, then epoch.
func (h history) ids() []epochID {
	ids := make([]epochID, 0, len(h))
	for id := range h {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b epochID) int {
		return cmp.Or(cmp.Compare(a.lock, b.lock), cmp.Compare(a.epoch, b.epoch))
	})
	return ids
}

// created returns the first create of id that the store applied.
func (h history) created(id epochID) (Write, bool) {
	for _, w := range h[id] {
		if w.Create && w.Applied() {
			return w, true
		}
	}
	return Write{}, false
}

// succession checks that every epoch the store created followed its
// predecessor's release or lapse (PROTOCOL.md §6). A waiter judged the
// predecessor lapsed on a read that showed its latest write then, i; it did
// so more than validity + 1 s after i was applied, and sent its create
// after that. A write that landed between the judgment and the create (a
// renewal delayed in the network) cannot have been confirmed by its holder,
// whose deadline had passed, and it came more than validity + 1 s after i.
// So the create was correct if some write i of the predecessor allows both:
// the create more than validity + 1 s after i, and the next write (if any)
// too. A violation is reported only when no write allows it, judged by the
// witness's brackets at their most lenient (a write may have been applied
// anywhere between its arrival and the answer, one whose answer was lost at
// any time after its arrival, and may have been a release), so it is
// certain.
func (h history) succession(zero int64) []string {
	var found []string
	for _, id := range h.ids() {
		c, ok := h.created(id)
		if !ok {
			continue
		}
		var prev []Write // the predecessor's writes that may have landed before the create
		released := false
		prevID := epochID{id.lock, id.epoch - 1}
		for _, w := range h[prevID] {
			if (w.Applied() || w.Unknown()) && w.In < c.Out {
				prev = append(prev, w)
				released = released || w.Released
			}
		}
		if len(prev) == 0 || released {
			continue
		}
		if pc, ok := h.created(prevID); ok && pc.Shared {
			continue // a shared epoch: its shares are waited for, not it
		}
		if pc, ok := h.created(prevID); ok && pc.Marker {
			found = append(found, fmt.Sprintf("  %s/lock-%010d created by %s at %s over a slot lock's marker (epoch %d) that was never released: a marker never lapses",
				id.lock, id.epoch, c.Holder, at(c.In, zero), prevID.epoch))
			continue
		}
		if msg := unjustified(c, prev, zero); msg != "" {
			found = append(found, fmt.Sprintf("  %s/lock-%010d created by %s at %s %s", id.lock, id.epoch, c.Holder, at(c.In, zero), msg))
		}
	}
	return capped("succession: an epoch was created while its predecessor's lease was live (PROTOCOL.md §6):", found)
}

// unjustified says why no write of prev (the predecessor's, in the order
// they arrived) can have been the one a correct waiter judged lapsed before
// it created c, or returns "" if one can.
func unjustified(c Write, prev []Write, zero int64) string {
	last := prev[len(prev)-1]
	for i, w := range prev {
		lapse := int64(w.Validity + lapseAge - tolerance)
		if c.In-w.In <= lapse {
			continue // too soon after w
		}
		if i+1 == len(prev) {
			return ""
		}
		next := prev[i+1]
		if next.Unknown() || next.Out-w.In > lapse {
			return "" // next may have landed after the judgment
		}
	}
	return fmt.Sprintf("only %s after the last write of epoch %d (%s's, at %s, validity %s, not released): "+
		"a lease may be taken over only once it has gone without a write for its validity + %s by the store's clock",
		time.Duration(c.In-last.In).Round(time.Millisecond), last.Epoch, last.Holder, at(last.In, zero), last.Validity, lapseAge)
}

// trust checks that every claim's deadline is no later than the send time of
// the holder's last confirmed write plus the validity minus the safety
// margin (PROTOCOL.md §6). A write the holder confirmed reached the store
// before the claim was sampled, and it reached the witness no earlier than
// the holder sent it; so the limit counts from the latest write of the
// holder to the epoch that may have been applied (its answer, or none) and
// reached the witness before the claim: never earlier than the one the
// holder confirmed. A claim that matches no write is reported too: a
// witness that judges nothing proves nothing.
func (h history) trust(claims []Claim, zero int64) []string {
	var found []string
	judged := 0
	type limitID struct {
		epochID
		from int64
	}
	seen := map[limitID]bool{} // one report per write, not per sample of its deadline
	for _, cl := range claims {
		var last *Write
		ws := h[epochID{cl.Lock, cl.Epoch}]
		for i, w := range ws {
			if w.In < cl.At && (w.Applied() || w.Unknown()) && (cl.Holder == "" || w.Holder == cl.Holder) {
				last = &ws[i]
			}
		}
		if last == nil {
			continue
		}
		judged++
		limit := last.In + int64(last.Validity-s3lock.SafetyMargin(last.Validity))
		id := limitID{epochID{cl.Lock, cl.Epoch}, last.In}
		if cl.Until > limit+int64(time.Millisecond) && !seen[id] {
			seen[id] = true
			found = append(found, fmt.Sprintf("  %s trusted %s/lock-%010d until %s (as seen at %s), %s past its last confirmed write's send time (%s) + validity %s - margin %s",
				cl.Holder, cl.Lock, cl.Epoch, at(cl.Until, zero), at(cl.At, zero), time.Duration(cl.Until-limit).Round(time.Millisecond),
				at(last.In, zero), last.Validity, s3lock.SafetyMargin(last.Validity)))
		}
	}
	if len(claims) > 0 && judged == 0 {
		found = append(found, fmt.Sprintf("  none of the %d claims matched a write the witness saw (is every client's transport through it?)", len(claims)))
	}
	return capped("trust: a holder trusted its lease longer than its writes allow (PROTOCOL.md §6):", found)
}

// cleanup checks that no deletion named a lock's newest epoch: one the
// witness saw created, with no newer epoch created (or possibly created)
// before the deletion.
func (h history) cleanup(deletes []Delete, zero int64) []string {
	var found []string
	for _, d := range deletes {
		c, ok := h.created(epochID{d.Lock, d.Epoch})
		if !ok || c.Out > d.In {
			continue
		}
		newer := false
		for id, ws := range h {
			if id.lock != d.Lock || id.epoch <= d.Epoch {
				continue
			}
			for _, w := range ws {
				if w.Create && (w.Applied() || w.Unknown()) && w.In < d.Out {
					newer = true
				}
			}
		}
		if !newer {
			found = append(found, fmt.Sprintf("  %s/lock-%010d deleted at %s while it was the lock's newest epoch", d.Lock, d.Epoch, at(d.In, zero)))
		}
	}
	return capped("cleanup: a lock's newest epoch was deleted (PROTOCOL.md §7):", found)
}

func capped(title string, found []string) []string {
	if len(found) == 0 {
		return nil
	}
	more := ""
	if len(found) > maxShown {
		more = fmt.Sprintf("  ... and %d more", len(found)-maxShown)
		found = found[:maxShown]
	}
	out := append([]string{title}, found...)
	if more != "" {
		out = append(out, more)
	}
	return out
}

// at shows a witness time as seconds since zero.
func at(t, zero int64) string { return fmt.Sprintf("+%.3fs", float64(t-zero)/float64(time.Second)) }
