package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// guardArg is the hidden first argument that makes s3lock act as the guard
// of a command (see runGuard).
const guardArg = "__guard"

// guardDeathSignal is what the kernel sends the guard when s3lock dies. It is
// one s3lock never forwards; the guard catches it, so the command cannot get
// it from the group.
const guardDeathSignal = syscall.SIGUSR1

// guarded reports whether run starts the command under a guard: outside an
// interactive terminal, where the command has a process group of its own.
func guarded(foreground bool) bool { return !foreground }

// guardCommand returns the command line that runs argv under a guard.
func guardCommand(argv []string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the s3lock executable to guard the command: %w", err)
	}
	return append([]string{self, guardArg, "--"}, argv...), nil
}

// setGuardDeathSignal makes the kernel send the guard guardDeathSignal if
// s3lock dies (even by SIGKILL).
func setGuardDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = guardDeathSignal }

// runGuard runs argv in the guard's own process group (s3lock made the guard
// its leader) and stays next to it. If s3lock dies, the guard kills the whole
// group — the command and everything it started — since nothing would stop
// them once the lease lapses. Signals s3lock sends the group reach the
// command directly; the guard only waits, and exits as the command did.
func runGuard(argv []string) int {
	parent := os.Getppid()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, guardDeathSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if os.Getppid() != parent || parent == 1 {
		_ = syscall.Kill(0, syscall.SIGKILL) // s3lock died before we could watch it
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: cannot run %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(done)
	}()
	for {
		select {
		case <-done:
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				// Die the same way, so that s3lock reports it as the shell would.
				signal.Reset(ws.Signal())
				_ = syscall.Kill(os.Getpid(), ws.Signal())
				return exitSignal + int(ws.Signal())
			}
			return ws.ExitStatus()
		case sig := <-sigs:
			// The kernel sends the death signal whenever the thread of
			// s3lock that started the guard exits; while s3lock dies, its
			// other threads adopt the guard first, and only when the last
			// one is gone does the guard's parent change (and the signal
			// come again). So act only on a changed parent.
			if sig == guardDeathSignal && os.Getppid() != parent {
				_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, the guard included
			}
		}
	}
}
