//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

func foregroundOfTerminal() bool { return false }

func configureChild(*exec.Cmd, bool, bool) {}

func setGracefulDeathSignal(*syscall.SysProcAttr) {}

// signalChild sends sig to the command; where signals other than a kill
// cannot be delivered, it kills it.
func signalChild(p *os.Process, sig os.Signal, _ bool) error {
	if err := p.Signal(sig); err != nil {
		return p.Kill()
	}
	return nil
}

// privateFile does not check: file modes do not say who may read a file
// here.
func privateFile(*os.File) error { return nil }
