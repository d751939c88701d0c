package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// phaseLife is the lifecycle of a lease held for one phase (scope =
// "phase"): each phase takes the lock on its own and releases it in Close.
// The lease renews itself in this provider process for as long as the
// phase lasts (every third of lease_duration, retrying failures until it
// would lapse: the leaseRegistry keeps it), so Renew only checks on it; a
// lease that another instance of the provider opened is resumed by its
// token for the one call.
type phaseLife struct {
	e     *leaseEphemeralResource
	token s3lock.Token
}

// openPhase acquires the lock for this phase.
func (e *leaseEphemeralResource) openPhase(ctx context.Context, client *s3lock.Client, lock leaseRef, set openSettings, diags *diag.Diagnostics) (leaseLife, openedLease, bool) {
	lease, waited, err := acquireLease(ctx, e.factory, client, lock.name, set.wait, set.acquireOptions()...)
	if err != nil {
		diags.Append(acquisitionFailed(lock, err, waitTimeoutAttr))
		return nil, openedLease{}, false
	}
	token := lease.Token()
	if waited.waited() {
		diags.Append(lockWaited(tokenRef(token), waited, false))
	}
	tflog.Info(ctx, "acquired lock for this phase", map[string]any{"bucket": lock.bucket, "lock": lock.name,
		"slot": token.Slot, "epoch": lease.Token().Epoch, "key": token.Key()})
	e.factory.leases.add(lease)
	return phaseLife{e: e, token: token}, phaseOpened(lease), true
}

// phaseOpened is what Open got of a lease this process holds.
func phaseOpened(lease *s3lock.Lease) openedLease {
	token, st := lease.Token(), lease.State()
	return openedLease{name: token.Name, epoch: st.Epoch, slot: token.Slot, share: token.Share, key: token.Key(),
		holder: st.Holder, acquired: st.AcquiredAt, expires: st.ExpiresAt, heldUntilAtMost: st.HeldUntilAtMost}
}

func (l phaseLife) kind() string { return lifePhase }

func (l phaseLife) store(ctx context.Context, p privateSetter) diag.Diagnostics {
	return storeToken(ctx, p, l.token)
}

// renew checks the lease this process holds, or renews, once, one that
// another instance of the provider opened. A lease this process holds that
// reached its cap is released at once (Release at the cap frees the lock).
func (l phaseLife) renew(ctx context.Context, diags *diag.Diagnostics) (time.Time, bool) {
	now, ref := l.e.factory.now, tokenRef(l.token)
	if lease, ok := l.e.factory.leases.get(l.token); ok {
		if err := lease.Err(); err != nil {
			ref.maxHold = maxHoldOf(lease.State())
			diags.Append(leaseLost(diag.SeverityError, ref, err, "", ""))
			l.releaseAtCap(ctx, lease, err)
			return time.Time{}, false
		}
		st := lease.State()
		if c := st.HeldUntilAtMost; !c.IsZero() && !st.ExpiresAt.Before(c) {
			return c, true // nothing renews it past the cap: look again there, not ever more often
		}
		return renewAt(now(), st.ExpiresAt), true
	}
	lease, ok, err := l.resume(ctx, diags)
	if !ok {
		return time.Time{}, false
	}
	if err == nil {
		err = lease.Renew(ctx)
		lease.Detach()
	}
	switch {
	case errors.Is(err, s3lock.ErrLeaseLost):
		diags.Append(leaseLost(diag.SeverityError, ref, err, "", ""))
		return time.Time{}, false
	case err != nil:
		diags.Append(notRenewed(ref, err))
		return time.Time{}, false
	}
	tflog.Debug(ctx, "renewed lease", map[string]any{"bucket": l.token.Bucket, "lock": l.token.Name, "epoch": l.token.Epoch})
	return renewAt(now(), lease.State().ExpiresAt), true
}

// releaseAtCap releases a lease this process holds that reached its cap
// (lost: its error), for the next holder; the loss is reported already.
// The lease stays open until Close, whose Release reports the cap again
// without a request.
func (l phaseLife) releaseAtCap(ctx context.Context, lease *s3lock.Lease, lost error) {
	if !endedAtCap(lost) {
		return
	}
	err := lease.Release(ctx)
	tflog.Info(ctx, "released the lease at its max_hold", map[string]any{"bucket": l.token.Bucket,
		"lock": l.token.Name, "epoch": l.token.Epoch, "release": fmt.Sprint(err)})
}

// close releases the lock.
func (l phaseLife) close(ctx context.Context, diags *diag.Diagnostics) {
	lease, live := l.e.factory.leases.get(l.token)
	ref := tokenRef(l.token)
	var err error
	if !live {
		var ok bool
		if lease, ok, err = l.resume(ctx, diags); !ok {
			return
		}
	}
	if err == nil {
		ref.maxHold = maxHoldOf(lease.State())
		if err = lease.Release(ctx); err == nil || errors.Is(err, s3lock.ErrLeaseLost) {
			l.e.factory.leases.remove(l.token)
		}
	}
	switch {
	case errors.Is(err, s3lock.ErrLeaseLost):
		diags.Append(leaseLost(diag.SeverityError, ref, err, "", ""))
	case err != nil:
		diags.Append(notReleased(tokenRef(l.token), err))
	default:
		tflog.Info(ctx, "released lock at the end of the run", map[string]any{"bucket": l.token.Bucket,
			"lock": l.token.Name, "epoch": l.token.Epoch})
	}
}

// resume takes over, for one call, a lease that another instance of the
// provider opened: the lease, or why the SDK could not resume it; ok is
// false when no client could be made (diags says why).
func (l phaseLife) resume(ctx context.Context, diags *diag.Diagnostics) (lease *s3lock.Lease, ok bool, err error) {
	client, ok := l.e.factory.client(ctx, l.token.Bucket, diags)
	if !ok {
		return nil, false, nil
	}
	lease, err = client.Resume(ctx, l.token, s3lock.WithoutAutoRenew())
	return lease, true, err
}
