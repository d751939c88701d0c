package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/lockset"
)

// orderHelp explains --order in the help of the commands that wait.
const orderHelp = `Order (--order): waiters wait in the lock's line and are served first come,
first served (fifo, the default), across processes and hosts. With newest they
wait in the line too, but a newer waiter with --order newest makes the older
ones stop waiting within about a second: they exit with code 5 without the
lock (for deploys, where an older commit must not deploy after a newer one).
With none, s3lock races for the lock when it is released, and takes a free
lock even while others wait in line. A waiter that is killed holds up the line
for up to about 10s, until its place lapses. 's3lock status NAME' shows the
line.`

// acquireFlags are the flags of the commands that take a lock.
type acquireFlags struct {
	lock     lockConfig
	wait     time.Duration
	maxHold  time.Duration // --max-hold: the lease's cap (0: none)
	quiet    bool
	metadata map[string]string
	order    s3lock.Order
	slots    int  // --slots: how many holders the lock admits (1: a mutex)
	shared   bool // --shared: a share of the lock (s3lock.WithShared)
}

func (af *acquireFlags) register(cmd *cobra.Command, defaultLease time.Duration) {
	fs := cmd.Flags()
	fs.StringVar(&af.lock.holder, "holder", "", "identity written into the lease, shown to whoever finds the lock held (env "+envHolder+"; default user@host:pid plus a random suffix)")
	durationFlag(fs, &af.lock.lease, "lease", defaultLease, "how long the lease lasts unless renewed", leaseSpec)
	durationFlag(fs, &af.wait, "wait", defaultWait, "how long to wait for a held lock", durationSpec{zero: "0 tries once"})
	durationFlag(fs, &af.maxHold, "max-hold", 0, "hold the lease at most this long after acquiring it: it is not renewed past it, "+
		"and is lost there as at any lost lease (longer than --lease)", durationSpec{zero: "0: no limit"})
	fs.StringToStringVar(&af.metadata, "metadata", nil, "KEY=VALUE pairs stored with the lease, shown by status --output json and to waiters (repeatable)")
	fs.Lookup("metadata").DefValue = "" // not "[]" in --help
	fs.BoolVarP(&af.quiet, "quiet", "q", false, "print no progress or acquisition messages")
	af.order = s3lock.OrderFIFO
	fs.Var(orderFlag{&af.order}, "order", "in which order waiters get the lock: fifo (first come, first served), newest (a newer waiter with --order newest makes older ones give up with exit code 5) or none (race for it when it is released)")
	registerSlots(fs, &af.slots)
	registerShared(fs, &af.shared)
}

// leaseOptions are the options of af's lease besides its order, slots and
// wait: its metadata, its cap and whether it is shared.
func (af *acquireFlags) leaseOptions() []s3lock.Option {
	var opts []s3lock.Option
	if af.shared {
		opts = append(opts, s3lock.WithShared())
	}
	if len(af.metadata) > 0 {
		opts = append(opts, s3lock.WithMetadata(af.metadata))
	}
	if af.maxHold > 0 {
		opts = append(opts, s3lock.WithMaxHold(af.maxHold))
	}
	return opts
}

// check refuses flags that do not go together, before anything is acquired
// (the SDK would refuse them at the acquisition): a --max-hold that does not
// outlast --lease, --shared with --slots.
func (af *acquireFlags) check() error {
	if af.maxHold > 0 && af.maxHold <= af.lock.lease {
		return usagef("--max-hold %s must be longer than --lease %s: a lease is held at least one lease long", af.maxHold, af.lock.lease)
	}
	return af.checkShared()
}

// orderFlag is the value of --order, checked by s3lock.ParseOrder.
type orderFlag struct{ p *s3lock.Order }

func (o orderFlag) String() string {
	if o.p == nil {
		return ""
	}
	return string(*o.p)
}

func (o orderFlag) Set(s string) error {
	v, err := s3lock.ParseOrder(s)
	if err != nil {
		// pflag puts the flag's name first; the SDK's prefix would only
		// repeat who is speaking.
		return errors.New(strings.TrimPrefix(err.Error(), "s3lock: "))
	}
	*o.p = v
	return nil
}

func (o orderFlag) Type() string { return "fifo|newest|none" }

// acquire takes the lock name with c: once with --wait 0, else waiting up
// to af.wait for a lock that is held, in af.order, with progress on stderr.
// The SDK decides (s3lock.WithWait): a store that cannot be reached (or
// refuses the credentials) at the first attempt is reported at once; while
// waiting, it rides out transient store failures. acquire only words the
// outcome.
func (a *app) acquire(ctx context.Context, c *s3lock.Client, name string, af acquireFlags, extra ...s3lock.Option) (*s3lock.Lease, error) {
	opts := append([]s3lock.Option{s3lock.WithOrder(af.order), s3lock.WithSlots(af.slots)}, extra...)
	opts = append(opts, af.leaseOptions()...)
	// The SDK calls the wait observer only while it waits, never with
	// --wait 0; a quiet reporter keeps it so whatever it calls.
	p := newProgress(a.stderr, name, af.wait, af.quiet || af.wait == 0, af.slots > 1 || af.shared)
	lease, err := c.Acquire(ctx, name, append(opts, s3lock.WithWait(af.wait), s3lock.WithWaitObserver(p.observe))...)
	p.stop()
	var held *s3lock.HeldError
	switch {
	case err == nil:
		a.acquired(lease, p.waited(), af.quiet)
		return lease, nil
	case !errors.As(err, &held):
		// Another number of slots (exit 7), superseded (--order newest:
		// exit 5), interrupted, or the store failed.
		return nil, slotsMismatch(err, af.slots)
	case ctx.Err() != nil:
		return nil, err // interrupted
	case af.wait == 0: // tried once: held
		return nil, heldNow(name, held, af)
	}
	// The wait (--wait) ran out.
	switch {
	case held.Ahead > 0:
		return nil, exitWith(exitHeld, fmt.Errorf("lock %q still had %s ahead in its line after waiting %s (--wait); wait longer, or use --order none",
			name, waitersText(held.Ahead), af.wait))
	case af.slots > 1, af.shared: // the SDK's words say which slot runs out first, or whether the writer is pending
		return nil, exitWith(exitHeld, fmt.Errorf("after waiting %s (--wait), %s", af.wait, sdkText(held)))
	}
	return nil, exitWith(exitHeld, fmt.Errorf("lock %q is still held by %s after waiting %s (--wait)", name, heldByText(held), af.wait))
}

