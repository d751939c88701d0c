// Package runenv is the one home of the environment `s3lock run` hands the
// command it runs: which lease the command runs under. The CLI writes it
// (Lease.Environ); the provider reads it to take part in an outer run's lease
// instead of waiting on it (Read); so do the lab's programs that stand for a
// user's command (the chaos worker, the demo's timeline steps). Every name of
// that environment is spelled here and nowhere else.
package runenv

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The variables `s3lock run` sets in its command's environment.
const (
	Epoch  = "S3LOCK_EPOCH"
	Key    = "S3LOCK_KEY"
	Holder = "S3LOCK_HOLDER"
	Bucket = "S3LOCK_BUCKET"
	Name   = "S3LOCK_NAME"
	Slot   = "S3LOCK_SLOT"
	Slots  = "S3LOCK_SLOTS"
)

// Locks is the variable `s3lock run A B ... -- CMD` sets to the number of
// locks its command holds together (a lock set, taken in the order of the
// names sorted); then S3LOCK_NAME_i, S3LOCK_EPOCH_i and S3LOCK_KEY_i (i from
// 1) describe each, in that order, and the variables above its first.
const Locks = "S3LOCK_LOCKS"

// Token is the variable `s3lock renew` and `s3lock release` read a lease
// token from when --token is not given (a CI step exports it for the next).
const Token = "S3LOCK_TOKEN"

// SSECustomerKey is the variable the CLI reads its SSE-C key from
// (--sse-customer-key).
const SSECustomerKey = "S3LOCK_SSE_CUSTOMER_KEY"

// withheld are the variables `s3lock run` removes from its command's
// environment: s3lock's own secrets, which the command has no use for and
// could leak (a command that prints its environment, or hands it to a tool
// that logs it). The SSE-C key reads and rewrites every object of the
// bucket encrypted with it; a lease token releases someone's lease.
var withheld = []string{SSECustomerKey, Token}

// Withheld returns the names of the variables `s3lock run` removes from its
// command's environment.
func Withheld() []string { return slices.Clone(withheld) }

// Command returns the environment of the command `s3lock run` starts under
// the lease l: environ (s3lock's own, os.Environ) without the withheld
// variables (in any letter case: Windows reads names so), then the lease's.
func (l Lease) Command(environ []string) []string {
	return append(withoutRun(environ), l.Environ()...)
}

// withoutRun returns environ without the withheld variables and without an
// outer run's lock set (S3LOCK_LOCKS, S3LOCK_NAME_i, ...): a run inside a
// set's run must not leave the outer set's leases beside its own, where a
// reader (Member) would mix them with its variables.
func withoutRun(environ []string) []string {
	env := Without(environ, withheld...)
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return strings.EqualFold(name, Locks) || setMember(name)
	})
}

// setMember reports whether name is one of a lock set's per-lock variables:
// S3LOCK_NAME_i, S3LOCK_EPOCH_i or S3LOCK_KEY_i (in any letter case).
func setMember(name string) bool {
	upper := strings.ToUpper(name)
	for _, v := range []string{Name, Epoch, Key} {
		if i, ok := strings.CutPrefix(upper, v+"_"); ok {
			if _, err := strconv.Atoi(i); err == nil {
				return true
			}
		}
	}
	return false
}

// Without returns environ without the variables named, in any letter case
// (Windows reads names so). Commands s3lock starts get their environment
// through it, without the withheld variables (Withheld).
func Without(environ []string, names ...string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(names, func(w string) bool { return strings.EqualFold(name, w) }) {
			env = append(env, kv)
		}
	}
	return env
}

// Lease is what the command learns of the lease it runs under.
type Lease struct {
	Bucket, Name string
	Key          string // the key of the lease's object in the bucket
	Holder       string // the holder identity written into the lease
	Epoch        uint64 // the fencing token (the slot's, for a slot lease)
	// Slot is the slot held, 1 to Slots; 0 for a mutex, whose Slots is 1.
	Slot, Slots int
}

// vars lists the variables in the order Environ writes them, each with the
// line `s3lock run --help` shows for it.
var vars = []struct{ name, help string }{
	{Epoch, "the lease's epoch: the fencing token, only ever grows (with --slots, its slot's)"},
	{Key, "the key of the lease's object in the bucket"},
	{Holder, "the holder identity written into the lease"},
	{Bucket, "the bucket"},
	{Name, "the lock name"},
	{Slot, "with --slots N > 1, the slot held, 1 to N; 0 for a mutex"},
	{Slots, "how many holders the lock admits: N, 1 for a mutex"},
}

// Environ returns the lease as NAME=VALUE entries, for exec.Cmd.Env.
func (l Lease) Environ() []string {
	values := map[string]string{
		Epoch: strconv.FormatUint(l.Epoch, 10), Key: l.Key, Holder: l.Holder,
		Bucket: l.Bucket, Name: l.Name, Slot: strconv.Itoa(l.Slot), Slots: strconv.Itoa(l.Slots),
	}
	env := make([]string, 0, len(vars))
	for _, v := range vars {
		env = append(env, v.name+"="+values[v.name])
	}
	return env
}

