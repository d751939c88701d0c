package runguard

import (
	"fmt"
	"os"

	"github.com/s3lock/terraform-provider-s3lock/internal/procfacts"
)

// treeWatch follows the processes of the run: everything terraform started,
// directly or not (providers, provisioners' commands and what they start),
// to tell, once terraform is gone, whether it ended cleanly. A clean
// terraform waits for its children, and a provisioner's command for what it
// starts before terraform goes on; so a process of the run still running
// afterwards means terraform was killed — even when no s3lock provider
// process was running then (terraform destroy's destroy walks, another
// provider's operation). TERRAFORM-PROCESSES.md ("A run's processes after a
// kill") says what it sees and what it cannot.
type treeWatch struct {
	run  Run
	self int
	// pgid and sid are terraform's process group and session, which its
	// descendants keep unless they leave them. A process that left
	// terraform's session (setsid: a daemon) is not the run's; an orphan
	// found in its process group is (see orphan).
	pgid, sid int
	// reapers are terraform's ancestors above its parent (pid → start
	// time): a process of the run whose parent dies is re-parented to the
	// nearest subreaper among them, or to init.
	reapers map[int]uint64
	seen    map[int]uint64 // pid → start time of every descendant seen
	// lastAlive is the last time (in the unit of start times) terraform
	// was seen running: what starts later is not the run's.
	lastAlive uint64
}

func newTreeWatch(run Run) *treeWatch {
	w := &treeWatch{run: run, self: os.Getpid(), pgid: -1, sid: -1, reapers: map[int]uint64{}, seen: map[int]uint64{}}
	p, err := procOf(run.PID)
	if err != nil || p.Start != run.Start {
		return w
	}
	w.pgid, w.sid = p.PGID, p.SID
	parent, err := procOf(p.PPID)
	for pid := parent.PPID; err == nil && pid > 0 && len(w.reapers) < maxAncestors; pid = parent.PPID {
		if parent, err = procOf(pid); err == nil {
			w.reapers[pid] = parent.Start
		}
	}
	return w
}

// maxAncestors bounds the walks up a process's ancestors.
const maxAncestors = 64

// running reports whether terraform still runs, and if so records its
// descendants as they are now (forgetting those that ended).
func (w *treeWatch) running() bool {
	now := procfacts.Now()
	if !w.run.Alive() {
		return false
	}
	w.lastAlive = now
	for _, p := range procfacts.Descendants(w.run.PID) {
		if p.PID == w.self { // the guard, re-parented to a terraform that is pid 1
			continue
		}
		if _, ok := w.seen[p.PID]; !ok {
			w.seen[p.PID] = p.Start
		}
	}
	for pid, start := range w.seen {
		if _, ok := live(pid, start); !ok {
			delete(w.seen, pid)
		}
	}
	return true
}

// outlived names a process of the run that is still running after
// terraform, or returns "": a descendant seen while terraform ran that is
// still in terraform's session, or an orphan of the run that was too
// short-lived a descendant to be seen (what a provisioner's `cmd &` left).
func (w *treeWatch) outlived() string {
	for pid, start := range w.seen {
		if p, ok := live(pid, start); ok && (p.SID == w.sid || p.SID <= 0 || w.sid <= 0) {
			return describe(fmt.Sprintf("its descendant (session %d; terraform's is %d)", p.SID, w.sid), p)
		}
	}
	if p, ok := w.orphan(); ok {
		return describe("a process it started (now an orphan)", p)
	}
	return ""
}

// orphan finds a process of terraform's process group, started while
// terraform ran, that was re-parented to init (pid 1) or to a systemd user
// manager above terraform's parent (a subreaper): an orphan of the run.
// Other processes of the group whose parent is one of terraform's ancestors
// are that ancestor's own children (another test binary of `go test`), and
// what starts after terraform ended (the next command of a script) is not
// the run's either.
func (w *treeWatch) orphan() (procfacts.Process, bool) {
	if w.pgid <= 0 {
		return procfacts.Process{}, false // a group led from outside this pid namespace
	}
	all, err := procfacts.All()
	if err != nil {
		return procfacts.Process{}, false
	}
	for _, p := range all {
		if p.PGID != w.pgid || p.Start < w.run.Start || p.Start > w.lastAlive || p.Zombie ||
			p.PID == w.run.PID || p.PID == w.self || p.PID == 1 {
			continue
		}
		if p.PPID == 1 {
			return p, true
		}
		if start, ok := w.reapers[p.PPID]; ok {
			if parent, ok := live(p.PPID, start); ok && subreapers[parent.Name] {
				return p, true
			}
		}
	}
	return procfacts.Process{}, false
}

// subreapers are the command names of the subreapers the run's orphans may
// be re-parented to instead of init: a systemd user manager (a desktop
// session's terminals run under one).
var subreapers = map[string]bool{"systemd": true}

// live returns process pid if it still runs and started at start.
func live(pid int, start uint64) (procfacts.Process, bool) {
	p, err := procOf(pid)
	return p, err == nil && p.Start == start && !p.Zombie
}

func describe(what string, p procfacts.Process) string {
	if p.Name == "" {
		return fmt.Sprintf("%s, process %d", what, p.PID)
	}
	return fmt.Sprintf("%s, process %d (%s)", what, p.PID, p.Name)
}
