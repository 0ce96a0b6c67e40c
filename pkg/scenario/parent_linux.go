package scenario

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a child process die with the runner, however the
// runner ends.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
