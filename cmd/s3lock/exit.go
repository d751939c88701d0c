package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Exit codes. `s3lock run` exits with its command's own code once the command
// has run; these are the codes of s3lock itself.
const (
	exitOK    = 0
	exitError = 1 // the store failed or refused: unreachable, access denied, no such bucket, ...
	exitUsage = 2 // bad flags, arguments or configuration
	exitHeld  = 3 // the lock is held by someone else, or others are ahead in its line (and --wait ran out)
	exitLost  = 4 // the lease was lost: work done under it may not have been exclusive
	// exitSuperseded: with --order newest, a newer waiter joined the line,
	// so this one stopped waiting without taking the lock.
	exitSuperseded = 5
	// exitWatchdogDied: run's watchdog process died (killed) while the command
	// ran; s3lock killed the command's process group, then released.
	exitWatchdogDied = 6
	// exitSlotsMismatch: the lock admits another number of holders than
	// --slots asked for (a slot lock asked for as a mutex, or the other way
	// round); waiting does not change that. watch exits so on a slot lock.
	exitSlotsMismatch = 7
	// exitNotThisLease: the token names no lease of this lock: its epoch
	// belongs to another acquisition (a wrong token, or another bucket's).
	exitNotThisLease = 8
	// exitCannotRun and exitNotFound follow the shells' convention for a
	// command that could not be started.
	exitCannotRun = 126
	exitNotFound  = 127
	// exitSignal + N: s3lock (or its command) was stopped by signal N.
	exitSignal = 128
)

const exitCodesHelp = `Exit codes:
  0    success
  1    error: the store is unreachable, refused the credentials, has no such bucket, ...
  2    usage: bad flags, arguments or configuration
  3    the lock is held by someone else, or others wait before this one in
       its line (and --wait ran out)
  4    the lease was lost (lapsed or force-released) before it was released:
       the work done under it may not have been exclusive
  5    --order newest: a newer run joined the lock's line, so this one
       stopped waiting (without the lock; run did not start its command)
  6    run: the watchdog process that watches the command died (was it
       killed?); s3lock killed the command and everything it started,
       then released the lease
  7    the lock admits another number of holders than --slots asked for (no
       --slots: a mutex); every holder must use the same --slots. watch: the
       lock is a slot lock, which watch cannot follow
  8    renew, release: the token names no lease of this lock (its epoch
       belongs to another acquisition): check the token and --bucket
  126  run, backend run: the command could not be started; 127: it was not
       found
  128+N  stopped by signal N while waiting (130 for SIGINT, 143 for SIGTERM),
       or while watch --until waited (a watch without --until exits 0)
  s3lock run otherwise exits with its command's exit code (128+N if the
  command was killed by signal N).`

// nameRules is what a refused lock name is told instead of a help pointer:
// no command's help lists the rules (s3lock.ValidateName has them all).
const nameRules = "a lock name is a key path: segments of letters, digits and -_.=+@,:!~ separated by single " +
	"slashes, at most 512 bytes, not starting with '::', without '.', '..', 'lock-*.json', 's3lock-probe', " +
	"'lock-line', 'lock-slots' or 'lock-shared' segments"

// exitErr carries an exit code and, if err is set, the message to print.
type exitErr struct {
	code int
	err  error
	// hint adds "see 's3lock CMD --help'" to the message.
	hint bool
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// usagef returns a usage error (exit code 2) with a help hint.
func usagef(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...), hint: true}
}

// exitWith returns an error that exits with code after printing err (if
// err is not nil).
func exitWith(code int, err error) error { return &exitErr{code: code, err: err} }

// signalErr is the cause of a context cancelled by a signal.
type signalErr struct{ sig os.Signal }

func (e signalErr) Error() string { return "interrupted by " + signalName(e.sig) }

func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignal + int(s)
	}
	return exitError
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

// classify turns an error into an exit code, and says whether the message
// should end with a pointer to --help: only for usage errors.
func classify(ctx context.Context, err error) (code int, hint bool) {
	var ee *exitErr
	var sig signalErr
	var lost *s3lock.LeaseLostError
	switch {
	case errors.As(err, &ee):
		return ee.code, ee.hint
	case errors.As(context.Cause(ctx), &sig) && errors.Is(err, context.Canceled):
		return signalCode(sig.sig), false
	case errors.Is(err, s3lock.ErrInvalidName), errors.Is(err, s3lock.ErrInvalidConfig),
		errors.Is(err, awsclient.ErrInvalidOptions), errors.Is(err, awsclient.ErrNoRegion):
		return exitUsage, true
	case errors.As(err, &lost) && lost.Reason == s3lock.LostNotThisLease:
		return exitNotThisLease, false
	case errors.Is(err, s3lock.ErrLeaseLost):
		return exitLost, false
	case errors.Is(err, s3lock.ErrSuperseded):
		return exitSuperseded, false
	case errors.Is(err, s3lock.ErrSlotsMismatch):
		return exitSlotsMismatch, false
	case errors.Is(err, s3lock.ErrHeld):
		return exitHeld, false
	}
	// The store failed or refused: the message says what to do, and the
	// command's help would not (a usage hint on "no such bucket" or an
	// unreachable endpoint pointed the wrong way).
	return exitError, false
}

// oneLine flattens a message onto one line: joined errors are separated by
// newlines, and a log collector would split them.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	return textsafe.Escape(strings.ReplaceAll(s, "\n", "; "), 0)
}
