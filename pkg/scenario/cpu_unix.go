//go:build unix

package scenario

import (
	"os"
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, the process has used so
// far; 0 where getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the largest resident set of an ended child process; 0 where
// the system does not say.
func peakRSS(st *os.ProcessState) uint64 {
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		return uint64(ru.Maxrss) << 10 // KiB on Linux
	}
	return 0
}
