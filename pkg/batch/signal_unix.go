//go:build !windows

package batch

import (
	"os"
	"syscall"
)

// auditSignal runs an audit of the queue accounting on demand; kube-scheduler
// compares and dumps its cache on it too.
var auditSignal os.Signal = syscall.SIGUSR2
