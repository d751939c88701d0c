//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing: only Linux can signal a child when its parent
// dies.
func setDeathSignal(*syscall.SysProcAttr) {}

// setGracefulDeathSignal does nothing either.
func setGracefulDeathSignal(*syscall.SysProcAttr) {}
