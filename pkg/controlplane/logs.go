package controlplane

import (
	"flag"
	"fmt"
	"io"
	_ "unsafe" // go:linkname, below

	"go.uber.org/zap"
	_ "k8s.io/apiserver/pkg/storage/storagebackend/factory" // defines the logger linked below
	"k8s.io/klog/v2"
)

// etcdClientLogger is the apiserver storage's etcd client logger. The
// apiserver builds it in an init function, writing JSON to stderr at Info
// level, and offers no way to replace it: its ETCD_CLIENT_DEBUG parsing
// maps every valid level to Info. Unsilenced, every etcd client of the
// in-process apiserver prints "retrying of unary invoker failed" warnings
// when etcd stops before it, as at the end of a sandbox or bench run.
//
//go:linkname etcdClientLogger k8s.io/apiserver/pkg/storage/storagebackend/factory.etcd3ClientLogger
var etcdClientLogger *zap.Logger

// etcdClientDefault is etcdClientLogger as the apiserver built it.
var etcdClientDefault = etcdClientLogger

// QuietLogs discards klog output short of fatal errors, and the etcd
// client's log. An in-process
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
	etcdClientLogger = zap.NewNop()
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
	etcdClientLogger = etcdClientDefault
}
