//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// foregroundOfTerminal reports whether s3lock reads from a terminal whose
// foreground process group is its own: an interactive shell, where the
// command must stay in that group to read the terminal, and where Ctrl-C
// reaches the command directly.
func foregroundOfTerminal() bool {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return false
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}

// configureChild prepares the command's process. Outside an interactive
// terminal the command gets a process group of its own, so a signal sent to
// s3lock's group (by a CI runner, say) reaches it once, through s3lock, and
// s3lock can stop the command's own children with it; there the process is
// the command's watchdog (Linux), which kills the group if s3lock dies. In the
// foreground of a terminal only the command itself is killed if s3lock dies.
func configureChild(cmd *exec.Cmd, foreground, watchdog bool) {
	attr := &syscall.SysProcAttr{Setpgid: !foreground}
	if watchdog {
		setWatchdogDeathSignal(attr)
	} else {
		setDeathSignal(attr)
	}
	cmd.SysProcAttr = attr
}

// signalChild sends sig to the command, or to its whole process group.
func signalChild(p *os.Process, sig os.Signal, group bool) error {
	s, ok := sig.(syscall.Signal)
	if !group || !ok {
		return p.Signal(sig)
	}
	return syscall.Kill(-p.Pid, s)
}

// privateFile refuses a secret's file that others than its owner may read
// or write (as ssh refuses such a key).
func privateFile(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("it is readable or writable by others (mode %04o); make it private: chmod 600 %s", perm, f.Name())
	}
	return nil
}
