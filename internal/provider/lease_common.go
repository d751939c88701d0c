package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// privateTokenKey is the private-state key under which a lease's
// s3lock.Token is kept, so that a later operation can resume the lease.
const privateTokenKey = "lease_token"

// defaultOrder is the order in which a lease waits for a held lock unless
// configured otherwise: first come, first served. Runs that queue for a lock
// expect to be served in turn, as Terraform users expect of a queue; racing
// (s3lock.OrderNone, the SDK's default) would let a later run overtake one
// that has waited for minutes.
const defaultOrder = s3lock.OrderFIFO

// orderDescription is the MarkdownDescription of the order attribute; wait
// names what bounds the wait (`timeouts.create`, `wait_timeout`) and more
// adds what is particular to the resource or the ephemeral resource.
func orderDescription(wait, more string) string {
	return fmt.Sprintf("In which order this run takes its turn while others wait for the lock too. "+
		"`%q` (the default): wait in the lock's line and be served in the order the waiters queued, "+
		"across processes and hosts — for changes that must apply in the order they were queued, such as "+
		"migrations. `\"newest\"`: wait in the line too, but stand down when a newer run queues with "+
		"`order = \"newest\"`: this run then fails with \"Superseded by a newer run\", without taking the lock "+
		"or changing anything that depends on it, and the newer run goes ahead — for deploys of successive "+
		"commits, where an older commit must not deploy after a newer one. `\"none\"`: do not queue; race for "+
		"the lock when it is released, as waiters without order do. With `\"fifo\"` or `\"newest\"`, a run "+
		"that finds the lock free while others wait in line queues behind them (waiters with `\"none\"` may "+
		"still take a free lock), and %s counts the time spent in line. Runs of the s3lock CLI and programs "+
		"using the SDK queue in the same line.%s", defaultOrder, wait, more)
}

// privateGetter and privateSetter are the parts of the framework's private
// state (resources) and private data (ephemeral resources) used here.
type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// leaseRef names a lease, or a lock when epoch is 0: for the diagnostics,
// which name every lease they speak of by one, and for the SDK (token). slot
// is the slot a lease of a slot lock holds (its epoch is the slot's); 0 for
// a mutex's lease. share is the share id of a shared lease (its epoch is
// the shared epoch); "" for an exclusive one. maxHold is the lease's cap
// (max_hold), for the diagnostic of a lease that ends at it; 0 when it has
// none or it is not known.
type leaseRef struct {
	bucket, name string
	epoch        uint64
	slot         int
	share        string
	maxHold      time.Duration
}

// tokenRef is the leaseRef of a token.
func tokenRef(t s3lock.Token) leaseRef {
	return leaseRef{bucket: t.Bucket, name: t.Name, epoch: t.Epoch, slot: t.Slot, share: t.Share}
}

// token is the s3lock.Token that names l's epoch (its slot's, for a slot
// lease; its share, for a shared lease) whoever holds it: without a Nonce,
// and without the lock's number of slots, which the SDK reads from the
// lock's marker. With it, the SDK resumes (adopts), looks up or
// force-releases the epoch (the share), and names its object (Token.Key).
// The SDK refuses it from a client of another bucket.
func (l leaseRef) token() s3lock.Token {
	return s3lock.Token{Bucket: l.bucket, Name: l.name, Slot: l.slot, Epoch: l.epoch, Share: l.share}
}

// storeToken saves the token that resumes a lease.
func storeToken(ctx context.Context, p privateSetter, t s3lock.Token) diag.Diagnostics {
	return p.SetKey(ctx, privateTokenKey, []byte(t.String()))
}

// loadToken reads the token saved by storeToken; nil when there is none.
func loadToken(ctx context.Context, p privateGetter) (*s3lock.Token, diag.Diagnostics) {
	raw, diags := p.GetKey(ctx, privateTokenKey)
	if diags.HasError() || len(raw) == 0 {
		return nil, diags
	}
	t, err := s3lock.ParseToken(string(raw))
	if err != nil {
		diags.Append(unreadableToken(err))
		return nil, diags
	}
	return &t, diags
}

// acquireLease takes the lock: at once if it is free; if it is held, it
// waits up to wait (in the lock's line when opts order it: s3lock.WithOrder),
// reporting the holders it waits for and how many waiters are ahead of it
// through tflog (and the test hook), and returns what the wait saw (the zero
// lockWait when it did not wait), for the diagnostic that names the holder
// in Terraform's output. Any other failure of the first attempt, such as an
// unreachable store or denied access, is returned at once: only a held lock
// is worth waiting for. A wait of 0 tries once. All of that is
// s3lock.WithWait's policy; this only reports what the SDK reports.
func acquireLease(ctx context.Context, f *clientFactory, c *s3lock.Client, name string, wait time.Duration, opts ...s3lock.Option) (*s3lock.Lease, lockWait, error) {
	rec, opts := waitOptions(ctx, f, wait, opts)
	lease, err := c.Acquire(ctx, name, opts...)
	return lease, rec.done(), err
}

