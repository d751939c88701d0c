//go:build !unix

package runguard

import "syscall"

// newSession: no sessions here (nor a run guard: ForProvider fails first).
func newSession() *syscall.SysProcAttr { return nil }

func interruptProcess(int) error { return ErrUnsupported }

func lockFile(string) (func(), error) { return nil, ErrUnsupported }
