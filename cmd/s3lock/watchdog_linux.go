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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s3lock/terraform-provider-s3lock/internal/procfacts"
)

// The watchdog of `s3lock run` (not the provider's run guard, which holds
// a Terraform run's leases: internal/runguard). Outside an interactive
// terminal, s3lock does not start the command itself but s3lock again, as
// `s3lock __watchdog -- CMD...`: the watchdog, which leads a process group
// of its own and starts CMD in it. One run:
//
//  1. s3lock acquires the lease, creates two pipes and starts the watchdog
//     with them (watchdogEnvFDs) and with the kernel's parent-death signal
//     set (watchdogDeathSignal); the lease's first trust deadline is already
//     in the first pipe.
//  2. The watchdog starts CMD (whose own parent-death signal is SIGKILL:
//     it dies with the watchdog) and reads deadlines as s3lock renews the
//     lease: one line each, nanoseconds on CLOCK_BOOTTIME.
//  3. CMD exits: the watchdog writes how ("exit N", "signal N") on the
//     second pipe and exits; s3lock kills what CMD left in the group, then
//     releases the lease and exits as CMD did.
//
// What kills what: s3lock dies → the watchdog gets watchdogDeathSignal and
// kills the group (the lease lapses unreleased). A deadline passes with no
// new one (s3lock stopped or hung) → the watchdog kills the group and
// reports "deadline". The watchdog dies → the kernel kills CMD; s3lock
// kills the rest of the group, releases and exits 6. s3lock itself kills
// the group when renewals fail (SIGTERM at --grace-period, SIGKILL at the
// deadline) or the lease is force-released (SIGKILL at once).
//
// watchdogArg is the hidden first argument that makes s3lock act as the
// watchdog of a command (see runWatchdog).
const watchdogArg = "__watchdog"

// watchdogDeathSignal is what the kernel sends the watchdog when s3lock dies. It is
// one s3lock never forwards; the watchdog catches it, so the command cannot get
// it from the group.
const watchdogDeathSignal = syscall.SIGUSR1

// The watchdog's two pipes. On the first, s3lock sends the lease's trust
// deadline each time it changes, as one line: nanoseconds on CLOCK_BOOTTIME
// (a clock that every process of the host shares, and that keeps counting
// while the host is suspended). On the second, the watchdog reports, as its
// last line, how the command ended: "exit N", "signal N", or "deadline" when
// the watchdog killed it because the deadline passed unrenewed. The pipes are
// passed after every descriptor s3lock itself inherited (a make jobserver's,
// say), which reach the command as before; watchdogEnvFDs names their numbers
// and watchdogEnvParent s3lock's pid. The watchdog removes both variables from the
// command's environment and does not pass the pipes on.
const (
	watchdogEnvFDs    = "S3LOCK_WATCHDOG_FDS"
	watchdogEnvParent = "S3LOCK_WATCHDOG_PARENT"
)

// watchdogPoll bounds how long the watchdog sleeps between looks at the clock, so
// that a deadline that passed while the host was suspended (Go's timers do
// not count suspended time) is acted on soon after it wakes.
const watchdogPoll = 250 * time.Millisecond

const (
	// watchdogBackstop is how long after the lease's deadline the watchdog acts:
	// a running s3lock kills the command at the deadline itself (and says
	// why); the watchdog is the backstop for an s3lock that cannot. Far less
	// than the 1.3s at least between the deadline and anyone's takeover.
	watchdogBackstop = 250 * time.Millisecond
	// watchdogWriteTimeout bounds telling the watchdog a deadline, so that a
	// stopped watchdog (its pipe full) never holds up s3lock.
	watchdogWriteTimeout = 100 * time.Millisecond
	// watchdogReportLimit bounds the wait for the report of a watchdog that has
	// exited; its pipe closes as it exits.
	watchdogReportLimit = 10 * time.Second
	// groupPoll is how often killGroup looks whether the group is gone.
	groupPoll = 10 * time.Millisecond
)

// watched reports whether run starts the command under a watchdog: outside an
// interactive terminal, where the command has a process group of its own.
func watched(foreground bool) bool { return !foreground }

// watchdogCommand returns the command line that runs argv under a watchdog.
func watchdogCommand(argv []string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the s3lock executable to run the command under a watchdog: %w", err)
	}
	return append([]string{self, watchdogArg, "--"}, argv...), nil
}

// setWatchdogDeathSignal makes the kernel send the watchdog watchdogDeathSignal if
// s3lock dies (even by SIGKILL).
func setWatchdogDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = watchdogDeathSignal }

