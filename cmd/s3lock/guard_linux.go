package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// guardArg is the hidden first argument that makes s3lock act as the guard
// of a command (see runGuard).
const guardArg = "__guard"

// guardDeathSignal is what the kernel sends the guard when s3lock dies. It is
// one s3lock never forwards; the guard catches it, so the command cannot get
// it from the group.
const guardDeathSignal = syscall.SIGUSR1

// The guard's two pipes, as file descriptors in the guard (ExtraFiles 0 and
// 1). On the first, s3lock sends the lease's trust deadline each time it
// changes, as one line: nanoseconds on CLOCK_BOOTTIME (a clock that every
// process of the host shares, and that keeps counting while the host is
// suspended). On the second, the guard reports, as its last line, how the
// command ended: "exit N", "signal N", or "deadline" when the guard killed
// it because the deadline passed unrenewed.
const (
	guardDeadlineFD = 3
	guardStatusFD   = 4
)

// guardPoll bounds how long the guard sleeps between looks at the clock, so
// that a deadline that passed while the host was suspended (Go's timers do
// not count suspended time) is acted on soon after it wakes.
const guardPoll = 250 * time.Millisecond

// guarded reports whether run starts the command under a guard: outside an
// interactive terminal, where the command has a process group of its own.
func guarded(foreground bool) bool { return !foreground }

// guardCommand returns the command line that runs argv under a guard.
func guardCommand(argv []string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the s3lock executable to guard the command: %w", err)
	}
	return append([]string{self, guardArg, "--"}, argv...), nil
}

// setGuardDeathSignal makes the kernel send the guard guardDeathSignal if
// s3lock dies (even by SIGKILL).
func setGuardDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = guardDeathSignal }

// boottime returns the current CLOCK_BOOTTIME reading.
func boottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0 // never on Linux ≥ 2.6.39; a zero reading only makes the guard kill sooner
	}
	return time.Duration(ts.Nano())
}

// guardLink is s3lock's end of the guard's pipes.
type guardLink struct {
	deadlines *os.File // write end: deadlines to the guard
	status    *os.File // read end: the guard's report
	theirs    []*os.File
	last      time.Time
	report    chan string // the guard's last line, "" if it sent none
}

