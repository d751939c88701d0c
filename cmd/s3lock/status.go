package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// lockStatus is one lock in status's JSON output.
type lockStatus struct {
	Name string `json:"name"`
	// State is "held", "released", "lapsed" (neither released nor renewed
	// in time), "free" (never acquired) or "unreadable" (see Error).
	State            string    `json:"state"`
	Epoch            uint64    `json:"epoch"`
	Key              string    `json:"key,omitempty"`
	Held             bool      `json:"held"`
	Holder           string    `json:"holder,omitempty"`
	AcquiredAt       time.Time `json:"acquired_at,omitzero"`
	ExpiresAt        time.Time `json:"expires_at,omitzero"`
	ExpiresInSeconds *float64  `json:"expires_in_seconds,omitempty"`
	// HeldUntilAtMost is the lease's cap (--max-hold, the holder's clock):
	// it is not renewed past it. Left out without one.
	HeldUntilAtMost time.Time         `json:"held_until_at_most,omitzero"`
	ReleasedAt      time.Time         `json:"released_at,omitzero"`
	ReleasedBy      string            `json:"released_by,omitempty"`
	LeaseDuration   string            `json:"lease_duration,omitempty"`
	Renewals        uint64            `json:"renewals"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	Error           string            `json:"error,omitempty"`
	// Waiters counts the ordered waiters in the lock's line.
	Waiters int `json:"waiters"`
	// Waiting is the lock's line, in the order its waiters will be served
	// (status NAME only; left out when no one waits in line).
	Waiting []waiterStatus `json:"waiting,omitempty"`
	// Slots is n for a lock that admits n holders (--slots n); Holders
	// then lists its held slots, by slot (empty when none is held). Both
	// are left out for a mutex.
	Slots int `json:"slots,omitempty"`
	// Mode is "shared" for a lock held by shared holders (--shared);
	// Holders then lists them, each with its share id (empty when none
	// is). Pending says that Holder is a writer (a run without --shared)
	// that waits for those shared holders, and keeps new ones out. Both
	// are left out for a mutex held without --shared, and a slot lock.
	Mode    string         `json:"mode,omitempty"`
	Pending bool           `json:"pending,omitempty"`
	Holders []holderStatus `json:"holders,omitzero"`
}

func statusOf(s s3lock.State, now time.Time) lockStatus {
	ls := lockStatus{
		Name: s.Name, State: string(s.Phase()), Epoch: s.Epoch, Key: s.Key, Held: s.Held, Holder: s.Holder,
		AcquiredAt: s.AcquiredAt.UTC(), ReleasedAt: s.ReleasedAt.UTC(), ReleasedBy: s.ReleasedBy,
		HeldUntilAtMost: s.HeldUntilAtMost.UTC(),
		Renewals:        s.Renewals, Metadata: s.Metadata, Waiters: s.Waiters,
		Slots: s.Slots, Mode: modeOf(s), Pending: s.Pending, Holders: holdersOf(s, now),
	}
	if s.Err != nil {
		ls.Error = oneLine(s.Err.Error())
	}
	ls.ExpiresAt, ls.ExpiresInSeconds = expiry(s, now)
	if s.LeaseDuration > 0 {
		ls.LeaseDuration = s.LeaseDuration.String()
	}
	return ls
}

// expiry returns when a held lease lapses unless renewed and how many
// seconds that is from now (to a tenth); zero and nil when s is not a held
// lease (a slot lock's expiries are its holders').
func expiry(s s3lock.State, now time.Time) (time.Time, *float64) {
	if s.Phase() != s3lock.PhaseHeld || s.ExpiresAt.IsZero() {
		return time.Time{}, nil
	}
	left := max(0, s.ExpiresAt.Sub(now)).Seconds()
	left = float64(int64(left*10)) / 10
	return s.ExpiresAt.UTC().Truncate(time.Millisecond), &left
}

func checkOutput(output string, allowed ...string) error {
	if !slices.Contains(allowed, output) {
		return usagef("--output %q: use %s", output, strings.Join(allowed, " or "))
	}
	return nil
}

// statusLong is status's help.
const statusLong = `Show the state of the lock NAME, or of every lock whose name starts with
PREFIX (all locks in the bucket without either), as a table or as JSON.

States: held (by HOLDER, lapses in EXPIRES unless renewed), released, lapsed
(its holder neither released nor renewed it in time), free (never acquired).
A lease taken with --max-hold shows as "held at most until TIME" (its holder's
clock): it is not renewed past TIME.

` + expiryHelp + `

A slot lock (one that admits N holders, --slots N) shows as held while any of
its slots is held, or free, with how many of its N slots are held ("held (2 of
3 slots)"); its EPOCH and ACQUIRED are its marker's, the epoch that made it a
slot lock. Below it, a row per held slot ("slot 2") shows that slot's epoch,
holder, expiry and acquisition.

A lock held by shared holders (--shared) shows as "held (shared, 2 holders)",
with a row per shared holder ("share ID": its share id, epoch, holder, expiry
and acquisition) below it. While a run without --shared waits for them, the
lock shows "held (shared); WRITER waits for 2 shared holders", WRITER in
HOLDER with its own epoch and expiry, and the shared holders below it. Once
the last shared holder is gone the lock shows "free (shared, 0 holders)" (its
EPOCH the shared epoch). Shared holders at one time may show different epochs:
a writer that gave up leaves its epoch behind, and later shared holders come
above it. Reading the shared holders costs a LIST and a GET per holder more.

For NAME, status also shows the lock's line: the runs waiting for it with
--order fifo or newest, in the order they will be served (POSITION 1 next),
with when each joined. Nothing is shown when no one waits in line; runs
waiting with --order none are not in the line.

--output json prints one object for NAME and an array for a prefix, with the
fields name, state, epoch, key, held, holder, acquired_at, expires_at,
expires_in_seconds, held_until_at_most (with --max-hold), released_at,
released_by, lease_duration, renewals, metadata and, for NAME when anyone waits, waiting: an array of position,
holder, order, joined_at, ticket, key and metadata (times in RFC 3339, UTC;
empty fields left out). A slot lock also has slots (N) and holders: an array,
by slot, of slot, epoch, key, holder, acquired_at, expires_at,
expires_in_seconds, lease_duration, renewals and metadata (empty when no slot
is held); a mutex has neither field. A lock held by shared holders has mode
("shared") and holders: an array of share, epoch, key, holder, acquired_at,
expires_at, expires_in_seconds, lease_duration, renewals and metadata; and
pending (true) while holder is a writer that waits for them (it holds nothing
yet). A lock whose line is not empty has waiters: how many wait in it.

status gives up after --timeout (default 1m; 0 never) with exit code 1: a
store that answers too slowly, or not at all.

` + exitCodesHelp

// statusFlags are status's flags.
type statusFlags struct {
	prefix, output string
	timeout        time.Duration
}

func (a *app) statusCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [NAME | --prefix PREFIX]",
		Short: "Show who holds a lock and who waits for it, or every lock under a prefix",
		Long:  statusLong,
		Example: `  s3lock status deploy/prod
  s3lock status --prefix deploy/ --output json | jq '.[] | select(.held)'`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("expected at most one lock NAME, got %d arguments", len(args))
			case len(args) == 1 && cmd.Flags().Changed("prefix"):
				return usagef("give a lock NAME or --prefix, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runStatus(cmd.Context(), args, f)
		},
	}
	cmd.Flags().StringVar(&f.prefix, "prefix", "", "show every lock whose name starts with this")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
	durationFlag(cmd.Flags(), &f.timeout, "timeout", defaultStatusTimeout, "give up after this long", durationSpec{zero: "0: never"})
	return cmd
}

// runStatus checks status's arguments and flags, then shows the lock named
// in args (or those under --prefix), giving up after --timeout.
func (a *app) runStatus(ctx context.Context, args []string, f statusFlags) error {
	if err := checkOutput(f.output, "table", "json"); err != nil {
		return err
	}
	if err := a.needBucket(); err != nil {
		return err
	}
	if err := s3lock.ValidatePrefix(f.prefix); err != nil {
		return usagef("--prefix: %w", err)
	}
	if len(args) == 1 {
		if err := s3lock.ValidateName(args[0]); err != nil {
			return err
		}
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, f.timeout, errStatusTimeout)
		defer cancel()
	}
	c, err := a.client(ctx, a.bucket, lockConfig{})
	if err == nil {
		err = a.status(ctx, c, args, f.prefix, f.output)
	}
	if err != nil && errors.Is(context.Cause(ctx), errStatusTimeout) {
		return exitWith(exitError, fmt.Errorf("status did not finish within %s (--timeout): the store answers too slowly, "+
			"or not at all; check the endpoint and the network, or raise --timeout (%w)", f.timeout, err))
	}
	return err
}

// errStatusTimeout ends status at --timeout.
var errStatusTimeout = errors.New("status --timeout passed")

func (a *app) status(ctx context.Context, c *s3lock.Client, args []string, prefix, output string) error {
	if len(args) == 1 {
		return a.statusOfLock(ctx, c, args[0], output)
	}
	states, err := c.List(ctx, prefix)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]lockStatus, len(states))
	for i, s := range states {
		out[i] = statusOf(s, now)
	}
	if output == "json" {
		return a.printJSON(out)
	}
	return printLocks(a.stdout, out)
}

// statusOfLock shows one lock and its line.
func (a *app) statusOfLock(ctx context.Context, c *s3lock.Client, name, output string) error {
	st, err := c.Current(ctx, name)
	if err != nil {
		return err
	}
	line, err := c.Line(ctx, name)
	if err != nil {
		return err
	}
	ls := statusOf(st, time.Now())
	ls.Waiting = waitersOf(line)
	ls.Waiters = len(ls.Waiting)
	if output == "json" {
		return a.printJSON(ls)
	}
	if err := printLocks(a.stdout, []lockStatus{ls}); err != nil {
		return err
	}
	return printLine(a.stdout, ls.Waiting)
}

// printLocks prints locks as a table.
func printLocks(w io.Writer, out []lockStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tEPOCH\tHOLDER\tEXPIRES\tACQUIRED\tWAITING")
	for _, s := range out {
		state := s.State
		switch {
		case s.Slots > 1:
			state = slotsState(s)
		case s.Mode == modeShared:
			state = sharedState(s)
		case s.ReleasedBy != "":
			state += " (forced by " + s.ReleasedBy + ")"
		case s.Held && !s.HeldUntilAtMost.IsZero():
			state += " at most until " + s.HeldUntilAtMost.Format(time.RFC3339)
		}
		holder := s.Holder
		if s.Error != "" {
			holder = s.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Name, state, epochCell(s.Epoch), orDash(holder),
			expiresCell(s.ExpiresInSeconds), timeCell(s.AcquiredAt), s.Waiters)
		// A slot lock's or a shared lock's holders, a row each below it.
		for _, h := range s.Holders {
			fmt.Fprintf(tw, "  %s\theld\t%s\t%s\t%s\t%s\t-\n", holderRow(h), epochCell(h.Epoch), orDash(h.Holder),
				expiresCell(h.ExpiresInSeconds), timeCell(h.AcquiredAt))
		}
	}
	return tw.Flush()
}

// epochCell, orDash, expiresCell and timeCell are the cells of the status
// table; "-" for what is not set.
func epochCell(epoch uint64) string {
	if epoch == 0 {
		return "-"
	}
	return strconv.FormatUint(epoch, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func expiresCell(seconds *float64) string {
	if seconds == nil {
		return "-"
	}
	return "in " + roundUp(time.Duration(*seconds*float64(time.Second))).String()
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func (a *app) forceReleaseCommand() *cobra.Command {
	var f forceReleaseFlags
	cmd := &cobra.Command{
		Use:   "force-release NAME --epoch N [--slot I | --share ID]",
		Short: "Release a lock's epoch whoever holds it (operators only)",
		Long: `Mark epoch N of the lock NAME released, whoever holds it, so the next acquirer
does not have to wait for the lease to lapse. Use 's3lock status NAME' to see
the current epoch. Only that epoch is touched: a newer lease is never
released by mistake. Releasing an epoch that is already released succeeds.

For a slot lock (--slots), --slot I releases epoch N of its slot I (status
shows each held slot with its epoch). Without --slot, N is an epoch of the
lock itself: releasing its marker's epoch makes it a plain lock again (or
lets the next acquirer choose another --slots); do that only once no slot is
held, or the holders of its slots and a new holder may overlap.

