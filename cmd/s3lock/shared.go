package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// This file is the face of shared leases (s3lock.WithShared, PROTOCOL.md
// §17): the --shared flag of run and acquire, the wording of a lock held by
// shared holders or by a writer that waits for them, and their rows in
// status and watch. What a shared lease is and does is the SDK's.

// sharedHelp explains --shared in the help of the commands that take a lock.
const sharedHelp = `Shared (--shared): any number of --shared holders hold the lock at once, and
a holder without --shared holds it alone: plans share, applies exclude. A
shared holder must not write what the lock guards: nothing stops it, and its
epoch fences nothing (every shared holder of one epoch has it). A holder
without --shared that finds shared holders keeps new ones out and waits for
those there. --shared does not mix with --slots.`

// registerShared adds --shared to the flags of a command that takes a lock.
// No environment variable sets it, as none sets --slots: a run inside a
// run's command must not inherit it.
func registerShared(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "shared", false, "take a shared lease: any number of --shared holders at once, or one holder without it; "+
		"for work that only reads what the lock guards")
}

// checkShared refuses --shared with --slots N > 1 (the SDK would refuse it at
// the acquisition), before anything is acquired.
func (af *acquireFlags) checkShared() error {
	if af.shared && af.slots > 1 {
		return usagef("--shared and --slots %d do not mix: a lock is either a slot lock or one with shared holders", af.slots)
	}
	return nil
}

// heldByText says who holds a lock an acquisition found held, with the
// epoch: "ci-7 (epoch 4)", "a shared holder, ci-8 (epoch 3)", or "2 shared
// holders (epoch 3, ci-8 among them)".
func heldByText(h *s3lock.HeldError) string {
	switch {
	case h.Shared && h.Waiting > 1:
		return fmt.Sprintf("%s (epoch %d, %s among them)", sharesText(h.Waiting), h.Epoch, holderText(h.Holder))
	case h.Shared:
		return fmt.Sprintf("a shared holder, %s (epoch %d)", holderText(h.Holder), h.Epoch)
	}
	return fmt.Sprintf("%s (epoch %d)", holderText(h.Holder), h.Epoch)
}

// sharesText is "1 shared holder" or "n shared holders".
func sharesText(n int) string {
	if n == 1 {
		return "1 shared holder"
	}
	return fmt.Sprintf("%d shared holders", n)
}

// modeShared is the mode of a lock held by shared holders in status's JSON.
const modeShared = "shared"

// modeOf is a lock's mode in status's JSON: "shared" while shared holders
// hold it (and while a writer waits for them), else "" (left out: a mutex, a
// slot lock).
func modeOf(s s3lock.State) string {
	if s.Shared || s.Pending {
		return modeShared
	}
	return ""
}

// sharedState is the STATE of a lock held by shared holders in status's
// table: "held (shared, 2 holders)", or, while a writer waits for them,
// "held (shared); ci-9 waits for 2 shared holders".
func sharedState(s lockStatus) string {
	if s.Pending {
		return fmt.Sprintf("%s (shared); %s waits for %s", s.State, holderText(s.Holder), sharesText(len(s.Holders)))
	}
	if len(s.Holders) == 1 {
		return s.State + " (shared, 1 holder)"
	}
	return fmt.Sprintf("%s (shared, %d holders)", s.State, len(s.Holders))
}

// holderRow is the first cell of a holder's row below its lock in status's
// table: "slot 2", or "share 1a2b3c4d5e6f7a8b".
func holderRow(h holderStatus) string {
	if h.Share != "" {
		return "share " + h.Share
	}
	return fmt.Sprintf("slot %d", h.Slot)
}

// sharedChangeText is watch's line for a lock held by shared holders, or by
// a writer that waits for them: "held by 2 shared holders (epoch 3): ci-7
// (lapses in 52s), ci-8 (lapses in 50s)", or "ci-9 (epoch 4) waits for 2
// shared holders: ...". ok is false for any other lock.
func sharedChangeText(st s3lock.State, now time.Time) (text string, ok bool) {
	holders := make([]string, len(st.Holders))
	for i, h := range st.Holders {
		holders[i] = fmt.Sprintf("%s (lapses in %s)", holderText(h.Holder), roundUp(h.ExpiresAt.Sub(now)))
	}
	list := strings.Join(holders, ", ")
	switch {
	case st.Pending && len(holders) == 0: // they ended as it was read
		return fmt.Sprintf("%s (epoch %d) waits for the shared holders before it", holderText(st.Holder), st.Epoch), true
	case st.Pending:
		return fmt.Sprintf("%s (epoch %d) waits for %s: %s", holderText(st.Holder), st.Epoch, sharesText(len(st.Holders)), list), true
	case !st.Shared:
		return "", false
	case len(st.Holders) == 0:
		return fmt.Sprintf("no shared holder holds it now (shared epoch %d)", st.Epoch), true
	}
	return fmt.Sprintf("held by %s (epoch %d): %s", sharesText(len(st.Holders)), st.Epoch, list), true
}

// sharedEpochRefused words the SDK's refusal (err) to force-release the
// epoch t names when shares of that epoch hold the lock: a shared epoch has
// no holder of its own, and the operator force-releases its shares, which
// it lists. Any other refusal is returned as it is.
func sharedEpochRefused(ctx context.Context, c *s3lock.Client, t s3lock.Token, err error) error {
	st, cerr := c.Current(ctx, t.Name)
	if cerr != nil || modeOf(st) == "" {
		return err
	}
	var shares []string
	for _, h := range st.Holders {
		if id := h.Share; id != "" && h.Epoch == t.Epoch {
			shares = append(shares, fmt.Sprintf("--share %s (%s)", id, holderText(h.Holder)))
		}
	}
	if len(shares) == 0 {
		return err
	}
	return usagef("epoch %d of lock %q (s3://%s/%s) is a shared epoch, held by its shares (%s), with no holder of its own to release; "+
		"force-release a share of it instead: %s", t.Epoch, t.Name, t.Bucket, t.Key(), sharesText(len(shares)), strings.Join(shares, ", "))
}
