// Package procfacts reads what the kernel says about processes: a
// process's parent, process group, session, start time, state and command
// name, every process of this pid namespace, the clock start times are
// counted on, the host's boot and pid namespace, the process at the other
// end of a unix socket. It is the one reader of those facts for the two
// helpers that follow processes: the provider's run guard
// (internal/runguard), which follows a terraform run, and the CLI's
// watchdog (cmd/s3lock/watchdog_linux.go), which waits for a command's
// process group to be gone.
//
// Linux reads /proc, macOS sysctl (kern.proc); on other systems every fact
// is an *UnsupportedError. It only reads: what to make of the facts is its
// callers'.
package procfacts

import (
	"errors"
	"fmt"
)

// Process is what the kernel says of one process.
type Process struct {
	PID, PPID, PGID int
	// SID is its session (0 where unknown: a session led from outside
	// this pid namespace, or a system that does not say).
	SID int
	// Start is its start time, in the unit of Now: a pid reused by another
	// process has another.
	Start  uint64
	Zombie bool
	// Name is its command name.
	Name string
}

// ErrGone marks a process that does not exist (any more).
var ErrGone = errors.New("process is gone")

// UnsupportedError is a fact this system does not tell: not Linux or macOS
// (System), or one whose /proc or sysctl cannot be read (Err says why).
type UnsupportedError struct {
	Err error
	// System is true on a system procfacts has no reader for at all.
	System bool
}

func (e *UnsupportedError) Error() string {
	return "procfacts: this system does not tell process facts: " + e.Err.Error()
}

func (e *UnsupportedError) Unwrap() error { return e.Err }

// unsupported is the *UnsupportedError of err.
func unsupported(err error) error { return &UnsupportedError{Err: err} }

// Descendants returns pid's descendants, every one once, down the tree
// through each process's children (on Linux from each process's own list
// of children where the kernel keeps one, else from one snapshot of every
// process).
func Descendants(pid int) []Process { return descendants(pid) }

// GroupRunning reports whether a process of process group pgid is running
// (not a zombie); err when every process cannot be read.
func GroupRunning(pgid int) (bool, error) {
	all, err := All()
	if err != nil {
		return false, err
	}
	for _, p := range all {
		if p.PGID == pgid && !p.Zombie {
			return true, nil
		}
	}
	return false, nil
}

// descendantsFrom walks down from root through children, which gives a
// process's children: every descendant once (the tree has no cycles, and a
// pid reused meanwhile shows up once more at most).
func descendantsFrom(root int, children func(int) []Process) []Process {
	var out []Process
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, kid := range children(pid) {
			if seen[kid.PID] {
				continue
			}
			seen[kid.PID] = true
			out = append(out, kid)
			queue = append(queue, kid.PID)
		}
	}
	return out
}

// descendantsOfSnapshot returns root's descendants from one snapshot of
// every process.
func descendantsOfSnapshot(root int) []Process {
	all, err := All()
	if err != nil {
		return nil
	}
	kids := map[int][]Process{}
	for _, p := range all {
		if p.PID != p.PPID {
			kids[p.PPID] = append(kids[p.PPID], p)
		}
	}
	return descendantsFrom(root, func(pid int) []Process { return kids[pid] })
}

// gone is the error of process pid that does not exist.
func gone(pid int) error { return fmt.Errorf("process %d: %w", pid, ErrGone) }
