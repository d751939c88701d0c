package runguard

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// childWatch remembers the processes terraform started (providers,
// provisioners' commands), to tell, once terraform is gone, whether it ended
// cleanly: a clean terraform waits for all of them, so one still running
// afterwards means terraform was killed — even when no s3lock provider
// process was running then (terraform destroy's destroy walks, another
// provider's operation).
type childWatch struct {
	run  Run
	kids map[int]uint64 // pid → start time
}

func newChildWatch(run Run) *childWatch { return &childWatch{run: run, kids: map[int]uint64{}} }

// poll records terraform's current children.
func (w *childWatch) poll() {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", w.run.PID))
	if err != nil {
		return
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if _, seen := w.kids[pid]; seen {
				continue
			}
			if start, err := startTime(pid); err == nil {
				w.kids[pid] = start
			}
		}
	}
	for pid, start := range w.kids { // forget those that ended
		if !(Run{PID: pid, Start: start}).Alive() {
			delete(w.kids, pid)
		}
	}
}

// outlived names a child of terraform that is still running, or "".
func (w *childWatch) outlived() string {
	for pid, start := range w.kids {
		if (Run{PID: pid, Start: start}).Alive() {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return fmt.Sprintf("its child process %d (%s)", pid, strings.TrimSpace(string(comm)))
		}
	}
	return ""
}
