package s3server

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the server when the process that
// started it dies, so a crashed or killed test binary leaves no server behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
