package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// watchChange is one line of watch's JSON output: the lock as status shows
// it, and when watch saw it so.
type watchChange struct {
	ObservedAt time.Time `json:"observed_at"`
	lockStatus
}

// watchPhases are the states --until takes by name: those a watched lock
// can be in (an unreadable lease ends the watch with an error instead).
var watchPhases = []s3lock.Phase{s3lock.PhaseFree, s3lock.PhaseHeld, s3lock.PhaseReleased, s3lock.PhaseLapsed}

// notHeld is the --until value for "nobody holds it" (s3lock.State.Held
// false): free, released or lapsed.
const notHeld = "not-held"

// untilFlag is the value of --until: the states that end a watch.
type untilFlag struct {
	names   []string // as given, for messages
	phases  []s3lock.Phase
	notHeld bool
}

func (u *untilFlag) String() string { return strings.Join(u.names, ",") }

func (u *untilFlag) Type() string { return "states" }

// Set adds the comma-separated states in s.
func (u *untilFlag) Set(s string) error {
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(watchPhases, func(p s3lock.Phase) bool { return string(p) == name })
		switch {
		case name == notHeld:
			u.notHeld = true
		case i >= 0:
			u.phases = append(u.phases, watchPhases[i])
		default:
			return fmt.Errorf("%q is not a state: use %s (comma-separated for any of several)", name, untilNames())
		}
		u.names = append(u.names, name)
	}
	return nil
}

