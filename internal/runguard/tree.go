package runguard

import (
	"fmt"
	"os"
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
	if err != nil || p.start != run.Start {
		return w
	}
	w.pgid, w.sid = p.pgid, p.sid
	parent, err := procOf(p.ppid)
	for pid := parent.ppid; err == nil && pid > 0 && len(w.reapers) < maxAncestors; pid = parent.ppid {
		if parent, err = procOf(pid); err == nil {
			w.reapers[pid] = parent.start
		}
	}
	return w
}

// maxAncestors bounds the walks up a process's ancestors.
const maxAncestors = 64

// running reports whether terraform still runs, and if so records its
// descendants as they are now (forgetting those that ended).
func (w *treeWatch) running() bool {
	now := clockNow()
	if !w.run.Alive() {
		return false
	}
	w.lastAlive = now
	for _, p := range descendants(w.run.PID) {
		if p.pid == w.self { // the guard, re-parented to a terraform that is pid 1
			continue
		}
		if _, ok := w.seen[p.pid]; !ok {
			w.seen[p.pid] = p.start
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
		if p, ok := live(pid, start); ok && (p.sid == w.sid || p.sid <= 0 || w.sid <= 0) {
			return describe(fmt.Sprintf("its descendant (session %d; terraform's is %d)", p.sid, w.sid), p)
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
func (w *treeWatch) orphan() (proc, bool) {
	if w.pgid <= 0 {
		return proc{}, false // a group led from outside this pid namespace
	}
	all, err := processes()
	if err != nil {
		return proc{}, false
	}
	for _, p := range all {
		if p.pgid != w.pgid || p.start < w.run.Start || p.start > w.lastAlive || p.zombie ||
			p.pid == w.run.PID || p.pid == w.self || p.pid == 1 {
			continue
		}
		if p.ppid == 1 {
			return p, true
		}
		if start, ok := w.reapers[p.ppid]; ok {
			if parent, ok := live(p.ppid, start); ok && subreapers[parent.name] {
				return p, true
			}
		}
	}
	return proc{}, false
}

// subreapers are the command names of the subreapers the run's orphans may
// be re-parented to instead of init: a systemd user manager (a desktop
// session's terminals run under one).
var subreapers = map[string]bool{"systemd": true}

// live returns process pid if it still runs and started at start.
func live(pid int, start uint64) (proc, bool) {
	p, err := procOf(pid)
	return p, err == nil && p.start == start && !p.zombie
}

func describe(what string, p proc) string {
	if p.name == "" {
		return fmt.Sprintf("%s, process %d", what, p.pid)
	}
	return fmt.Sprintf("%s, process %d (%s)", what, p.pid, p.name)
}

// descendantsFrom walks down from root through children, which gives a
// process's children: every descendant once (the tree has no cycles, and a
// pid reused meanwhile shows up once more at most).
func descendantsFrom(root int, children func(int) []proc) []proc {
	var out []proc
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, kid := range children(pid) {
			if seen[kid.pid] {
				continue
			}
			seen[kid.pid] = true
			out = append(out, kid)
			queue = append(queue, kid.pid)
		}
	}
	return out
}

// descendantsOfSnapshot returns root's descendants from one snapshot of
// every process.
func descendantsOfSnapshot(root int) []proc {
	all, err := processes()
	if err != nil {
		return nil
	}
	kids := map[int][]proc{}
	for _, p := range all {
		if p.pid != p.ppid {
			kids[p.ppid] = append(kids[p.ppid], p)
		}
	}
	return descendantsFrom(root, func(pid int) []proc { return kids[pid] })
}