// waitOptions are opts with the wait of an acquisition (s3lock.WithWait) and
// the observer that reports it, and the recorder of what it saw.
func waitOptions(ctx context.Context, f *clientFactory, wait time.Duration, opts []s3lock.Option) (*waitRecorder, []s3lock.Option) {
	rec := newWaitRecorder(f.now)
	observe := func(h *s3lock.HeldError) {
		if rec.observe(h) {
			tflog.Info(ctx, "lock is held; waiting for it", map[string]any{
				"bucket": h.Bucket, "lock": h.Name, "holder": h.Holder, "epoch": h.Epoch, "wait": wait.String(),
			})
		}
		fields := map[string]any{
			"bucket":      h.Bucket,
			"lock":        h.Name,
			"holder":      h.Holder,
			"epoch":       h.Epoch,
			"key":         h.Key,
			"expires_in":  h.ExpiresIn.Round(time.Second).String(),
			"acquired_at": formatTime(h.AcquiredAt),
			"ahead":       h.Ahead,
		}
		if slot := slotOfKey(h.Key); slot > 0 {
			// All slots are held; the holder is the one whose lease runs
			// out first.
			fields["slot"] = slot
		}
		tflog.Info(ctx, "waiting for lock", fields)
		if f.hooks.onWait != nil {
			f.hooks.onWait(h)
		}
	}
	return rec, append(slices.Clip(opts), s3lock.WithWait(max(wait, 0)), s3lock.WithWaitObserver(observe))
}

// lockWait is what an acquisition saw while it waited for a held lock, for
// the diagnostic that says so: the holder when the wait began (first), the
// last one it waited for (last: the same holder, or one that took the lock
// in between), both a *s3lock.HeldError or, for a state, a
// *tfstate.LockFileHeldError; and how long the acquisition took. The zero
// lockWait is an acquisition that did not wait.
type lockWait struct {
	first, last error
	took        time.Duration
}

// waited reports whether the acquisition waited.
func (w lockWait) waited() bool { return w.first != nil }

// waitRecorder records a lockWait from a wait observer's calls.
type waitRecorder struct {
	now   func() time.Time
	start time.Time
	mu    sync.Mutex
	w     lockWait
}

// newWaitRecorder starts recording a wait at now().
func newWaitRecorder(now func() time.Time) *waitRecorder {
	return &waitRecorder{now: now, start: now()}
}

// observe records one report of the wait; it reports whether it was the
// first.
func (r *waitRecorder) observe(held error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.w.first == nil
	if first {
		r.w.first = held
	}
	r.w.last = held
	return first
}

// done ends the recording and returns what it saw.
func (r *waitRecorder) done() lockWait {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.w
	w.took = r.now().Sub(r.start)
	return w
}

// resumeLease takes over the lease of a token, or, when there is no token
// (state written by hand), the lock's (the slot's) current epoch if it is
// l's. The returned lease does not renew itself; callers Detach or Release
// it.
func resumeLease(ctx context.Context, c *s3lock.Client, token *s3lock.Token, l leaseRef) (*s3lock.Lease, error) {
	if token != nil {
		return c.Resume(ctx, *token, s3lock.WithoutAutoRenew())
	}
	tflog.Debug(ctx, "no lease token in private state; adopting the lock's current epoch", map[string]any{
		"bucket": l.bucket, "lock": l.name, "slot": l.slot, "epoch": l.epoch,
	})
	return c.Resume(ctx, l.token(), s3lock.WithoutAutoRenew())
}

// leaseReleased reports whether err says that a lease is over because it was
// released (a *s3lock.LeaseLostError whose Reason is s3lock.LostReleased):
// by whoever held its token, so that nothing was lost.
func leaseReleased(err error) bool {
	var lost *s3lock.LeaseLostError
	return errors.As(err, &lost) && lost.Reason == s3lock.LostReleased
}

// formatTime writes a time as RFC 3339 in UTC; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// timeValue is formatTime as a Terraform value; the zero time is null.
func timeValue(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(formatTime(t))
}

// stringOrNull is s as a Terraform value; "" is null.
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// metadataValue is lease metadata as a Terraform map; empty is null.
func metadataValue(m map[string]string) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// metadataFrom reads a metadata map from configuration; nil when null.
func metadataFrom(ctx context.Context, v types.Map) (map[string]string, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	m := map[string]string{}
	diags := v.ElementsAs(ctx, &m, false)
	return m, diags
}