// untilNames lists the values --until takes.
func untilNames() string {
	names := []string{notHeld}
	for _, p := range watchPhases {
		names = append(names, string(p))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// given reports whether --until was given.
func (u *untilFlag) given() bool { return len(u.names) > 0 }

// reached reports whether st is one of the states that end the watch.
func (u *untilFlag) reached(st s3lock.State) bool {
	return (u.notHeld && !st.Held) || slices.Contains(u.phases, st.Phase())
}

// waitedFor says what the watch waited for, for the message of one that was
// interrupted: "released or lapsed".
func (u *untilFlag) waitedFor() string {
	names := make([]string, len(u.names))
	for i, n := range u.names {
		names[i] = strings.ReplaceAll(n, "-", " ")
	}
	return strings.Join(names, " or ")
}

var watchLong = `Follow the lock NAME and print its state each time it changes: first the
state watch finds, then one line per new epoch, change of holder, release or
lapse (renewals are not changes). watch runs until it is interrupted (SIGINT,
SIGTERM or SIGHUP), and then exits 0; with --until, it exits 0 as soon as the
lock is in one of the given states (at once if it is already).

States: held, released, lapsed (its holder neither released nor renewed it in
time), free (never acquired). --until takes one or more of them,
comma-separated, or not-held: free, released or lapsed, so that anyone may
take it (waiters in its line go first).

--output json prints one object per line: observed_at (when watch saw the
change) and the fields of 's3lock status --output json' (name, state, epoch,
key, held, holder, acquired_at, expires_at, expires_in_seconds, released_at,
released_by, lease_duration, renewals, metadata; times in RFC 3339, UTC; empty
fields left out). --output text prints a readable line per change. The
default, auto, is text when stdout is a terminal and json otherwise.

Cost: while the lock is held, one small conditional GET every ` + s3lock.DefaultPollInterval.String() + `; while
it is free, a GET of the key its next epoch will have; a LIST now and then.
A lapse is seen within about that long of the lease lapsing by the store's
clock. If the store cannot be reached when watch starts, watch fails at once;
later failures that may pass are retried without a word (--debug logs them),
others end watch with exit code 1.

A slot lock (--slots) has no one holder to follow: watch refuses it with exit
code 7; 's3lock status NAME' shows its holders. A lock held by shared holders
(--shared) is shown as status shows it (mode, holders, pending): a line when a
shared holder joins or leaves, when a writer starts to wait for them, and when
it holds the lock (a LIST of the shares every poll, and a GET of each when
one joins, leaves or lapses).

` + exitCodesHelp

func (a *app) watchCommand() *cobra.Command {
	var output string
	var until untilFlag
	cmd := &cobra.Command{
		Use:   "watch [flags] NAME",
		Short: "Print a lock's state each time it changes hands, is released or lapses",
		Long:  watchLong,
		Example: `  s3lock watch deploy/prod
  s3lock watch deploy/prod --until not-held   # wait until nobody holds it
  s3lock watch cluster/leader -o json | jq -r 'select(.held) | .holder'`,
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "auto", "text", "json"); err != nil {
				return err
			}
			if err := a.needBucket(); err != nil {
				return err
			}
			if err := s3lock.ValidateName(args[0]); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client(ctx, a.bucket, lockConfig{})
			if err != nil {
				return err
			}
			text := output == "text" || (output == "auto" && isTerminal(a.stdout))
			return a.watch(ctx, c, args[0], text, &until)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "auto", "auto (text on a terminal, else json), text or json")
	cmd.Flags().Var(&until, "until", "exit 0 once the lock is in one of these states: "+untilNames()+" (comma-separated)")
	return cmd
}

// watch prints each change of the lock name until ctx ends or, with
// --until, the lock reaches one of its states.
func (a *app) watch(ctx context.Context, c *s3lock.Client, name string, text bool, until *untilFlag) error {
	// Watch rides out a store it cannot reach for as long as it runs; a
	// store that cannot be reached at the start is a configuration to fix,
	// reported at once as run and acquire do (s3lock.WithWait).
	st, err := c.Current(ctx, name)
	switch {
	case err != nil && ctx.Err() == nil:
		return err
	case st.Slots > 1:
		return watchSlotLock(name, st.Slots)
	}
	for st, err := range c.Watch(ctx, name) {
		if err != nil {
			return err // a lock that became a slot lock meanwhile: ErrSlotsMismatch, exit 7
		}
		if err := a.printChange(st, text); err != nil {
			return err
		}
		if until.given() && until.reached(st) {
			return nil
		}
	}
	// The sequence ends only with ctx: a signal.
	var sig signalErr
	switch {
	case !until.given():
		return nil // how a watch ends
	case errors.As(context.Cause(ctx), &sig):
		return exitWith(signalCode(sig.sig), fmt.Errorf("%w before lock %q was %s", sig, name, until.waitedFor()))
	}
	return context.Cause(ctx)
}

// printChange prints one state the watch saw, as JSON or as a line of text.
func (a *app) printChange(st s3lock.State, text bool) error {
	now := time.Now()
	ch := watchChange{ObservedAt: now.UTC().Truncate(time.Millisecond), lockStatus: statusOf(st, now)}
	if !text {
		return a.printJSON(ch)
	}
	_, err := fmt.Fprintf(a.stdout, "%s  %s  %s\n", now.Format(time.DateTime), st.Name, changeText(st, now))
	return err
}

// changeText says where the lock stands, for a person: "held by ci-41
// (epoch 7), lapses in 52s unless renewed".
func changeText(st s3lock.State, now time.Time) string {
	if text, ok := sharedChangeText(st, now); ok {
		return text
	}
	switch st.Phase() {
	case s3lock.PhaseFree:
		return "free (never acquired)"
	case s3lock.PhaseHeld:
		held := fmt.Sprintf("held by %s (epoch %d), lapses in %s unless renewed", holderText(st.Holder), st.Epoch, roundUp(st.ExpiresAt.Sub(now)))
		if !st.HeldUntilAtMost.IsZero() {
			held += ", held at most until " + st.HeldUntilAtMost.UTC().Format(time.RFC3339)
		}
		return held
	case s3lock.PhaseReleased:
		if st.ReleasedBy != "" {
			return fmt.Sprintf("released (epoch %d of %s, forced by %s)", st.Epoch, holderText(st.Holder), holderText(st.ReleasedBy))
		}
		return fmt.Sprintf("released by %s (epoch %d)", holderText(st.Holder), st.Epoch)
	case s3lock.PhaseLapsed:
		return fmt.Sprintf("lapsed: %s (epoch %d) neither renewed nor released it in time", holderText(st.Holder), st.Epoch)
	}
	return string(st.Phase())
}
