package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

const runLong = `Acquire the lock NAME, run CMD while holding it, and release the lock when CMD
exits. s3lock exits with CMD's exit code (128+N if CMD was killed by signal N).

Waiting: if the lock is held, s3lock waits up to --wait (default 5m; 0 tries
once) and reports who holds it on stderr. If the store cannot be reached at the
first attempt, s3lock fails at once instead of waiting.

CMD's environment gets:
  S3LOCK_EPOCH   the lease's epoch: the fencing token, only ever grows
  S3LOCK_KEY     the key of the lease's object in the bucket
  S3LOCK_HOLDER  the holder identity written into the lease
  S3LOCK_BUCKET  the bucket
  S3LOCK_NAME    the lock name

While CMD runs, the lease is renewed every third of --lease. SIGINT, SIGTERM
and SIGHUP sent to s3lock are forwarded to CMD (when s3lock runs in the
foreground of a terminal, CMD gets the terminal's Ctrl-C itself and only
SIGTERM is forwarded).

CMD never outlives the lease. If renewals keep failing, s3lock sends CMD
SIGTERM when the lease has --grace-period left (default a quarter of --lease,
at most 10s), and SIGKILL when it runs out; if someone force-releases the
lease, CMD gets SIGKILL at once (someone else may already hold the lock).
s3lock then exits with code 4. If s3lock itself is killed, CMD and everything
it started get SIGKILL (Linux; in the foreground of a terminal only CMD
itself) and the lease lapses after --lease.

` + exitCodesHelp

func (a *app) runCommand() *cobra.Command {
	var af acquireFlags
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- CMD [ARGS...]",
		Short: "Run a command while holding a lock",
		Long:  runLong,
		Example: `  s3lock run --bucket my-locks migrations -- ./migrate.sh up
  S3LOCK_BUCKET=my-locks s3lock run deploy/prod --wait 15m -- terraform apply -auto-approve`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0:
				return usagef("missing the lock NAME and the command: s3lock run NAME -- CMD [ARGS...]")
			case dash < 0:
				return usagef("missing '--' before the command: s3lock run NAME -- CMD [ARGS...]")
			case dash == 0:
				return usagef("missing the lock NAME before '--'")
			case dash > 1:
				return usagef("expected one lock NAME before '--', got %q", args[:dash])
			case len(args) == dash:
				return usagef("missing the command after '--'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd.Context(), args[0], args[1:], af, grace)
		},
	}
	af.register(cmd, defaultRunLease)
	durationFlag(cmd.Flags(), &grace, "grace-period", 0, "how long before the lease could run out a command gets SIGTERM when renewals keep failing (default a quarter of --lease, at most 10s)")
	return cmd
}

func (a *app) run(ctx context.Context, name string, argv []string, af acquireFlags, grace time.Duration) error {
	if err := a.needBucket(); err != nil {
		return err
	}
	if err := s3lock.ValidateName(name); err != nil {
		return err
	}
	grace, err := graceFor(grace, af.lock.lease)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		// Do not take (and burn) an epoch for a command that cannot run.
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return exitWith(code, fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	c, err := a.client(ctx, a.bucket, af.lock)
	if err != nil {
		return err
	}
	lease, err := a.acquire(ctx, c, name, af)
	if err != nil {
		return err
	}

	fg := foregroundOfTerminal()
	guard := guarded(fg)
	line := argv
	if guard {
		if line, err = guardCommand(argv); err != nil {
			return errors.Join(err, a.release(lease))
		}
	}
	child := exec.Command(line[0], line[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(),
		"S3LOCK_EPOCH="+strconv.FormatUint(lease.Epoch(), 10),
		"S3LOCK_KEY="+lease.Key(),
		"S3LOCK_HOLDER="+lease.Holder(),
		"S3LOCK_BUCKET="+lease.Bucket(),
		"S3LOCK_NAME="+lease.Name(),
	)
	configureChild(child, fg, guard)

	// Signals that arrive from here on go to the command, not to our context.
	forward := make(chan os.Signal, 4)
	a.setSignalHandler(func(sig os.Signal) {
		select {
		case forward <- sig:
		default: // a burst while the command exits: it has enough to act on
		}
	})
	defer a.setSignalHandler(nil)
	if ctx.Err() != nil {
		// Interrupted between the acquisition and now: do not start.
		relErr := a.release(lease)
		code := exitError
		var se signalErr
		if errors.As(context.Cause(ctx), &se) {
			code = signalCode(se.sig)
		}
		return exitWith(code, errors.Join(fmt.Errorf("%w before the command started", context.Cause(ctx)), relErr))
	}

	// The kernel ties the parent-death signal to the thread that starts the
	// child: keep this goroutine on that thread until the command is done.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := child.Start(); err != nil {
		relErr := a.release(lease)
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return exitWith(code, errors.Join(fmt.Errorf("cannot run %s: %w", argv[0], err), relErr))
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	// The command must never outlive the lease: SIGTERM while the lease has
	// `grace` left and renewals keep failing, SIGKILL once it is lost.
	var lost error
	termSent := false
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	leaseDone := lease.Done()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		case sig := <-forward:
			if fg && sig != syscall.SIGTERM {
				continue // the terminal sent it to the command too
			}
			_ = signalChild(child.Process, sig, !fg)
		case <-watch.C:
			if left := time.Until(lease.ExpiresAt()); !termSent && lease.Err() == nil && left <= grace {
				termSent = true
				fmt.Fprintf(a.stderr, "s3lock: renewals are failing and the lease runs out in %s; stopping the command (SIGTERM now, SIGKILL when the lease runs out)\n",
					left.Round(100*time.Millisecond))
				_ = signalChild(child.Process, syscall.SIGTERM, !fg)
			}
		case <-leaseDone:
			leaseDone = nil
			if !errors.Is(lease.Err(), s3lock.ErrLeaseLost) {
				continue
			}
			lost = lease.Err()
			fmt.Fprintf(a.stderr, "s3lock: %s; killing the command (someone else may hold the lock now)\n", oneLine(lost.Error()))
			_ = signalChild(child.Process, syscall.SIGKILL, !fg)
		}
	}

	code := childExitCode(child.ProcessState, waitErr)
	relErr := a.release(lease)
	if lost == nil && errors.Is(relErr, s3lock.ErrLeaseLost) {
		lost = relErr
	}
	if lost != nil {
		return exitWith(exitLost, fmt.Errorf("%w (the command exited with status %d; its work may not have been exclusive)", lost, code))
	}
	if relErr != nil {
		fmt.Fprintf(a.stderr, "s3lock: warning: %s; the lease will lapse by itself within %s\n", oneLine(relErr.Error()), lease.Duration())
	}
	if code != 0 {
		return exitWith(code, nil)
	}
	return nil
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

// graceFor returns the grace period for a lease: the flag's value, or by
// default a quarter of the lease, at most 10s. It must leave SIGTERM well
// before the lease could run out even between two healthy renewals (every
// third of the lease).
func graceFor(flag, lease time.Duration) (time.Duration, error) {
	if flag == 0 {
		return min(defaultGrace, lease/4), nil
	}
	if limit := lease/2 - s3lock.SafetyMargin(lease); flag > limit {
		return 0, usagef("--grace-period %s is too long for --lease %s: it must be at most %s, so that the command is asked to stop only when renewals are failing",
			flag, lease, limit.Round(time.Millisecond))
	}
	return flag, nil
}
