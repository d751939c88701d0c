package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

// The relay of `s3lock backend run` (Linux, outside an interactive
// terminal): s3lock starts s3lock again as `s3lock __relay -- CMD...`, which
// starts CMD and stays its parent, so that CMD gets exactly one SIGTERM if
// s3lock dies. The kernel's parent-death signal alone cannot promise that:
// it comes again each time the dying s3lock hands its child to another of
// its threads, and Terraform takes a second interrupt as "exit now",
// without saving what it could not write in errored.tfstate. The relay
// gets those signals instead (relayDeathSignal), acts on the first that
// comes with a changed parent, and exits as CMD did. Signals s3lock
// forwards go to the process group, so they reach CMD directly; the relay
// drops its copies.
const relayArg = "__relay"

// relayEnvParent names s3lock's pid in the relay's environment.
const relayEnvParent = "S3LOCK_RELAY_PARENT"

// relayed reports whether backend run starts its command through the
// relay: where the command has a process group of its own (as run's
// watchdog, outside an interactive terminal).
func relayed(foreground bool) bool { return !foreground }

// relayCommand returns the command line that runs argv through the relay,
// and the variable that tells the relay s3lock's pid.
func relayCommand(argv []string) ([]string, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("locating the s3lock executable to relay signals to the command: %w", err)
	}
	return append([]string{self, relayArg, "--"}, argv...), fmt.Sprintf("%s=%d", relayEnvParent, os.Getpid()), nil
}

// runRelay runs argv as the relay's child and returns its exit code (128+N
// if a signal N ended it).
func runRelay(argv []string) int {
	// The command's parent-death signal belongs to the thread that starts
	// it: keep this goroutine on it for the relay's whole life.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, watchdogDeathSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	parent, err := strconv.Atoi(os.Getenv(relayEnvParent))
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: relay: bad %s %q: the relay is started by s3lock backend run only\n", relayEnvParent, os.Getenv(relayEnvParent))
		return exitUsage
	}
	_ = os.Unsetenv(relayEnvParent)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // if the relay itself is killed
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "s3lock: cannot run %s: %v\n", argv[0], err)
		return cannotRunCode(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(done)
	}()
	stopped := false
	stop := func() {
		if !stopped && os.Getppid() != parent {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM) // once: Terraform's graceful stop
		}
	}
	stop() // s3lock may have died before the signal could be caught
	for {
		select {
		case <-done:
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				return exitSignal + int(ws.Signal())
			}
			return ws.ExitStatus()
		case sig := <-sigs:
			if sig == watchdogDeathSignal {
				stop()
			} // the group's signals reached the command directly
		}
	}
}
