//go:build !unix

package scenario

import "time"

// processCPU is 0 where getrusage does not exist.
func processCPU() time.Duration { return 0 }