For a lock held by shared holders (--shared), --share ID force-releases that
share of shared epoch N (status shows each shared holder with its share id). A
shared epoch itself has no holder of its own and is not force-released; its
shares are.

The holder is not told at once: it finds out at its next renewal (an
's3lock run' then stops its command and exits with code 4). Until then it may
still believe it holds the lock, which is what the epoch as fencing token is
for. The lease (or share) records --holder as the one who released it.

` + exitCodesHelp,
		Example: `  s3lock status deploy/prod
  s3lock force-release deploy/prod --epoch 42
  s3lock force-release ci/runners --epoch 7 --slot 2
  s3lock force-release tf/prod --epoch 3 --share 1a2b3c4d5e6f7a8b`,
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.forceRelease(cmd, args[0], f)
		},
	}
	cmd.Flags().Uint64Var(&f.epoch, "epoch", 0, "the epoch to release (required)")
	cmd.Flags().IntVar(&f.slot, "slot", 0, fmt.Sprintf("of a slot lock, the slot (1 to %d) whose epoch to release", s3lock.MaxSlots))
	cmd.Flags().StringVar(&f.share, "share", "", "of a lock held by shared holders, the share (its id, as status shows it) of epoch N to delete")
	cmd.Flags().StringVar(&f.holder, "holder", "", "who is releasing, recorded in the lease (env "+envHolder+")")
	return cmd
}

// forceReleaseFlags are force-release's flags.
type forceReleaseFlags struct {
	epoch  uint64
	slot   int
	share  string
	holder string
}

// forceRelease releases epoch f.epoch of the lock name, or of its slot
// f.slot with --slot, whoever holds it.
func (a *app) forceRelease(cmd *cobra.Command, name string, f forceReleaseFlags) error {
	if !cmd.Flags().Changed("epoch") {
		return usagef("missing --epoch: the epoch to release (see 's3lock status %s')", name)
	}
	if err := a.needBucket(); err != nil {
		return err
	}
	if err := s3lock.ValidateName(name); err != nil {
		return err
	}
	// A Token's Slot 0 names no slot (the lock's own epoch), so a
	// --slot 0 given is refused here rather than read so.
	slotGiven := cmd.Flags().Changed("slot")
	if slotGiven && f.slot < 1 {
		return usagef("--slot %d: slot %d is outside [1, %d]; leave --slot out to release an epoch of the lock itself", f.slot, f.slot, s3lock.MaxSlots)
	}
	if slotGiven && f.share != "" {
		return usagef("--slot and --share do not mix: a slot lock has no shared holders")
	}
	ctx := cmd.Context()
	c, err := a.client(ctx, a.bucket, lockConfig{holder: f.holder})
	if err != nil {
		return err
	}
	t := s3lock.Token{Bucket: a.bucket, Name: name, Slot: f.slot, Epoch: f.epoch, Share: f.share}
	err = c.ForceRelease(ctx, t)
	switch {
	case err == nil && f.share != "":
		fmt.Fprintf(a.stderr, "s3lock: force-released share %s of epoch %d of lock %q\n", f.share, f.epoch, name)
		return nil
	case err == nil:
		fmt.Fprintf(a.stderr, "s3lock: released epoch %d of %s\n", f.epoch, leaseText(t))
		return nil
	case errors.Is(err, s3lock.ErrInvalidConfig) && !slotGiven && f.share == "":
		return sharedEpochRefused(ctx, c, t, err)
	}
	return err
}