// SetEnviron returns the environment of a command that holds the lock set
// ls (in the set's order): environ as Command keeps it, the first lease's
// variables, S3LOCK_LOCKS, then each lease's S3LOCK_NAME_i, S3LOCK_EPOCH_i
// and S3LOCK_KEY_i, i from 1.
func SetEnviron(environ []string, ls []Lease) []string {
	env := append(withoutRun(environ), ls[0].Environ()...)
	env = append(env, Locks+"="+strconv.Itoa(len(ls)))
	for i, l := range ls {
		n := strconv.Itoa(i + 1)
		env = append(env, Name+"_"+n+"="+l.Name, Epoch+"_"+n+"="+strconv.FormatUint(l.Epoch, 10), Key+"_"+n+"="+l.Key)
	}
	return env
}

// Help describes the variables for a command's help text: a name and its
// meaning per entry, indented by two spaces, wrapped to fit 80 columns.
func Help() string { return helpOf(vars) }

// SetHelp describes a lock set's variables for a command's help text, as
// Help does the others.
func SetHelp() string {
	return helpOf([]struct{ name, help string }{{Locks, "with several lock names, how many; then S3LOCK_NAME_i, " +
		"S3LOCK_EPOCH_i and S3LOCK_KEY_i (i from 1) for each lock, in the order of the names sorted; the " +
		"variables above are the first lock's"}})
}

func helpOf(entries []struct{ name, help string }) string {
	const indent, width = 17, 80
	var b strings.Builder
	for _, v := range entries {
		line := fmt.Sprintf("  %-13s ", v.name)
		for _, word := range strings.Fields(v.help) {
			if len(line)+1+len(word) > width {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", indent-1)
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Present reports whether getenv shows a lease from `s3lock run` at all
// (its epoch is set), so that a reader can tell "not under s3lock run" from
// "under it, but the environment is broken". S3LOCK_BUCKET alone says
// nothing: it is also the CLI's default bucket, which users set for
// themselves.
func Present(getenv func(string) string) bool { return getenv(Epoch) != "" }

// Member returns getenv as the command of a lock set sees its member name:
// that member's S3LOCK_NAME_i, S3LOCK_EPOCH_i and S3LOCK_KEY_i in the
// single-lock variables, for a reader of one lease (Read) that looks for its
// own lock. Without a set, or when no member is named so, getenv itself.
func Member(getenv func(string) string, name string) func(string) string {
	n, err := strconv.Atoi(getenv(Locks))
	if err != nil || n < 1 || n > maxSetLocks || !firstOfSet(getenv) {
		return getenv // no set, or not one `s3lock run` wrote: the single lease alone
	}
	for i := 1; i <= n; i++ {
		idx := strconv.Itoa(i)
		if getenv(Name+"_"+idx) != name {
			continue
		}
		return func(v string) string {
			switch v {
			case Name, Epoch, Key:
				return getenv(v + "_" + idx)
			}
			return getenv(v)
		}
	}
	return getenv
}

// maxSetLocks is the most locks a set holds (package lockset's bound).
const maxSetLocks = 64

// firstOfSet reports whether the single-lock variables are the set's first
// lock's, as `s3lock run` writes them: a set's variables that do not agree
// with them are not this run's.
func firstOfSet(getenv func(string) string) bool {
	for _, v := range []string{Name, Epoch, Key} {
		if getenv(v) == "" || getenv(v+"_1") != getenv(v) {
			return false
		}
	}
	return true
}

// Read returns the lease getenv describes (os.Getenv, for the process's
// own environment). Every variable must be there and well formed, except
// S3LOCK_SLOT and S3LOCK_SLOTS, which a CLI from before slot locks does not
// set: without them the lease is a mutex's. An error names the variable and
// what is wrong with it.
func Read(getenv func(string) string) (Lease, error) {
	l := Lease{
		Bucket: getenv(Bucket), Name: getenv(Name), Key: getenv(Key), Holder: getenv(Holder),
		Slots: 1,
	}
	for _, name := range []string{Epoch, Key, Bucket, Name} {
		if getenv(name) == "" {
			return Lease{}, fmt.Errorf("%s is not set: the command does not run under `s3lock run`", name)
		}
	}
	var err error
	if l.Epoch, err = strconv.ParseUint(getenv(Epoch), 10, 64); err != nil {
		return Lease{}, fmt.Errorf("%s=%q is not an epoch (a whole number): %w", Epoch, getenv(Epoch), err)
	}
	slot, slots := getenv(Slot), getenv(Slots)
	if (slot == "") != (slots == "") {
		return Lease{}, fmt.Errorf("%s=%q and %s=%q: `s3lock run` sets both or neither", Slot, slot, Slots, slots)
	}
	if slot == "" {
		return l, nil
	}
	if l.Slot, err = strconv.Atoi(slot); err != nil {
		return Lease{}, fmt.Errorf("%s=%q is not a slot number: %w", Slot, slot, err)
	}
	if l.Slots, err = strconv.Atoi(slots); err != nil {
		return Lease{}, fmt.Errorf("%s=%q is not a number of slots: %w", Slots, slots, err)
	}
	mutex := l.Slot == 0 && l.Slots == 1
	if !mutex && (l.Slot < 1 || l.Slot > l.Slots) {
		return Lease{}, fmt.Errorf("%s=%d and %s=%d: a slot is 1 to %s (0 with %s=1, a mutex)", Slot, l.Slot, Slots, l.Slots, Slots, Slots)
	}
	return l, nil
}
