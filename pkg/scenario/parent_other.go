//go:build !linux

package scenario

import "os/exec"

// dieWithParent is a no-op where the kernel cannot tie a child to its
// parent.
func dieWithParent(*exec.Cmd) {}
