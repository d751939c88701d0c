//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
)

// proc is one OS process the suite started: an SDK worker or an `s3lock
// run` (whose watchdog and command are its children, not ours).
type proc struct {
	name    string // also its holder identity, e.g. w1.3 or run2.17
	slot    string // the slot it was started for, e.g. w1
	run     bool   // an `s3lock run`
	cmd     *exec.Cmd
	started int64 // CLOCK_MONOTONIC
	done    chan struct{}

	mu     sync.Mutex
	exited bool
	code   int  // exit code, or 128+signal
	killed bool // the suite sent it SIGKILL
}

// signal sends sig unless the process has exited. os.Process signals
// through a pidfd on Linux, so a reused pid is never hit.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return false
	}
	if sig == syscall.SIGKILL {
		p.killed = true
	}
	return p.cmd.Process.Signal(sig) == nil
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exited
}

// procTable is every process of a run.
type procTable struct {
	mu     sync.Mutex
	all    []*proc
	closed bool // the run is ending: no new processes
}

var errClosed = errors.New("the run is ending")

// start starts cmd as the process name of slot, with its output in log.
func (t *procTable) start(name, slot string, run bool, cmd *exec.Cmd, log string) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	// A file, not a pipe: the watchdog and command of an `s3lock run` inherit
	// it, and Wait must not wait for them.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // out of the test's group: a signal to one never hits another
		Pdeathsig: syscall.SIGKILL, // a crashed test leaves nothing behind
	}
	p := &proc{name: name, slot: slot, run: run, cmd: cmd, done: make(chan struct{})}
	p.started = record.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go p.wait()
	t.all = append(t.all, p)
	return p, nil
}

func (p *proc) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
	p.code = exitCode(p.cmd.ProcessState, err)
	close(p.done)
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && ps.ExitCode() < 0 {
		return -1
	}
	return ps.ExitCode()
}

// close refuses new processes from now on.
func (t *procTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
}

// live returns the processes that have not exited.
func (t *procTable) live() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*proc
	for _, p := range t.all {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// named returns the live process called name (a lease's holder), or nil.
func (t *procTable) named(name string) *proc {
	for _, p := range t.live() {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (t *procTable) snapshot() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.all)
}

// strays returns the processes still running any executable from binDir
// (watchdogs and commands of `s3lock run`s, which are not our children)
// other than those in the table, with their command lines.
func strays(binDir string, known []*proc) map[int]string {
	ours := map[int]bool{os.Getpid(): true}
	for _, p := range known {
		ours[p.cmd.Process.Pid] = true
	}
	found := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || ours[pid] {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(raw), binDir+string(filepath.Separator)) {
			continue
		}
		if zombie(pid) {
			continue // dead, waiting for its parent (init) to reap it
		}
		found[pid] = strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
	}
	return found
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// waitAll waits until every process in ps has exited, or limit has passed;
// it returns those still running.
func waitAll(ps []*proc, limit time.Duration) []*proc {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var left []*proc
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
			left = append(left, p)
		}
	}
	return left
}

// killPid kills a process that is not our child (a stray watchdog or command).
func killPid(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Signal(syscall.SIGKILL)
	}
}
