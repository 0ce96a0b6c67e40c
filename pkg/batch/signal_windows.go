package batch

import "os"

// auditSignal: none on Windows, which has no SIGUSR2.
var auditSignal os.Signal
