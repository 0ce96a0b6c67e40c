//go:build !linux

package deploy

import "os/exec"

// dieWithParent: only Linux can tie a child's life to its parent's; the
// tests' cleanups kill the schedulers they start.
func dieWithParent(*exec.Cmd) {}
