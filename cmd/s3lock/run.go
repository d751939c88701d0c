package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var runLong = `Acquire the lock NAME, run CMD while holding it, and release the lock when CMD
exits. s3lock exits with CMD's exit code (128+N if CMD was killed by signal N).

Several NAMEs are a lock set, taken all or none: in the order of the names
sorted, whatever order they are given in (so runs taking "a b" and "b a" never
deadlock), each waited for as one lock is (--wait bounds each); what was taken
is released if the rest cannot be. Losing any of the set's leases stops CMD as
losing the lease does. --slots takes one NAME; with --shared, every lock of the
set is taken shared.

Waiting: if the lock is held, s3lock waits up to --wait (default 5m; 0 tries
once) and reports who holds it on stderr. If the store cannot be reached at the
first attempt, s3lock fails at once instead of waiting.

` + orderHelp + `

` + slotsHelp + `

` + sharedHelp + `

CMD's environment gets:
` + runenv.Help() + `
` + runenv.SetHelp() + `
With --shared, ` + runenv.Epoch + ` is the shared epoch, the same for every shared
holder, and ` + runenv.Key + ` the key of this run's share.
It does not get ` + strings.Join(runenv.Withheld(), " or ") + ` (s3lock's secrets).

While CMD runs, the lease is renewed every third of --lease. SIGINT, SIGTERM
and SIGHUP sent to s3lock are forwarded to CMD (when s3lock runs in the
foreground of a terminal, CMD gets the terminal's Ctrl-C itself and only
SIGTERM is forwarded).

CMD never outlives the lease. If renewals keep failing, s3lock sends CMD
SIGTERM when the lease has --grace-period left (default a quarter of --lease,
at most 10s), and SIGKILL the moment it runs out, whether or not the store
answers; if someone force-releases the lease, CMD gets SIGKILL at once
(someone else may already hold the lock). s3lock then exits with code 4.

With --max-hold D, the lease is not renewed past D after it was acquired: CMD
gets SIGTERM when --grace-period is left before that, SIGKILL when it comes,
and s3lock releases the lock and exits with code 4, as at any lost lease.
's3lock status' shows the cap ("held at most until").

Outside the foreground of a terminal (Linux), CMD runs in a process group of
its own next to a watchdog process that s3lock tells each renewed deadline. The
watchdog kills CMD and everything it started if s3lock dies, or if the deadline
passes without word from s3lock (s3lock stopped or hung). If the watchdog is
killed, s3lock kills CMD's process group before it releases the lease, and
exits with code 6. Processes CMD leaves running in its group when it exits
are killed before the release too. In the foreground of a terminal there is
no watchdog: if s3lock is killed only CMD itself gets SIGKILL, and a stopped
s3lock cannot stop CMD. A lease whose holder was killed lapses after --lease.

` + exitCodesHelp

func (a *app) runCommand() *cobra.Command {
	var af acquireFlags
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "run [flags] NAME [NAME...] -- CMD [ARGS...]",
		Short: "Run a command while holding a lock, or several (all or none)",
		Long:  runLong,
		Example: `  s3lock run --bucket my-locks migrations -- ./migrate.sh up
  S3LOCK_BUCKET=my-locks s3lock run deploy/prod --wait 15m -- terraform apply -auto-approve
  s3lock run --slots 3 ci/gpu -- sh -c './train.sh --device "$` + runenv.Slot + `"'
  s3lock run net/prod db/prod -- ./migrate-both.sh
  s3lock run --shared tf/prod -- ./plan.sh   # an apply takes tf/prod without --shared`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0:
				return usagef("missing the lock NAME and the command: s3lock run NAME -- CMD [ARGS...]")
			case dash < 0:
				return usagef("missing '--' before the command: s3lock run NAME -- CMD [ARGS...]")
			case dash == 0:
				return usagef("missing the lock NAME before '--'")
			case len(args) == dash:
				return usagef("missing the command after '--'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			return a.run(cmd.Context(), args[:dash], args[dash:], af, grace)
		},
	}
	af.register(cmd, defaultRunLease)
	durationFlag(cmd.Flags(), &grace, "grace-period", 0, "how long before the lease could run out a command gets SIGTERM when renewals keep failing",
		durationSpec{defText: "a quarter of --lease, at most 10s"})
	return cmd
}

