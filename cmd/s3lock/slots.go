package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// This file is the face of slot locks (s3lock.Slots, PROTOCOL.md §14): the
// --slots flag of run and acquire, the wording of a lock that admits another
// number of holders, and a slot lock's holders in status. What a slot lock
// is and does is the SDK's.

// slotsHelp explains --slots in the help of the commands that take a lock.
var slotsHelp = `Slots (--slots N): the lock admits up to N holders at once instead of one, N
from 1 to ` + strconv.Itoa(s3lock.MaxSlots) + ` (1, the default, is a plain mutex): for a pool of N licences,
runners or connections. Each holder holds one of the lock's N slots: its
epoch is the fencing token of that slot, growing with every holder of the
slot, not across slots. Every holder of a lock must use the same --slots: one
that asks for another N, or for a mutex, exits 7 at once and never gets a
slot. With --order fifo or newest, waiters line up in the lock's one line and
the head of the line takes whichever slot frees first. 's3lock status NAME'
lists the holders, each with its slot.`

// registerSlots adds --slots to the flags of a command that takes a lock.
// No environment variable sets it: S3LOCK_SLOTS is what run exports to its
// command, and an s3lock run inside that command, likely of another lock,
// must not inherit it.
func registerSlots(fs *pflag.FlagSet, p *int) {
	*p = 1
	fs.Var(slotsFlag{p}, "slots", fmt.Sprintf("how many holders the lock admits at once, 1 to %d (1: a mutex); every holder of the lock must use the same", s3lock.MaxSlots))
}

// slotsFlag is the value of --slots: a number of holders from 1 to
// s3lock.MaxSlots.
type slotsFlag struct{ p *int }

func (f slotsFlag) String() string {
	if f.p == nil {
		return "1"
	}
	return strconv.Itoa(*f.p)
}

func (f slotsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a whole number")
	}
	if n < 1 || n > s3lock.MaxSlots {
		return fmt.Errorf("%d is out of range: a lock admits 1 to %d holders (1: a mutex)", n, s3lock.MaxSlots)
	}
	*f.p = n
	return nil
}

func (f slotsFlag) Type() string { return "n" }

// slotsMismatch turns the SDK's *SlotsError (the lock admits another number
// of holders than want) into s3lock's message and exit code 7; any other
// error is returned as it is.
func slotsMismatch(err error, want int) error {
	var se *s3lock.SlotsError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Slots == 0:
		return exitWith(exitSlotsMismatch, fmt.Errorf("lock %q has shared and exclusive holders (its epoch s3://%s/%s says so: "+
			"--shared and runs without it take it), but --slots %d was given: a lock is either a slot lock or one with shared "+
			"holders; use another lock name for the slot lock", se.Name, se.Bucket, se.Key, want))
	case se.Shared:
		return exitWith(exitSlotsMismatch, fmt.Errorf("lock %q admits %d holders (a slot lock: its marker s3://%s/%s says so), "+
			"but --shared was given: a slot lock has no shared holders; take a slot with --slots %d (without --shared), "+
			"or use another lock name", se.Name, se.Slots, se.Bucket, se.Key, se.Slots))
	}
	asked := fmt.Sprintf("--slots %d was given", want)
	if want <= 1 {
		asked = "it was asked for as a mutex (no --slots, or --slots 1)"
	}
	return exitWith(exitSlotsMismatch, fmt.Errorf("lock %q admits %d holders (its marker s3://%s/%s says so), but %s; "+
		"every holder of a lock must use the same --slots: use --slots %d, or another lock name "+
		"(an operator changes it by force-releasing the marker's epoch, shown by 's3lock status %s', once no slot is held)",
		se.Name, se.Slots, se.Bucket, se.Key, asked, se.Slots, se.Name))
}

// watchSlotLock is watch's refusal of a slot lock, which has no one holder
// to follow.
func watchSlotLock(name string, slots int) error {
	return exitWith(exitSlotsMismatch, fmt.Errorf("lock %q admits %d holders (a slot lock, --slots %d); watch follows the one holder of a mutex: "+
		"see who holds its slots with 's3lock status %s'", name, slots, slots, name))
}

// slotsState is the STATE of a slot lock in status's table: "held (2 of 3
// slots)".
func slotsState(s lockStatus) string {
	return fmt.Sprintf("%s (%d of %d slots)", s.State, len(s.Holders), s.Slots)
}
