package main

import "syscall"

// setDeathSignal makes the kernel kill the command if s3lock dies (even by
// SIGKILL): the command must not go on working under a lease that nobody
// renews any more, and nothing would be left to stop it when it lapses.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
