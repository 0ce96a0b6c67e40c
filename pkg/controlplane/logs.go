package controlplane

import (
	"flag"
	"fmt"
	"io"

	"k8s.io/klog/v2"
)

// QuietLogs discards klog output short of fatal errors. An in-process
// apiserver and scheduler log at a rate that buries a program's own output;
// callers keep klog's defaults when the user asks for logs.
//
// It also sets the verbosity to 0: the apiserver's test server links
// k8s.io/kubernetes/test/utils/ktesting, whose init raises klog's default
// verbosity to 5 — and at 4 the scheduler framework builds a named logger
// per plugin per node in every Filter and Score call, which costs more than
// the plugins themselves.
func QuietLogs() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", "0")
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// Logs sets up klog for a program that runs a control plane in process:
// quiet (QuietLogs) at verbosity 0, else klog's defaults at verbosity v.
func Logs(v int) {
	if v <= 0 {
		QuietLogs()
		return
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", fmt.Sprint(v))
}
