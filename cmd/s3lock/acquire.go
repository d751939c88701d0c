package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// acquireFlags are the flags of the commands that take a lock.
type acquireFlags struct {
	lock     lockConfig
	wait     time.Duration
	quiet    bool
	metadata map[string]string
}

func (af *acquireFlags) register(cmd *cobra.Command, defaultLease time.Duration) {
	fs := cmd.Flags()
	fs.StringVar(&af.lock.holder, "holder", "", "identity written into the lease, shown to whoever finds the lock held (env "+envHolder+"; default user@host:pid plus a random suffix)")
	durationFlag(fs, &af.lock.lease, "lease", defaultLease, fmt.Sprintf("how long the lease lasts unless renewed (%s to %s)", s3lock.MinLeaseDuration, s3lock.MaxLeaseDuration))
	durationFlag(fs, &af.wait, "wait", defaultWait, "how long to wait for a held lock; 0 tries once")
	fs.StringToStringVar(&af.metadata, "metadata", nil, "KEY=VALUE pairs stored with the lease, shown by status --output json and to waiters (repeatable)")
	fs.Lookup("metadata").DefValue = "" // not "[]" in --help
	fs.BoolVarP(&af.quiet, "quiet", "q", false, "print no progress or acquisition messages")
}

// acquire takes the lock name with c: once with --wait 0, else waiting up
// to af.wait for a lock that is held, with progress on stderr. A store that
// cannot be reached (or refuses the credentials) at the first attempt is
// reported at once (s3lock.FailFast); while waiting, the SDK rides out
// transient store failures.
func (a *app) acquire(ctx context.Context, c *s3lock.Client, name string, af acquireFlags, extra ...s3lock.AcquireOption) (*s3lock.Lease, error) {
	opts := append([]s3lock.AcquireOption{}, extra...)
	if len(af.metadata) > 0 {
		opts = append(opts, s3lock.WithMetadata(af.metadata))
	}
	var held *s3lock.HeldError
	if af.wait == 0 {
		lease, err := c.TryAcquire(ctx, name, opts...)
		if errors.As(err, &held) {
			return nil, exitWith(exitHeld, fmt.Errorf("lock %q is held by %s (epoch %d) for at most %s more; use --wait to wait for it",
				name, holderText(held.Holder), held.Epoch, roundUp(held.ExpiresIn)))
		}
		if err != nil {
			return nil, err
		}
		a.acquired(lease, 0, af.quiet)
		return lease, nil
	}

	p := newProgress(a.stderr, name, af.wait, af.quiet)
	lease, err := c.Acquire(ctx, name, append(opts, s3lock.FailFast(), s3lock.WithWaitTimeout(af.wait), s3lock.WithWaitObserver(p.observe))...)
	p.stop()
	switch {
	case err == nil:
		a.acquired(lease, p.waited(), af.quiet)
		return lease, nil
	case ctx.Err() != nil:
		return nil, err // interrupted
	case errors.As(err, &held):
		return nil, exitWith(exitHeld, fmt.Errorf("lock %q is still held by %s (epoch %d) after waiting %s (--wait)",
			name, holderText(held.Holder), held.Epoch, af.wait))
	}
	return nil, err
}

func (a *app) acquired(l *s3lock.Lease, waited time.Duration, quiet bool) {
	if quiet {
		return
	}
	msg := fmt.Sprintf("s3lock: acquired lock %q (epoch %d, s3://%s/%s)", l.Name(), l.Epoch(), l.Bucket(), l.Key())
	if waited >= time.Second {
		msg += fmt.Sprintf(" after waiting %s", waited.Round(time.Second))
	}
	fmt.Fprintln(a.stderr, msg)
}

// oneName checks that a command got exactly one lock name.
func oneName(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("missing the lock NAME")
	case len(args) > 1:
		return usagef("expected one lock NAME, got %d arguments: %q", len(args), args)
	}
	return nil
}
