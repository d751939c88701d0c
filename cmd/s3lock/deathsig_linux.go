package main

import "syscall"

// setDeathSignal makes the kernel kill the command if s3lock dies (even by
// SIGKILL): the command must not go on working under a lease that nobody
// renews any more, and nothing would be left to stop it when it lapses.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// setGracefulDeathSignal makes the kernel send the command SIGTERM if s3lock
// dies: Terraform then stops gracefully, and keeps in errored.tfstate what
// it can no longer write through the backend that died with s3lock.
func setGracefulDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGTERM }
