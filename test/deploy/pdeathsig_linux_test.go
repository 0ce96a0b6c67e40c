package deploy

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the scheduler die with the test binary, however the
// test binary ends.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
