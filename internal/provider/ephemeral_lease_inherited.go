package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// A lease inherited from `s3lock run`. A terraform command that runs under
// `s3lock run NAME -- ...` (say, `sh -c 'terraform plan -out=p && terraform
// apply p'`, which must plan and apply under one lock) already holds the
// lock: the CLI renews it and releases it when the command ends. An
// ephemeral lease on the same lock then uses that lease — after checking
// that it is the lock's current, held epoch (the slot's, under `s3lock run
// --slots N`; its share, under a shared run) — instead of waiting for it;
// it neither renews nor releases it.
//
// A run that holds the lock exclusively covers a shared lease (mode =
// "shared"): it excludes every other holder, readers too. A shared run does
// not cover an exclusive lease, which is refused (sharedRunForExclusive):
// taking it would wait for the run's own share. The environment of `s3lock
// run` says whether its lease is shared by its key (runenv.Key): a share's
// key (s3lock.Token.Key of a token with a Share) names its share id; an
// environment whose key is neither the epoch's nor a share's of that epoch
// is malformed, so a shared run the provider cannot recognise is refused,
// never taken for an exclusive one.

// privateInheritedKey marks, in an ephemeral lease's private data, a lease
// inherited from `s3lock run`: its value is the inheritedLease as JSON.
const privateInheritedKey = "inherited_lease"

// inheritedLease is the lease of an enclosing `s3lock run`, as its
// environment describes it.
type inheritedLease struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	Epoch  uint64 `json:"epoch"`
	// Slot is the slot the run holds, 0 for a mutex; Slots how many
	// holders the lock admits, 1 for a mutex.
	Slot  int `json:"slot"`
	Slots int `json:"slots"`
	// Share is the share id of a shared run's lease; "" for an exclusive
	// run's.
	Share string `json:"share,omitempty"`
}

// ref is the leaseRef of the inherited lease.
func (in inheritedLease) ref() leaseRef {
	return leaseRef{bucket: in.Bucket, name: in.Name, epoch: in.Epoch, slot: in.Slot, share: in.Share}
}

// inheritedFrom returns the lease `s3lock run` holds on the lock, if this
// process runs under one for it (getenv: os.Getenv): its environment
// (runenv) names this bucket and lock, is well formed (a CLI from before
// slot locks sets no slot: a mutex), and agrees with itself: its key is the
// key of that epoch (of that slot). ok is false when the process runs under
// no `s3lock run`, or under one for another lock (a run of a lock set counts
// for each lock of the set). An environment that names
// this lock (or does not say which) but is malformed is an error: taking
// the lock anew would wait for the run's own lease.
func inheritedFrom(getenv func(string) string, bucket, name string) (in inheritedLease, ok bool, err error) {
	getenv = runenv.Member(getenv, name) // a lock set's run: its lease of this lock, if it has one
	if !runenv.Present(getenv) {
		return inheritedLease{}, false, nil
	}
	if b, n := getenv(runenv.Bucket), getenv(runenv.Name); b != "" && b != bucket || n != "" && n != name {
		return inheritedLease{}, false, nil
	}
	env, err := runenv.Read(getenv)
	if err != nil {
		return inheritedLease{}, false, err
	}
	in = inheritedLease{Bucket: bucket, Name: name, Epoch: env.Epoch, Slot: env.Slot, Slots: env.Slots}
	if in.Slots > s3lock.MaxSlots { // runenv.Read checked 1 <= Slot <= Slots
		return inheritedLease{}, false, fmt.Errorf("%s=%d: a lock admits at most %d holders", runenv.Slots, in.Slots, s3lock.MaxSlots)
	}
	if in.Slot == 0 {
		in.Share = shareOfKey(name, in.Epoch, env.Key) // a shared run's lease is its share
	}
	if key := in.ref().token().Key(); key != env.Key {
		return inheritedLease{}, false, fmt.Errorf("%s=%q is not the key of the epoch %s names (%s), nor that of a share of it",
			runenv.Key, env.Key, runenv.Epoch, key)
	}
	return in, true, nil
}

