//go:build !unix

package scenario

import (
	"os"
	"time"
)

// processCPU is 0 where getrusage does not exist.
func processCPU() time.Duration { return 0 }

// peakRSS is 0 where getrusage does not exist.
func peakRSS(*os.ProcessState) uint64 { return 0 }