// attachGuard gives cmd (the guard's command line) the guard's pipes and
// sends the lease's first deadline, which waits in the pipe until the guard
// reads it.
func attachGuard(cmd *exec.Cmd, deadline time.Time) (*guardLink, error) {
	dr, dw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the guard's pipe: %w", err)
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		_, _ = dr.Close(), dw.Close()
		return nil, fmt.Errorf("creating the guard's pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{dr, sw}
	g := &guardLink{deadlines: dw, status: sr, theirs: []*os.File{dr, sw}, report: make(chan string, 1)}
	if err := g.tell(deadline); err != nil {
		g.close()
		return nil, fmt.Errorf("telling the guard the lease's deadline: %w", err)
	}
	return g, nil
}

// started closes the guard's ends of the pipes in s3lock (the guard has its
// own copies now) and starts reading its report.
func (g *guardLink) started() {
	for _, f := range g.theirs {
		_ = f.Close()
	}
	g.theirs = nil
	go func() {
		b, _ := io.ReadAll(g.status)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		g.report <- lines[len(lines)-1]
	}()
}

// tell sends the guard the lease's trust deadline if it changed.
func (g *guardLink) tell(deadline time.Time) error {
	if g == nil || deadline.Equal(g.last) {
		return nil
	}
	g.last = deadline
	at := boottime() + time.Until(deadline)
	_, err := fmt.Fprintf(g.deadlines, "%d\n", at)
	return err
}

// outcome returns the guard's report once it has exited: "" if it died
// without one (it was killed).
func (g *guardLink) outcome() string {
	if g == nil {
		return ""
	}
	select {
	case r := <-g.report:
		return r
	case <-time.After(time.Second): // the guard is gone; its pipe closes with it
		return ""
	}
}

func (g *guardLink) close() {
	if g == nil {
		return
	}
	for _, f := range append(g.theirs, g.deadlines, g.status) {
		_ = f.Close()
	}
}

// killGroup kills every process of the process group pgid and waits, up to
// limit, until none is left running (zombies do no work, so they do not
// count). It reports whether the group is gone.
func killGroup(pgid int, limit time.Duration) bool {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(limit)
	for groupRunning(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // members forked meanwhile
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// groupRunning reports whether a process of group pgid is running (not a
// zombie), from /proc.
func groupRunning(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may contain spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// runGuard runs argv in the guard's own process group (s3lock made the guard
// its leader) and stays next to it. It kills the whole group — the command
// and everything it started, the guard included — when nothing would stop
// them otherwise:
//   - s3lock died (the kernel's parent-death signal, or its pipe closing);
//   - the lease's trust deadline passed and s3lock sent no new one: s3lock
//     is stopped, hung or starved, so it can neither renew nor kill.
//
// If the guard itself is killed, the kernel kills the command (its
// parent-death signal) and s3lock kills the rest of the group. Signals
// s3lock sends the group reach the command directly; the guard exits as the
// command did.
func runGuard(argv []string) int {
	// The command's parent-death signal belongs to the thread that starts
	// it: keep this goroutine on it for the guard's whole life.
	runtime.LockOSThread()
	parent := os.Getppid()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, guardDeathSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if os.Getppid() != parent || parent == 1 {
		_ = syscall.Kill(0, syscall.SIGKILL) // s3lock died before we could watch it
	}
	status := os.NewFile(guardStatusFD, "guard-status")
	deadlines, err := readDeadlines(os.NewFile(guardDeadlineFD, "guard-deadlines"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: guard: %v\n", err)
		return exitError
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: cannot run %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(done)
	}()
	deadline := <-deadlines
	for {
		select {
		case <-done:
			return guardExit(status, cmd.ProcessState)
		case d, ok := <-deadlines:
			if !ok {
				_ = syscall.Kill(0, syscall.SIGKILL) // s3lock is gone
			}
			deadline = d
		case <-time.After(min(guardPoll, deadline-boottime())):
			if boottime() >= deadline {
				fmt.Fprintln(status, "deadline")
				_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, the guard included
			}
		case sig := <-sigs:
			// The kernel sends the death signal whenever the thread of
			// s3lock that started the guard exits; while s3lock dies, its
			// other threads adopt the guard first, and only when the last
			// one is gone does the guard's parent change (and the signal
			// come again). So act only on a changed parent.
			if sig == guardDeathSignal && os.Getppid() != parent {
				_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, the guard included
			}
		}
	}
}

// readDeadlines reads the deadlines s3lock sends: the first before it
// returns, the rest on the channel, which closes when s3lock closes the pipe
// or dies. The pipes are not passed on to the command.
func readDeadlines(f *os.File) (<-chan time.Duration, error) {
	syscall.CloseOnExec(guardDeadlineFD)
	syscall.CloseOnExec(guardStatusFD)
	r := bufio.NewScanner(f)
	parse := func() (time.Duration, error) {
		if !r.Scan() {
			return 0, errors.New("s3lock sent no lease deadline")
		}
		n, err := strconv.ParseInt(r.Text(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad lease deadline %q from s3lock", r.Text())
		}
		return time.Duration(n), nil
	}
	first, err := parse()
	if err != nil {
		return nil, err
	}
	out := make(chan time.Duration, 1)
	out <- first
	go func() {
		defer close(out)
		for {
			d, err := parse()
			if err != nil {
				return
			}
			out <- d
		}
	}()
	return out, nil
}

// guardExit reports how the command ended to s3lock and exits the same way.
func guardExit(status *os.File, ps *os.ProcessState) int {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
		// Die the same way, so that s3lock reports it as the shell would.
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		return exitSignal + int(ws.Signal())
	}
	fmt.Fprintf(status, "exit %d\n", ws.ExitStatus())
	return ws.ExitStatus()
}