// boottime returns the current CLOCK_BOOTTIME reading.
func boottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0 // never on Linux ≥ 2.6.39; a zero reading only makes the watchdog kill sooner
	}
	return time.Duration(ts.Nano())
}

// watchdogLink is s3lock's end of the watchdog's pipes.
type watchdogLink struct {
	deadlines *os.File // write end: deadlines to the watchdog
	status    *os.File // read end: the watchdog's report
	theirs    []*os.File
	last      time.Time
	report    chan string // the watchdog's last line, "" if it sent none
}

// attachWatchdog gives cmd (the watchdog's command line) the watchdog's pipes and
// sends the lease's first deadline, which waits in the pipe until the watchdog
// reads it.
func attachWatchdog(cmd *exec.Cmd, deadline time.Time) (*watchdogLink, error) {
	dr, dw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the watchdog's pipe: %w", err)
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		_, _ = dr.Close(), dw.Close()
		return nil, fmt.Errorf("creating the watchdog's pipe: %w", err)
	}
	inherited := inheritedFiles()
	cmd.ExtraFiles = append(inherited, dr, sw)
	first := watchdogDeadlineFirstFD + len(inherited)
	cmd.Env = append(cmd.Env,
		fmt.Sprintf("%s=%d,%d", watchdogEnvFDs, first, first+1),
		fmt.Sprintf("%s=%d", watchdogEnvParent, os.Getpid()))
	g := &watchdogLink{deadlines: dw, status: sr, theirs: []*os.File{dr, sw}, report: make(chan string, 1)}
	if err := g.tell(deadline); err != nil {
		g.close()
		return nil, fmt.Errorf("telling the watchdog the lease's deadline: %w", err)
	}
	return g, nil
}

// watchdogDeadlineFirstFD is the first descriptor number ExtraFiles fill.
const watchdogDeadlineFirstFD = 3