// heldNow words a lock found held by an acquisition that tried once (--wait
// 0) with af: held, all its slots held, or free with others ahead in its
// line.
func heldNow(name string, held *s3lock.HeldError, af acquireFlags) error {
	order := af.order
	switch {
	case held.Queued: // free, but others wait in its line
		return exitWith(exitHeld, fmt.Errorf("lock %q is free, but its line has %s ahead of you (--order %s); use --wait to wait your turn, or --order none to take it now",
			name, waitersText(held.Ahead), order))
	case af.slots > 1: // every slot is held: the SDK's words say which runs out first
		return exitWith(exitHeld, fmt.Errorf("%s; use --wait to wait for a slot", sdkText(held)))
	case af.shared && !held.Shared: // the SDK's words say whether the writer itself waits for shared holders
		return exitWith(exitHeld, fmt.Errorf("%s; use --wait to wait for it", sdkText(held)))
	case held.Shared: // each share lapses on its own: no one expiry to show
		return exitWith(exitHeld, fmt.Errorf("lock %q is held by %s%s; use --wait to wait until the shared holders have ended",
			name, heldByText(held), inLineText(held.Ahead)))
	}
	return exitWith(exitHeld, fmt.Errorf("lock %q is held by %s for at most %s more%s; use --wait to wait for it",
		name, heldByText(held), roundUp(held.ExpiresIn), inLineText(held.Ahead)))
}

// sdkText is the SDK's own sentence for err, without its "s3lock: " (the
// CLI says who is speaking): for what only the SDK knows, such as which
// slot of a slot lock runs out first.
func sdkText(err error) string { return strings.TrimPrefix(err.Error(), "s3lock: ") }

// inLineText is ", and its line has N waiters" when n > 0, else "".
func inLineText(n int) string {
	if n == 0 {
		return ""
	}
	return ", and its line has " + waitersText(n)
}

// waitersText is "1 waiter" or "n waiters".
func waitersText(n int) string {
	if n == 1 {
		return "1 waiter"
	}
	return fmt.Sprintf("%d waiters", n)
}

func (a *app) acquired(l *s3lock.Lease, waited time.Duration, quiet bool) {
	if quiet {
		return
	}
	t := l.Token()
	msg := fmt.Sprintf("s3lock: acquired %s (epoch %d, s3://%s/%s)", leaseText(t), t.Epoch, t.Bucket, t.Key())
	if waited >= time.Second {
		msg += fmt.Sprintf(" after waiting %s", waited.Round(time.Second))
	}
	fmt.Fprintln(a.stderr, msg)
}

// acquireForRun takes what `s3lock run` runs its command under: the lock
// name (as acquire does), or the lock set names, all or none.
func (a *app) acquireForRun(ctx context.Context, c *s3lock.Client, names []string, af acquireFlags) (*holding, error) {
	if len(names) == 1 {
		lease, err := a.acquire(ctx, c, names[0], af)
		if err != nil {
			return nil, err
		}
		return holdingLease(lease), nil
	}
	opts := append([]s3lock.Option{s3lock.WithOrder(af.order), s3lock.WithWait(af.wait)}, af.leaseOptions()...)
	p := newProgress(a.stderr, strings.Join(names, " "), af.wait, af.quiet || af.wait == 0, af.shared)
	set, err := lockset.Acquire(ctx, c, names, append(opts, s3lock.WithWaitObserver(p.observe))...)
	p.stop()
	var held *s3lock.HeldError
	switch {
	case err == nil:
		a.acquiredSet(set, p.waited(), af.quiet)
		return holdingSet(set), nil
	case errors.As(err, &held) && ctx.Err() == nil:
		return nil, exitWith(exitHeld, err) // held after --wait (or at once with --wait 0): nothing is held
	case errors.Is(err, s3lock.ErrLeaseLost):
		// A lock the set had taken ended while it waited for the others
		// (--max-hold reached, say): no command ran, so it is not exit 4's
		// "the work may not have been exclusive".
		return nil, exitWith(exitError, err)
	}
	return nil, err
}

// acquiredSet reports a lock set taken, unless quiet.
func (a *app) acquiredSet(s *lockset.Set, waited time.Duration, quiet bool) {
	if quiet {
		return
	}
	var taken []string
	for _, l := range s.Leases() {
		taken = append(taken, fmt.Sprintf("%q (epoch %d)", l.Token().Name, l.Token().Epoch))
	}
	msg := "s3lock: acquired the lock set " + strings.Join(taken, ", ")
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
