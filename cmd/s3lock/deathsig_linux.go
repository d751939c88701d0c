package main

import "syscall"

// setDeathSignal makes the kernel send the command SIGTERM if s3lock dies
// (even by SIGKILL): the command must not go on working under a lease that
// nobody renews any more.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGTERM }
