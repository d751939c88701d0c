//go:build !unix

package main

import "os/exec"

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup kills cmd's process only: without process groups, what
// it started survives it.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
