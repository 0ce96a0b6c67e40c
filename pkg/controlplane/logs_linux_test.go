package controlplane

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
)

// An apiserver etcd client that loses etcd retries and warns; at
// verbosity 0 none of it reaches stderr.
func TestNoEtcdClientWarningsOnStderr(t *testing.T) {
	Logs(0)
	stderr := captureStderr(t)
	r := &runner{name: t.Name()}
	defer r.cleanup()
	url, err := startEtcd(r)
	if err != nil {
		t.Fatal(err)
	}
	cfg := storagebackend.NewDefaultConfig("/registry", nil)
	cfg.Transport.ServerList = []string{url}
	prober, err := factory.CreateProber(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prober.Close()
	r.cleanup() // etcd stops under the client
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := prober.Probe(ctx); err == nil {
		t.Fatal("etcd answered after it stopped")
	}
	if got := stderr(); strings.Contains(got, "etcd-client") || strings.Contains(got, `{"level"`) {
		t.Errorf("stderr carries etcd client logs:\n%.2000s", got)
	}
}

// captureStderr points file descriptor 2 (Linux: Dup3 exists on every
// architecture there) at a pipe until the returned
// function is called, which returns what was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	restored := false
	restore := func() string {
		if !restored {
			restored = true
			_ = syscall.Dup3(saved, 2, 0)
			_ = syscall.Close(saved)
			_ = w.Close()
			<-done
		}
		return buf.String()
	}
	t.Cleanup(func() { restore() })
	return restore
}
