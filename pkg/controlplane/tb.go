package controlplane

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"k8s.io/klog/v2"
)

// runner plays testing.TB for kube-apiserver's test server, which is built
// for tests, so that the same control plane serves the sandbox, benchmarks
// and test suites (whose shared control plane outlives any one *testing.T).
// Log lines go to klog at high verbosity; a fatal error ends the goroutine,
// as testing does, and is reported by err.
type runner struct {
	name string

	mu       sync.Mutex
	cleanups []func()
	failures []string
	tempDirs []string
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// cleanup runs the registered functions, last registered first.
func (r *runner) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	dirs := r.tempDirs
	r.tempDirs = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Attr is testing.TB's test attribute; the runner has no report to put it in.
func (r *runner) Attr(key, value string) {}

// Chdir changes the process's working directory, which testing restores
// after the test; the runner's caller owns the process and keeps it.
func (r *runner) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		r.Fatal(err)
	}
}

func (r *runner) Error(args ...any) { r.fail(fmt.Sprint(args...)) }
func (r *runner) Errorf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
}
func (r *runner) Fail()    { r.fail("failed") }
func (r *runner) FailNow() { r.Fail(); runtime.Goexit() }
func (r *runner) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}
func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *runner) Failed() bool { return r.err() != nil }
func (r *runner) Helper()      {}
func (r *runner) Log(args ...any) {
	klog.V(6).InfoDepth(1, fmt.Sprint(args...))
}
func (r *runner) Logf(format string, args ...any) {
	klog.V(6).InfoDepth(1, fmt.Sprintf(format, args...))
}
func (r *runner) Name() string { return r.name }
func (r *runner) Setenv(key, value string) {
	if err := os.Setenv(key, value); err != nil {
		r.Error(err)
	}
}
func (r *runner) Skip(args ...any)                 { r.Fatal(args...) }
func (r *runner) SkipNow()                         { r.FailNow() }
func (r *runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *runner) Skipped() bool                    { return false }
func (r *runner) TempDir() string {
	d, err := os.MkdirTemp("", "muster-"+r.name)
	if err != nil {
		r.Fatal(err)
	}
	r.mu.Lock()
	r.tempDirs = append(r.tempDirs, d)
	r.mu.Unlock()
	return d
}

func (r *runner) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

func (r *runner) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %v", r.name, r.failures)
}

// run calls f on its own goroutine, so that a Fatal in f ends only that
// goroutine, and returns the failures f reported.
func (r *runner) run(f func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	return r.err()
}
