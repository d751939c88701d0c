package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// One run, one lease. When Terraform started this provider process (not a
// test or a debugger), the ephemeral lease belongs to the whole Terraform
// run, not to the phase that opened it: the first Open of a run acquires it
// and hands it to the run's guard process (package runguard), which renews
// it across the run's phases and provider processes and releases it when
// terraform exits; later Opens of the run, in this process or in the next
// phase's, get the same epoch. Close only ends a phase.

// What an ephemeral lease covers (its scope attribute).
const (
	// scopeRun, the default: the whole terraform run. Where the provider
	// cannot hold a lease for the run, opening one fails and says why.
	scopeRun = "run"
	// scopePhase: each phase (plan, apply) takes the lock on its own, so
	// another run can take it between this run's plan and its apply.
	scopePhase = "phase"
)

// scopeDescription is the MarkdownDescription of the scope attribute.
const scopeDescription = "What the lease covers. `\"run\"` (the default): the whole `terraform` run, from its " +
	"plan to the end of its apply, under one epoch; where the provider cannot hold a lease for the whole run " +
	"(see \"Where a whole run can be had\" on this page), opening the lease fails with an error that says why and " +
	"what to do. `\"phase\"`: each phase of the run (the plan, the apply) takes the lock on its own and " +
	"releases it when the phase ends — another run can take the lock between this run's plan and its apply, " +
	"and the apply then works on a plan made before that run's changes. Choose it only where that is acceptable, " +
	"or where a whole run cannot be had and `s3lock run` around terraform is not an option."

// runLife is the lifecycle of a lease held for the whole run: the run's
// guard renews it and releases it when terraform exits, so Renew and Close
// only ask the guard whether it still holds it; Close ends a phase only, so
// that the next phase (the apply after the plan) runs under the same epoch.
type runLife struct {
	e     *leaseEphemeralResource
	token s3lock.Token
}

// openRun opens the run's lease of the lock (see openForRun).
func (e *leaseEphemeralResource) openRun(ctx context.Context, client *s3lock.Client, lock leaseRef, set openSettings, diags *diag.Diagnostics) (leaseLife, openedLease, bool) {
	held, ok := e.openForRun(ctx, client, lock, set, func() (*s3lock.Lease, lockWait, error) {
		return acquireLease(ctx, e.factory, client, lock.name, set.wait, append(set.acquireOptions(), s3lock.WithoutAutoRenew())...)
	}, diags)
	if !ok {
		return nil, openedLease{}, false
	}
	return runLife{e: e, token: held.Token}, runOpened(held), true
}

// runOpened is what Open got of a lease the run's guard holds.
func runOpened(held *runguard.Lease) openedLease {
	return openedLease{name: held.Token.Name, epoch: held.Token.Epoch, slot: held.Token.Slot, share: held.Token.Share, key: held.Key,
		holder: held.Holder, acquired: held.AcquiredAt, expires: held.ExpiresAt, heldUntilAtMost: held.HeldUntilAtMost}
}

// errWaitingForBlock is why a block's claim of a lock ended while another
// block of the run opened it (runClaims.take).
func errWaitingForBlock(err error) error {
	return fmt.Errorf("waiting for another block of this run to open the lock: %w", err)
}

// runLeaseGone is the diagnostic of a run's lease that the guard reports
// lost.
func runLeaseGone(held *runguard.Lease) diag.Diagnostic {
	return leaseLost(diag.SeverityError, runRef(held), runLoss(held), "", "")
}

func (l runLife) kind() string { return lifeRun }

func (l runLife) store(ctx context.Context, p privateSetter) diag.Diagnostics {
	return storeToken(ctx, p, l.token)
}

func (l runLife) renew(ctx context.Context, diags *diag.Diagnostics) (time.Time, bool) {
	held, ok := l.e.checkRunLease(ctx, l.token, renewFailed, diags)
	if !ok {
		return time.Time{}, false
	}
	return renewAt(l.e.factory.now(), held.ExpiresAt), true
}

func (l runLife) close(ctx context.Context, diags *diag.Diagnostics) {
	if _, ok := l.e.checkRunLease(ctx, l.token, checkFailed, diags); ok {
		tflog.Debug(ctx, "phase done; the lease stays held until the run ends", map[string]any{
			"bucket": l.token.Bucket, "lock": l.token.Name, "epoch": l.token.Epoch,
		})
	}
}

