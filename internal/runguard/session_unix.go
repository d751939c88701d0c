//go:build unix

package runguard

import "syscall"

// newSession starts a process in a session of its own.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// interruptProcess sends pid SIGINT, as Ctrl-C does.
func interruptProcess(pid int) error { return syscall.Kill(pid, syscall.SIGINT) }
