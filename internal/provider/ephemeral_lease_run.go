package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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

// lostDuringRun is the one wording of a lease lost while the run went on.
const lostDuringRun = "The lease may have been lost during this run (the run's guard interrupts terraform when it " +
	"is), so the changes the run made may not have been exclusive. Check what this run changed before running it again."

// openForRun returns the run's lease of the lock: the one the run already
// holds (also when another provider configuration of the run took it), or a
// new one that acquire takes and the guard adopts.
func (e *leaseEphemeralResource) openForRun(ctx context.Context, bucket, name string, dur time.Duration, acquire func() (*s3lock.Lease, error), diags *diag.Diagnostics) (*runguard.Lease, bool) {
	if dur < runguard.MinimumLease {
		diags.AddAttributeError(path.Root("lease_duration"), "Lease too short for a whole run",
			fmt.Sprintf("Lock %q in bucket %q: lease_duration %s is shorter than %s. The lease is held for the whole "+
				"Terraform run by the run's guard process, which takes it over from the phase that acquired it "+
				"(reading it back may cost up to 3s of it); set lease_duration to %s or more.",
				name, bucket, formatDuration(dur), formatDuration(runguard.MinimumLease), formatDuration(runguard.MinimumLease)))
		return nil, false
	}
	run, cfg := e.factory.run, e.factory.guardConfig
	held, err := run.Claim(ctx, cfg, bucket, name)
	if err != nil {
		diags.AddError("Could not reach the run's lock guard", lockErrorDetail(bucket, name, 0, err)+"\n\n"+guardRemedy)
		return nil, false
	}
	if held != nil {
		if held.Lost != "" {
			diags.AddError("Lease lost", lockErrorDetail(bucket, name, held.Token.Epoch, errors.New(held.Lost))+"\n\n"+lostDuringRun)
			return nil, false
		}
		tflog.Info(ctx, "this run already holds the lock", map[string]any{"bucket": bucket, "lock": name, "epoch": held.Token.Epoch})
		return held, true
	}
	lease, err := acquire()
	if err != nil {
		_ = run.Abandon(ctx, cfg, bucket, name)
		diags.AddError("Could not acquire lock", lockErrorDetail(bucket, name, 0, err))
		return nil, false
	}
	token := lease.Detach()
	adopted, err := run.Adopt(ctx, token, cfg)
	if err != nil {
		detail := lockErrorDetail(bucket, name, token.Epoch, fmt.Errorf("handing the lease to the run's guard: %w", err))
		if rerr := e.releaseToken(ctx, token); rerr != nil {
			detail += fmt.Sprintf("\n\nThe lease could not be released either (%v); it lapses after its lease_duration.", rerr)
		}
		diags.AddError("Could not hold lock for the run", detail+"\n\n"+guardRemedy)
		return nil, false
	}
	tflog.Info(ctx, "acquired lock for this run; it is held until terraform exits", map[string]any{
		"bucket": bucket, "lock": name, "epoch": token.Epoch, "key": adopted.Key,
	})
	return adopted, true
}

// guardRemedy says what to do when the run's guard cannot be used.
const guardRemedy = "The run's guard process (the provider binary itself, logging next to its socket) holds the " +
	"lease for the whole run. If it cannot run here, set S3LOCK_RUN_GUARD=off in terraform's environment: " +
	"plan and apply then each take the lock for their own duration."

// releaseToken releases a lease this process acquired but could not hand to
// the guard.
func (e *leaseEphemeralResource) releaseToken(ctx context.Context, token s3lock.Token) error {
	c, err := e.factory.client(ctx, token.Bucket)
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
	held, err := e.factory.run.Status(ctx, token)
	if err != nil {
		diags.AddError(summary, lockErrorDetail(token.Bucket, token.Name, token.Epoch, err)+"\n\n"+lostDuringRun)
		return nil, false
	}
	if held.Lost != "" {
		diags.AddError("Lease lost", lockErrorDetail(token.Bucket, token.Name, token.Epoch, errors.New(held.Lost))+"\n\n"+lostDuringRun)
		return nil, false
	}
	return held, true
}