func (a *app) run(ctx context.Context, names, argv []string, af acquireFlags, grace time.Duration) error {
	grace, err := a.prepareRun(names, argv, af, grace)
	if err != nil {
		return err
	}
	c, err := a.client(ctx, a.bucket, af.lock)
	if err != nil {
		return err
	}
	held, err := a.acquireForRun(ctx, c, names, af)
	if err != nil {
		return err
	}
	// The kernel ties the parent-death signal to the thread that starts the
	// child: keep this goroutine on that thread until the command is done.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := a.startCommand(ctx, held, argv)
	if err != nil {
		return err
	}
	defer a.setSignalHandler(nil)
	r.supervise(grace)
	return r.finish()
}

// prepareRun checks what can be checked before taking the lock, so that a
// run that cannot work does not take (and burn) an epoch. It returns the
// grace period to use.
func (a *app) prepareRun(names, argv []string, af acquireFlags, grace time.Duration) (time.Duration, error) {
	if err := a.needBucket(); err != nil {
		return 0, err
	}
	for _, name := range names {
		if err := s3lock.ValidateName(name); err != nil {
			return 0, err
		}
	}
	if len(names) > 1 && af.slots > 1 {
		return 0, usagef("--slots takes one lock name, not a lock set of %d", len(names))
	}
	grace, err := graceFor(grace, af.lock.lease)
	if err != nil {
		return 0, err
	}
	if err := af.check(); err != nil {
		return 0, err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return 0, exitWith(cannotRunCode(err), fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	return grace, nil
}

// cannotRunCode is the shell's exit code for a command that could not start.
func cannotRunCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
}

// runner is one command running under a lease.
type runner struct {
	a        *app
	held     *holding
	child    *exec.Cmd
	watchdog *watchdogLink // nil without a watchdog
	fg       bool          // in the foreground of a terminal: no process group of its own
	forward  chan os.Signal
	exited   chan struct{} // closed when the command (or its watchdog) has exited
	waitErr  error         // the command's Wait error, once reaped
	lost     error         // why the lease was lost while the command ran
	// capStop is the maximum hold (--max-hold) the command was stopped for
	// (SIGTERM before its cap); 0 if it was not.
	capStop time.Duration
	killed  bool // s3lock sent the command's group SIGKILL
}

// startCommand starts the command (under a watchdog outside a terminal) with
// the lease (or lock set) in its environment, and routes s3lock's signals to
// it. If it cannot start, it releases what it holds.
func (a *app) startCommand(ctx context.Context, held *holding, argv []string) (*runner, error) {
	r := &runner{a: a, held: held, fg: foregroundOfTerminal(), forward: make(chan os.Signal, 4), exited: make(chan struct{})}
	if err := r.prepare(argv); err != nil {
		return nil, errors.Join(err, held.release())
	}
	// Signals that arrive from here on go to the command, not to our context.
	a.setSignalHandler(func(sig os.Signal) {
		select {
		case r.forward <- sig:
		default: // a burst while the command exits: it has enough to act on
		}
	})
	if ctx.Err() != nil {
		// Interrupted between the acquisition and now: do not start.
		code := exitError
		var se signalErr
		if errors.As(context.Cause(ctx), &se) {
			code = signalCode(se.sig)
		}
		return nil, exitWith(code, errors.Join(fmt.Errorf("%w before the command started", context.Cause(ctx)), r.abort()))
	}
	if err := r.child.Start(); err != nil {
		return nil, exitWith(cannotRunCode(err), errors.Join(fmt.Errorf("cannot run %s: %w", argv[0], err), r.abort()))
	}
	r.watchdog.started()
	go func() {
		if r.watchdog != nil {
			// Leave the watchdog unreaped, so that its process group stays
			// ours until finish has dealt with what is left in it.
			awaitExit(r.child.Process.Pid)
		} else {
			r.waitErr = r.child.Wait()
		}
		close(r.exited)
	}()
	return r, nil
}

// prepare builds the command's process (its watchdog's, outside a terminal)
// with the lease in its environment, and attaches the watchdog.
func (r *runner) prepare(argv []string) error {
	watchdog := watched(r.fg)
	line := argv
	if watchdog {
		var err error
		if line, err = watchdogCommand(argv); err != nil {
			return err
		}
	}
	r.child = exec.Command(line[0], line[1:]...)
	r.child.Stdin, r.child.Stdout, r.child.Stderr = os.Stdin, os.Stdout, os.Stderr
	r.child.Env = r.held.environ(os.Environ())
	configureChild(r.child, r.fg, watchdog)
	if watchdog {
		var err error
		if r.watchdog, err = attachWatchdog(r.child, r.held.expiresAt()); err != nil {
			return err
		}
	}
	return nil
}

// abort undoes a start that did not happen: s3lock's signals go back to its
// context, the watchdog's pipes are closed and the lease is released.
func (r *runner) abort() error {
	r.a.setSignalHandler(nil)
	r.watchdog.close()
	return r.held.release()
}

// supervise waits for the command to exit, forwarding signals, and makes
// sure it never outlives the lease: SIGTERM while the lease has grace left
// and renewals keep failing, SIGKILL the moment the lease is lost (its trust
// deadline passed, which the lease's own timer decides, or it was
// force-released). It keeps the watchdog told of each new deadline.
func (r *runner) supervise(grace time.Duration) {
	termSent := false
	watch := time.NewTicker(runWatchInterval)
	defer watch.Stop()
	leaseDone := r.held.Done()
	for {
		select {
		case <-r.exited:
			return
		case sig := <-r.forward:
			if r.fg && sig != syscall.SIGTERM {
				continue // the terminal sent it to the command too
			}
			_ = signalChild(r.child.Process, sig, !r.fg)
		case <-watch.C:
			_ = r.watchdog.tell(r.held.expiresAt()) // a watchdog that is gone shows in how it exits
			if left := time.Until(r.held.expiresAt()); !termSent && r.held.Err() == nil && left <= grace {
				termSent = true
				fmt.Fprintln(r.a.stderr, r.stopping(left))
				_ = signalChild(r.child.Process, syscall.SIGTERM, !r.fg)
			}
		case <-leaseDone:
			leaseDone = nil
			if !errors.Is(r.held.Err(), s3lock.ErrLeaseLost) {
				continue
			}
			r.lost = r.held.Err()
			fmt.Fprintln(r.a.stderr, killingText(r.lost))
			r.killed = true
			_ = signalChild(r.child.Process, syscall.SIGKILL, !r.fg)
		}
	}
}

// finish makes sure nothing of the command is left running, releases the
// lease and returns how s3lock exits.
func (r *runner) finish() error {
	if r.watchdog == nil {
		return r.conclude(childExitCode(r.child.ProcessState, r.waitErr), false)
	}
	report := r.watchdog.outcome()
	r.watchdog.close()
	watchdogDied := report == "" && !r.killed
	if report == "deadline" && r.lost == nil {
		r.lost = r.held.lapsedUnseen()
		fmt.Fprintln(r.a.stderr, killingText(r.lost))
	}
	// Whatever the command left in its process group must not outlive the
	// lease either: kill it while the watchdog's zombie still holds the group.
	pgid := r.child.Process.Pid
	if groupRunning(pgid) {
		if !watchdogDied && !r.killed && report != "deadline" {
			fmt.Fprintf(r.a.stderr, "s3lock: the command exited but left processes running in its process group %d; killing them before releasing the lock\n", pgid)
		}
		if !killGroup(pgid, groupKillLimit) {
			_ = r.child.Wait()
			return exitWith(exitError, fmt.Errorf("processes of the command's group %d survived SIGKILL for %s; not releasing the lock, which lapses after %s "+
				"(%s)", pgid, groupKillLimit, r.held.duration(), r.held.objects()))
		}
	}
	r.waitErr = r.child.Wait()
	return r.conclude(childExitCode(r.child.ProcessState, r.waitErr), watchdogDied)
}

// conclude releases the lease and returns how s3lock exits, given the
// command's exit code.
func (r *runner) conclude(code int, watchdogDied bool) error {
	relErr := r.held.release()
	if r.lost == nil && errors.Is(relErr, s3lock.ErrLeaseLost) {
		r.lost = relErr
	}
	switch {
	case r.lost != nil && endedAtCap(r.lost):
		return exitWith(exitLost, fmt.Errorf("%w (raise --max-hold if the command needs longer; the command was stopped at the cap "+
			"and exited with status %d)", r.lost, code))
	case r.lost != nil:
		return exitWith(exitLost, fmt.Errorf("%w (the command exited with status %d; its work may not have been exclusive)", r.lost, code))
	case r.capStop > 0: // stopped before the cap, as at a lost lease
		return exitWith(exitLost, errors.Join(fmt.Errorf("the lease was about to reach its maximum hold of %s (--max-hold): the command "+
			"was stopped and exited with status %d; raise --max-hold if the command needs longer", r.capStop, code), relErr))
	case watchdogDied:
		err := fmt.Errorf("the watchdog process of the command (pid %d) died without reporting how the command ended (was it killed?); "+
			"s3lock killed the command's process group before releasing the lease", r.child.Process.Pid)
		return exitWith(exitWatchdogDied, errors.Join(err, relErr))
	}
	if relErr != nil {
		fmt.Fprintf(r.a.stderr, "s3lock: warning: %s; the lease will lapse by itself within %s\n", oneLine(relErr.Error()), r.held.duration())
	}
	if code != 0 {
		return exitWith(code, nil)
	}
	return nil
}

// stopping says why the command gets SIGTERM with left to go: the lease's
// cap (--max-hold) comes (recorded in capStop), or renewals are failing.
func (r *runner) stopping(left time.Duration) string {
	if at, d := r.held.capped(); !at.IsZero() && !r.held.expiresAt().Before(at.Add(-time.Millisecond)) {
		r.capStop = d
		return fmt.Sprintf("s3lock: the lease reaches its maximum hold of %s (--max-hold) in %s; stopping the command (SIGTERM now, SIGKILL when it does)",
			d, left.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("s3lock: renewals are failing and the lease runs out in %s; stopping the command (SIGTERM now, SIGKILL when the lease runs out)",
		left.Round(100*time.Millisecond))
}

// killingText says that the command gets SIGKILL because the lease was lost
// (lost): at its cap, or otherwise, when someone else may hold the lock.
func killingText(lost error) string {
	if endedAtCap(lost) {
		return "s3lock: " + strings.TrimPrefix(oneLine(lost.Error()), "s3lock: ") + "; killing the command (--max-hold)"
	}
	return "s3lock: " + strings.TrimPrefix(oneLine(lost.Error()), "s3lock: ") + "; killing the command (someone else may hold the lock now)"
}

// endedAtCap reports whether err is a lease's end at its cap (--max-hold).
func endedAtCap(err error) bool {
	var lost *s3lock.LeaseLostError
	return errors.As(err, &lost) && lost.Reason == s3lock.LostMaxHold
}

// release releases lease with a context of its own: the command's context
// may have been cancelled by the signal that stopped the command.
func (a *app) release(lease *s3lock.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return lease.Release(ctx)
}

// childExitCode returns the exit code a shell would report for the command.
func childExitCode(ps *os.ProcessState, waitErr error) int {
	if ps == nil {
		if waitErr != nil {
			return exitError
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	return exitError
}

// graceFor returns the grace period for a lease: the flag's value, or,
// when it was not given (0, which the flag refuses), a quarter of the
// lease, at most 10s. It must leave SIGTERM well
// before the lease could run out even between two healthy renewals (every
// third of the lease).
func graceFor(flag, lease time.Duration) (time.Duration, error) {
	if flag == 0 {
		return min(defaultGrace, lease/defaultGraceShare), nil
	}
	if limit := lease/2 - s3lock.SafetyMargin(lease); flag > limit {
		return 0, usagef("--grace-period %s is too long for --lease %s: it must be at most %s, so that the command is asked to stop only when renewals are failing",
			flag, lease, limit.Round(time.Millisecond))
	}
	return flag, nil
}
