//go:build !linux

package main

import "syscall"

// guardArg is the hidden first argument of the guard; without a parent-death
// signal (Linux only) there is no guard.
const guardArg = "__guard"

func guarded(bool) bool { return false }

func guardCommand(argv []string) ([]string, error) { return argv, nil }

func setGuardDeathSignal(*syscall.SysProcAttr) {}

func runGuard([]string) int { return exitUsage }