// inheritedFiles returns, as ExtraFiles entries for descriptors 3, 4, ...,
// the descriptors s3lock inherited open without close-on-exec: a child of
// s3lock's would have inherited them too. Gaps are nil (closed in the child).
func inheritedFiles() []*os.File {
	open, err := procfacts.OpenFDs()
	if err != nil {
		return nil
	}
	var fds []int
	for _, fd := range open {
		if fd < watchdogDeadlineFirstFD {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	if len(fds) == 0 {
		return nil
	}
	out := make([]*os.File, slices.Max(fds)-watchdogDeadlineFirstFD+1)
	for _, fd := range fds {
		out[fd-watchdogDeadlineFirstFD] = os.NewFile(uintptr(fd), "inherited")
	}
	return out
}

// started closes the watchdog's ends of the pipes in s3lock (the watchdog has its
// own copies now) and starts reading its report.
func (g *watchdogLink) started() {
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

// tell sends the watchdog the lease's trust deadline if it changed. It never
// blocks: a watchdog that does not read (stopped) still has the deadline it
// was last told, which is the safe one.
func (g *watchdogLink) tell(deadline time.Time) error {
	if g == nil || deadline.Equal(g.last) {
		return nil
	}
	at := boottime() + time.Until(deadline)
	_ = g.deadlines.SetWriteDeadline(time.Now().Add(watchdogWriteTimeout))
	if _, err := fmt.Fprintf(g.deadlines, "%d\n", at); err != nil {
		return err
	}
	g.last = deadline
	return nil
}

// outcome returns the watchdog's report once it has exited: "" if it died
// without one (it was killed). The pipe closes as the watchdog exits (the
// command never had it), so the wait is short; the bound only guards
// against a bug.
func (g *watchdogLink) outcome() string {
	if g == nil {
		return ""
	}
	select {
	case r := <-g.report:
		return r
	case <-time.After(watchdogReportLimit):
		return ""
	}
}

func (g *watchdogLink) close() {
	if g == nil {
		return
	}
	for _, f := range append(g.theirs, g.deadlines, g.status) {
		_ = f.Close()
	}
}

// awaitExit waits until the watchdog has exited without reaping it: while its
// zombie stays, its process group id cannot be reused, so killing the group
// afterwards can only hit what the command left behind.
func awaitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
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
		time.Sleep(groupPoll)
	}
	return true
}

// groupRunning reports whether a process of group pgid is running (not a
// zombie), from the process facts (/proc); where they cannot be read, whether
// the group has any member at all.
func groupRunning(pgid int) bool {
	running, err := procfacts.GroupRunning(pgid)
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	return running
}

// runWatchdog runs argv in the watchdog's own process group (s3lock made the watchdog
// its leader) and stays next to it. It kills the whole group — the command
// and everything it started, the watchdog included — when nothing would stop
// them otherwise:
//   - s3lock died (the kernel's parent-death signal, or its pipe closing);
//   - the lease's trust deadline passed and s3lock sent no new one: s3lock
//     is stopped, hung or starved, so it can neither renew nor kill.
//
// If the watchdog itself is killed, the kernel kills the command (its
// parent-death signal) and s3lock kills the rest of the group. Signals
// s3lock sends the group reach the command directly; the watchdog exits as the
// command did.
func runWatchdog(argv []string) int {
	// The command's parent-death signal belongs to the thread that starts
	// it: keep this goroutine on it for the watchdog's whole life.
	runtime.LockOSThread()
	g := &watchdogRun{sigs: make(chan os.Signal, 8)}
	signal.Notify(g.sigs, watchdogDeathSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	parent, dfd, sfd, err := watchdogSetup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: watchdog: %v\n", err)
		return exitError
	}
	g.parent = parent
	if os.Getppid() != parent {
		_ = syscall.Kill(0, syscall.SIGKILL) // s3lock died before we could watch it
	}
	g.status = os.NewFile(uintptr(sfd), "watchdog-status")
	deadlines, err := readDeadlines(os.NewFile(uintptr(dfd), "watchdog-deadlines"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: watchdog: %v\n", err)
		return g.report(exitError, "exit %d", exitError)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: cannot run %s: %v\n", argv[0], err)
		code := cannotRunCode(err)
		return g.report(code, "exit %d", code)
	}
	return g.watch(cmd, deadlines)
}

// watchdogRun is the watchdog's state while its command runs.
type watchdogRun struct {
	parent int            // s3lock's pid
	status *os.File       // the pipe the report goes to
	sigs   chan os.Signal // the signals the watchdog catches
}

// report writes the watchdog's last line for s3lock and returns code.
func (g *watchdogRun) report(code int, format string, args ...any) int {
	fmt.Fprintf(g.status, format+"\n", args...)
	return code
}

// watch waits for the started cmd to exit and returns its exit code, unless
// it kills the whole group first because s3lock died or the lease's
// deadline (from deadlines) passed unrenewed.
func (g *watchdogRun) watch(cmd *exec.Cmd, deadlines <-chan time.Duration) int {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(done)
	}()
	deadline := <-deadlines
	for {
		select {
		case <-done:
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				return g.report(exitSignal+int(ws.Signal()), "signal %d", int(ws.Signal()))
			}
			return g.report(ws.ExitStatus(), "exit %d", ws.ExitStatus())
		case d, ok := <-deadlines:
			if !ok {
				_ = syscall.Kill(0, syscall.SIGKILL) // s3lock is gone
			}
			deadline = d
		case <-time.After(min(watchdogPoll, deadline+watchdogBackstop-boottime())):
			if boottime() >= deadline+watchdogBackstop {
				g.report(0, "deadline")
				_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, the watchdog included
			}
		case sig := <-g.sigs:
			// The kernel sends the death signal whenever the thread of
			// s3lock that started the watchdog exits; while s3lock dies, its
			// other threads adopt the watchdog first, and only when the last
			// one is gone does the watchdog's parent change (and the signal
			// come again). So act only on a changed parent.
			if sig == watchdogDeathSignal && os.Getppid() != g.parent {
				_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, the watchdog included
			}
		}
	}
}

// watchdogSetup reads what s3lock passed the watchdog in its environment (s3lock's
// pid, the pipes' descriptors), removes it so the command does not inherit
// it, and keeps the pipes from the command.
func watchdogSetup() (parent, deadlineFD, statusFD int, err error) {
	parent, err = strconv.Atoi(os.Getenv(watchdogEnvParent))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bad %s %q: the watchdog is started by s3lock run only", watchdogEnvParent, os.Getenv(watchdogEnvParent))
	}
	if _, err := fmt.Sscanf(os.Getenv(watchdogEnvFDs), "%d,%d", &deadlineFD, &statusFD); err != nil {
		return 0, 0, 0, fmt.Errorf("bad %s %q: the watchdog is started by s3lock run only", watchdogEnvFDs, os.Getenv(watchdogEnvFDs))
	}
	_ = os.Unsetenv(watchdogEnvParent)
	_ = os.Unsetenv(watchdogEnvFDs)
	syscall.CloseOnExec(deadlineFD)
	syscall.CloseOnExec(statusFD)
	return parent, deadlineFD, statusFD, nil
}

// readDeadlines reads the deadlines s3lock sends: the first before it
// returns, the rest on the channel, which closes when s3lock closes the pipe
// or dies.
func readDeadlines(f *os.File) (<-chan time.Duration, error) {
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