// checkInherited reads the inherited lease and returns its state if it is
// the lock's current, held epoch (the slot's, for a slot lease; a held
// share, for a shared run's); otherwise it reports why the inherited lease
// cannot be used.
func checkInherited(ctx context.Context, c *s3lock.Client, in inheritedLease, diags *diag.Diagnostics) (s3lock.State, bool) {
	lease := in.ref()
	if in.Slot > 0 || in.Share != "" {
		st, err := c.Lookup(ctx, lease.token())
		switch {
		case errors.Is(err, s3lock.ErrLeaseLost):
			diags.Append(inheritedSlotLost(lease, err))
			return st, false
		case err != nil:
			diags.Append(inheritedCheckFailed(lease, err))
			return st, false
		}
		tflog.Info(ctx, "using the slot or shared lease of the enclosing s3lock run", map[string]any{
			"bucket": in.Bucket, "lock": in.Name, "slot": in.Slot, "share": in.Share, "epoch": in.Epoch})
		return st, true
	}
	st, err := c.Current(ctx, in.Name)
	switch {
	case err != nil:
		diags.Append(inheritedCheckFailed(lease, err))
		return st, false
	case st.Phase() != s3lock.PhaseHeld || st.Epoch != in.Epoch || st.Slots > 1 || st.Shared:
		// (A shared lock's epoch is no exclusive run's: an environment
		// that names it without a share is refused, never taken for one.)
		diags.Append(inheritedNotCurrent(lease, st))
		return st, false
	}
	tflog.Info(ctx, "using the lease of the enclosing s3lock run", map[string]any{"bucket": in.Bucket, "lock": in.Name, "epoch": in.Epoch})
	return st, true
}

// inheritedLife is the lifecycle of a lease inherited from `s3lock run`:
// Open, Renew and Close only check that it is still the lock's current,
// held epoch; s3lock run renews it, and releases it when its command ends.
type inheritedLife struct {
	e  *leaseEphemeralResource
	in inheritedLease
}

// openInherited uses the lease of the enclosing `s3lock run`, in, if it
// holds the slots the configuration (set) asks for, covers its mode, and
// is still held.
func (e *leaseEphemeralResource) openInherited(ctx context.Context, client *s3lock.Client, in inheritedLease, set openSettings, diags *diag.Diagnostics) (leaseLife, openedLease, bool) {
	if in.Slots != set.slots {
		diags.Append(inheritedSlotsMismatch(in, set.slots))
		return nil, openedLease{}, false
	}
	if !covers(in.ref().token(), set.shared) {
		diags.Append(inheritedShared(in.ref()))
		return nil, openedLease{}, false
	}
	st, ok := checkInherited(ctx, client, in, diags)
	if !ok {
		return nil, openedLease{}, false
	}
	return inheritedLife{e: e, in: in}, openedLease{name: in.Name, epoch: in.Epoch, slot: in.Slot, share: in.Share, key: st.Key, holder: st.Holder,
		acquired: st.AcquiredAt, expires: st.ExpiresAt, heldUntilAtMost: st.HeldUntilAtMost}, true
}

func (l inheritedLife) kind() string { return lifeInherited }

func (l inheritedLife) store(ctx context.Context, p privateSetter) diag.Diagnostics {
	return storeInherited(ctx, p, l.in)
}

func (l inheritedLife) renew(ctx context.Context, diags *diag.Diagnostics) (time.Time, bool) {
	st, ok := l.check(ctx, diags)
	if !ok {
		return time.Time{}, false
	}
	return renewAt(l.e.factory.now(), st.ExpiresAt), true
}

// close only checks the lease: s3lock run releases it when its command ends.
func (l inheritedLife) close(ctx context.Context, diags *diag.Diagnostics) { l.check(ctx, diags) }

// check returns the inherited lease's state if it is still the lock's
// current one.
func (l inheritedLife) check(ctx context.Context, diags *diag.Diagnostics) (s3lock.State, bool) {
	client, ok := l.e.factory.client(ctx, l.in.Bucket, diags)
	if !ok {
		return s3lock.State{}, false
	}
	return checkInherited(ctx, client, l.in, diags)
}

// storeInherited records an inherited lease in private data.
func storeInherited(ctx context.Context, p privateSetter, in inheritedLease) diag.Diagnostics {
	raw, _ := json.Marshal(in) // strings and numbers: it cannot fail
	return p.SetKey(ctx, privateInheritedKey, raw)
}

// loadInherited returns the inherited lease recorded in private data; ok is
// false when there is none.
func loadInherited(ctx context.Context, p privateGetter) (inheritedLease, bool) {
	raw, _ := p.GetKey(ctx, privateInheritedKey)
	var in inheritedLease
	if len(raw) == 0 || json.Unmarshal(raw, &in) != nil || in.Epoch == 0 {
		return inheritedLease{}, false
	}
	return in, true
}
