//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// watchdogArg is the hidden first argument of the watchdog; without a parent-death
// signal (Linux only) there is no watchdog.
const watchdogArg = "__watchdog"

func watched(bool) bool { return false }

func watchdogCommand(argv []string) ([]string, error) { return argv, nil }

func setWatchdogDeathSignal(*syscall.SysProcAttr) {}

func runWatchdog([]string) int { return exitUsage }

// watchdogLink is a stand-in: there is no watchdog outside Linux.
type watchdogLink struct{}

func attachWatchdog(*exec.Cmd, time.Time) (*watchdogLink, error) {
	return nil, errors.New("the command watchdog needs Linux")
}

func (*watchdogLink) started()             {}
func (*watchdogLink) tell(time.Time) error { return nil }
func (*watchdogLink) outcome() string      { return "" }
func (*watchdogLink) close()               {}
func killGroup(int, time.Duration) bool    { return true }
func groupRunning(int) bool                { return false }
func awaitExit(int)                        {}
