package runguard

import (
	"fmt"
	"os"
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
	// time): a process of the run whose parent dies is re-parented to one
	// of them (the nearest subreaper, or init). Terraform's parent is left
	// out: what it starts after terraform (the next command of a script)
	// is not the run's.
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
// terraform, whose parent is one of terraform's ancestors above its parent —
// an orphan of the run, re-parented to an init or a subreaper —; or 0.
// (Processes that another run of the same parent started have that run's
// terraform, or terraform's parent, as their ancestor: never one of the
// reapers.)
func (w *treeWatch) orphan() int {
	if w.pgid <= 0 {
		return 0
	}
	all, err := processes()
	if err != nil {
		return 0
	}
	for _, p := range all {
		if p.pgid != w.pgid || p.start < w.run.Start || p.zombie || p.pid == w.run.PID || p.pid == w.self {
			continue
		}
		if start, ok := w.reapers[p.ppid]; ok && alive(p.ppid, start) {
			return p.pid
		}
	}
	return 0
}

func alive(pid int, start uint64) bool {
	p, err := procOf(pid)
	return err == nil && p.start == start && !p.zombie
}

func describe(what string, pid int) string {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	name := string(comm)
	if n := len(name); n > 0 && name[n-1] == '\n' {
		name = name[:n-1]
	}
	if name == "" {
		return fmt.Sprintf("%s, process %d", what, pid)
	}
	return fmt.Sprintf("%s, process %d (%s)", what, pid, name)
}
