//go:build unix

package runguard

import (
	"fmt"
	"os"
	"syscall"
)

// newSession starts a process in a session of its own.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// interruptProcess sends pid SIGINT, as Ctrl-C does.
func interruptProcess(pid int) error { return syscall.Kill(pid, syscall.SIGINT) }

// lockFile takes an exclusive lock on path (created if needed) and returns
// its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runguard: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("runguard: locking %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}
