//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// guardArg is the hidden first argument of the guard; without a parent-death
// signal (Linux only) there is no guard.
const guardArg = "__guard"

func guarded(bool) bool { return false }

func guardCommand(argv []string) ([]string, error) { return argv, nil }

func setGuardDeathSignal(*syscall.SysProcAttr) {}

func runGuard([]string) int { return exitUsage }

// guardLink is a stand-in: there is no guard outside Linux.
type guardLink struct{}

func attachGuard(*exec.Cmd, time.Time) (*guardLink, error) {
	return nil, errors.New("the command guard needs Linux")
}

func (*guardLink) started()             {}
func (*guardLink) tell(time.Time) error { return nil }
func (*guardLink) outcome() string      { return "" }
func (*guardLink) close()               {}
func killGroup(int, time.Duration) bool { return true }
func groupRunning(int) bool             { return false }
func awaitExit(int)                     {}
