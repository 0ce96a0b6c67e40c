package controlplane

import (
	"flag"
	"io"

	"k8s.io/klog/v2"
)

// QuietLogs discards klog output short of fatal errors. An in-process
// apiserver and scheduler log at a rate that buries a program's own output;
// callers keep klog's defaults when the user asks for logs.
func QuietLogs() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