// openForRun returns the run's lease of the lock: the one the run already
// holds (also when another provider configuration of the run took it), if
// it has the slots set asks for and covers its mode (an exclusive lease
// covers a shared block, a shared one does not cover an exclusive block),
// or a new one that acquire takes and the guard adopts. The guard takes a lease over by its token, which carries
// the slot of a slot lease, with a client of client's holder.
func (e *leaseEphemeralResource) openForRun(ctx context.Context, client *s3lock.Client, lock leaseRef, set openSettings, acquire func() (*s3lock.Lease, lockWait, error), diags *diag.Diagnostics) (*runguard.Lease, bool) {
	bucket, name := lock.bucket, lock.name
	if e.factory.run == nil {
		diags.Append(wholeRunUnavailable(lock, e.factory.whyNoRun()))
		return nil, false
	}
	if set.dur < runguard.MinimumLease {
		diags.Append(leaseTooShortForRun(lock, set.dur, runguard.MinimumLease))
		return nil, false
	}
	run, cfg := e.factory.run, e.factory.runGuardConfig(client)
	done, err := e.factory.claims.take(ctx, bucket+"/"+name)
	if err != nil {
		diags.Append(notAcquired(lock, errWaitingForBlock(err)))
		return nil, false
	}
	defer done()
	held, err := run.Claim(ctx, cfg, bucket, name)
	if err != nil {
		diags.Append(guardUnreachable(lock, err))
		return nil, false
	}
	if held != nil {
		if held.Lost != "" {
			diags.Append(runLeaseGone(held))
			return nil, false
		}
		if leaseSlots(held.Token) != set.slots {
			diags.Append(runSlotsMismatch(lock, held.Token, set.slots))
			return nil, false
		}
		if !covers(held.Token, set.shared) {
			diags.Append(runHoldsShared(tokenRef(held.Token)))
			return nil, false
		}
		tflog.Info(ctx, "this run already holds the lock", map[string]any{"bucket": bucket, "lock": name,
			"slot": held.Token.Slot, "epoch": held.Token.Epoch})
		return held, true
	}
	lease, waited, err := acquire()
	if err != nil {
		_ = run.Abandon(ctx, cfg, bucket, name)
		diags.Append(acquisitionFailed(lock, err, waitTimeoutAttr))
		return nil, false
	}
	token := lease.Detach()
	adopted, err := run.Adopt(ctx, token, cfg)
	if err != nil {
		diags.Append(guardRefused(tokenRef(token), err, e.releaseToken(ctx, token)))
		return nil, false
	}
	tflog.Info(ctx, "acquired lock for this run; it is held until terraform exits", map[string]any{
		"bucket": bucket, "lock": name, "slot": token.Slot, "epoch": token.Epoch, "key": adopted.Key,
	})
	if waited.waited() {
		diags.Append(lockWaited(tokenRef(token), waited, true))
	}
	if why := run.Run().EndsWithTerraform(); why != "" {
		diags.Append(runLeaseLapsesAfterRun(tokenRef(token), set.dur, why))
	}
	return adopted, true
}

// runClaims orders, within one provider process, the opening of the run's
// lease of each lock. The guard makes a second claim of a lock wait until the
// process that claimed it first adopts or abandons it, and a process's line
// to the guard carries one request at a time: two ephemeral blocks of one
// run that open the same lock at once in one process would each wait for
// the other. So a block takes its lock's turn here first, for its claim,
// acquisition and adoption; the next block's claim then finds the run's
// lease. (A process serves one provider configuration: the bucket and name
// name the lock.)
type runClaims struct {
	mu    sync.Mutex
	turns map[string]chan struct{}
}

func newRunClaims() *runClaims { return &runClaims{turns: map[string]chan struct{}{}} }

// take waits for lock's turn, or for ctx to end, and returns the function
// that ends the turn.
func (c *runClaims) take(ctx context.Context, lock string) (done func(), err error) {
	if c == nil {
		return func() {}, nil // a provider not made by NewForRun: no run lease
	}
	c.mu.Lock()
	turn, ok := c.turns[lock]
	if !ok {
		turn = make(chan struct{}, 1)
		c.turns[lock] = turn
	}
	c.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// releaseToken releases a lease this process acquired but could not hand to
// the guard.
func (e *leaseEphemeralResource) releaseToken(ctx context.Context, token s3lock.Token) error {
	c, err := e.factory.newClient(ctx, token.Bucket)
	if err != nil {
		return err
	}
	l, err := c.Resume(ctx, token, s3lock.WithoutAutoRenew())
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// checkRunLease reports, as an error diagnostic, a run lease that was lost
// or that the run's guard no longer holds.
func (e *leaseEphemeralResource) checkRunLease(ctx context.Context, token s3lock.Token, summary string, diags *diag.Diagnostics) (*runguard.Lease, bool) {
	if e.factory.run == nil { // opened by a provider process that had a guard, checked by one without
		diags.Append(runLeaseUnknown(summary, tokenRef(token), e.factory.whyNoRun()))
		return nil, false
	}
	held, err := e.factory.run.Status(ctx, token)
	if err != nil {
		diags.Append(runLeaseUnknown(summary, tokenRef(token), err))
		return nil, false
	}
	if held.Lost != "" {
		diags.Append(runLeaseGone(held))
		return nil, false
	}
	return held, true
}

// whyNoRun says why this provider process has no run guard.
func (f *clientFactory) whyNoRun() error {
	if f.noRun != nil {
		return f.noRun
	}
	return fmt.Errorf("%w: it is served in-process (a test harness)", runguard.ErrNotTerraform)
}
