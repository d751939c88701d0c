package runguard

import (
	"fmt"
	"os"
	"strings"
)

// treeWatch remembers the processes of the run: everything terraform
// started, directly or not (providers, provisioners' commands and what they
// start), to tell, once terraform is gone, whether it ended cleanly. A clean
// terraform waits for its children, and a provisioner's command for what it
// starts before terraform goes on; so a process of the run still running
// afterwards means terraform was killed — even when no s3lock provider
// process was running then (terraform destroy's destroy walks, another
// provider's operation).
type treeWatch struct {
	run  Run
	self int
	// pgid is terraform's process group, which its descendants keep unless
	// they leave it: orphans found there (see orphans) are the run's.
	pgid int
	// reapers are terraform's ancestors above its parent (pid → start
	// time): a process of the run whose parent dies is re-parented to the
	// nearest subreaper among them, or to init.
	reapers map[int]uint64
	seen    map[int]uint64 // pid → start time of every descendant seen
}

func newTreeWatch(run Run) *treeWatch {
	w := &treeWatch{run: run, self: os.Getpid(), pgid: -1, reapers: map[int]uint64{}, seen: map[int]uint64{}}
	p, err := procOf(run.PID)
	if err != nil || p.start != run.Start {
		return w
	}
	w.pgid = p.pgid
	parent, err := procOf(p.ppid)
	for pid := parent.ppid; err == nil && pid > 0 && len(w.reapers) < maxAncestors; pid = parent.ppid {
		if parent, err = procOf(pid); err == nil {
			w.reapers[pid] = parent.start
		}
	}
	return w
}

// maxAncestors bounds the walk up terraform's ancestors.
const maxAncestors = 64

// poll records terraform's descendants as they are now, and forgets those
// that ended.
func (w *treeWatch) poll() {
	queue := []int{w.run.PID}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, kid := range childrenOf(pid) {
			if kid == w.self { // the guard, re-parented to a terraform that is pid 1
				continue
			}
			if _, ok := w.seen[kid]; ok {
				queue = append(queue, kid)
				continue
			}
			if p, err := procOf(kid); err == nil {
				w.seen[kid] = p.start
				queue = append(queue, kid)
			}
		}
	}
	for pid, start := range w.seen {
		if !alive(pid, start) {
			delete(w.seen, pid)
		}
	}
}

// outlived names a process of the run that is still running after
// terraform, or returns "": a descendant seen while terraform ran, or an
// orphan of the run that was too short-lived a descendant to be seen (a
// provisioner's `cmd &`).
func (w *treeWatch) outlived() string {
	for pid, start := range w.seen {
		if alive(pid, start) {
			return describe("its descendant", pid)
		}
	}
	if pid := w.orphan(); pid > 0 {
		return describe("a process it started (now an orphan)", pid)
	}
	return ""
}

// orphan returns a process of terraform's process group, started after
// terraform, that was re-parented to init (pid 1) or to a systemd user
// manager above terraform's parent (a subreaper): an orphan of the run; or 0.
// Other processes of the group whose parent is one of terraform's ancestors
// are that ancestor's own children (the next command of a script, another
// test binary of `go test`): not the run's.
func (w *treeWatch) orphan() int {
	if w.pgid <= 0 {
		return 0
	}
	all, err := processes()
	if err != nil {
		return 0
	}
	for _, p := range all {
		if p.pgid != w.pgid || p.start < w.run.Start || p.zombie || p.pid == w.run.PID || p.pid == w.self || p.pid == 1 {
			continue
		}
		if p.ppid == 1 {
			return p.pid
		}
		if start, ok := w.reapers[p.ppid]; ok && alive(p.ppid, start) && subreapers[commOf(p.ppid)] {
			return p.pid
		}
	}
	return 0
}

// subreapers are the command names of the subreapers the run's orphans may
// be re-parented to instead of init: a systemd user manager (a desktop
// session's terminals run under one).
var subreapers = map[string]bool{"systemd": true}

func alive(pid int, start uint64) bool {
	p, err := procOf(pid)
	return err == nil && p.start == start && !p.zombie
}

func describe(what string, pid int) string {
	name := commOf(pid)
	if name == "" {
		return fmt.Sprintf("%s, process %d", what, pid)
	}
	return fmt.Sprintf("%s, process %d (%s)", what, pid, name)
}

// commOf is the command name of process pid ("" where unknown).
func commOf(pid int) string {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(comm))
}
