package runguard

import (
	"errors"
	"fmt"
	"net"

	"github.com/s3lock/terraform-provider-s3lock/internal/procfacts"
)

// The process facts the guard reads come from internal/procfacts (which the
// CLI's watchdog reads too); here they are worded as the guard's: a fact
// this system does not tell is ErrUnsupported, which the provider's
// diagnostic turns into a way out.

// procOf reads process pid: procfacts.ErrGone when it does not exist,
// ErrUnsupported where the system does not say.
func procOf(pid int) (procfacts.Process, error) {
	p, err := procfacts.Of(pid)
	return p, guardErr(err)
}

// peerOf returns the pid and uid of the process at the other end of c.
func peerOf(c *net.UnixConn) (pid, uid int, err error) {
	pid, uid, err = procfacts.Peer(c)
	return pid, uid, guardErr(err)
}

// tellProcess writes msg on process pid's standard error (terraform's: a
// terminal, or the pipe a CI runner reads).
func tellProcess(pid int, msg string) error {
	f, err := procfacts.Stderr(pid)
	if err != nil {
		return guardErr(err)
	}
	_, err = f.WriteString(msg)
	return errors.Join(err, f.Close())
}

// guardErr words a *procfacts.UnsupportedError as ErrUnsupported, with its
// reason; other errors (and nil) are returned as they are.
func guardErr(err error) error {
	var u *procfacts.UnsupportedError
	switch {
	case !errors.As(err, &u):
		return err
	case u.System:
		return fmt.Errorf("%w (%w)", ErrUnsupported, u.Err)
	}
	return fmt.Errorf("%w: %w", ErrUnsupported, u.Err)
}
