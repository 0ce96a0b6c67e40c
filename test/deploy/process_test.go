package deploy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// schedulerProcess is a muster-scheduler binary running as its own process,
// as a replica of the Deployment (or the static pod) would.
type schedulerProcess struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	// port serves /healthz, /readyz, /metrics over HTTPS on 127.0.0.1.
	port int
	// credential identifies the process's token in the audit log (its
	// credential-id, "JTI=…"); empty for other identities.
	credential string

	mu      sync.Mutex
	lines   []logLine
	changed chan struct{} // closed and replaced on every new line
	exited  chan struct{}
	exitErr error
}

type logLine struct {
	at   time.Time
	text string
}

// processSpec is what a scheduler process runs with, taken from a manifest.
type processSpec struct {
	// args are the container's arguments (after the binary). Paths inside the
	// container are overridden: --config, and the kubeconfigs.
	args []string
	// config is the KubeSchedulerConfiguration; its clientConnection gets the
	// kubeconfig, as in-cluster configuration is not available here.
	config []byte
	// kubeconfig is the identity the scheduler runs as.
	kubeconfig string
	// env is added to the process's environment.
	env []string
}

// startSchedulerProcess starts the binary; the test's cleanup kills it if it
// still runs.
func startSchedulerProcess(t *testing.T, name string, spec processSpec) *schedulerProcess {
	t.Helper()
	dir := filepath.Join(workDir, t.Name(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "config.yaml")
	if err := writeSchedulerConfig(configFile, spec.config, spec.kubeconfig); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// pflag keeps the last value of a flag: these override the manifest's
	// in-container paths and ports.
	args := append(append([]string(nil), spec.args...),
		"--config="+configFile,
		"--authentication-kubeconfig="+spec.kubeconfig,
		"--authorization-kubeconfig="+spec.kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
	)
	p := startProcess(t, name, schedulerBin, args, spec.env)
	p.port = port
	return p
}

func (p *schedulerProcess) read(r io.Reader, closer io.Closer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, logLine{at: time.Now(), text: sc.Text()})
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	closer.Close()
	p.mu.Lock()
	p.exitErr = err
	p.mu.Unlock()
	close(p.exited)
}

// waitLog waits until a log line contains substr and returns when it was
// read.
// leaseAcquired is what client-go's leader election logs when this
// process takes the lease namespace/name.
func leaseAcquired(lease string) string {
	return `"Successfully acquired lease" lock="` + lease + `"`
}

func (p *schedulerProcess) waitLog(ctx context.Context, substr string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	seen := 0
	for {
		p.mu.Lock()
		for _, l := range p.lines[seen:] {
			if strings.Contains(l.text, substr) {
				p.mu.Unlock()
				return l.at, nil
			}
		}
		seen = len(p.lines)
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			return time.Time{}, fmt.Errorf("%s exited (%v) before logging %q", p.name, p.exitErr, substr)
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s did not log %q in %v", p.name, substr, timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// hasLogged reports whether a line so far contains substr.
func (p *schedulerProcess) hasLogged(substr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l.text, substr) {
			return true
		}
	}
	return false
}

// forbidden returns the log lines that report a request RBAC refused.
func (p *schedulerProcess) forbidden() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if strings.Contains(strings.ToLower(l.text), "forbidden") {
			out = append(out, l.text)
		}
	}
	return out
}

func (p *schedulerProcess) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := max(0, len(p.lines)-n)
	var b strings.Builder
	for _, l := range p.lines[start:] {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// kill sends SIGKILL, as a node failure or the OOM killer would, and waits
// until the process is gone.
func (p *schedulerProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM, as the kubelet does, and waits; the scheduler releases
// its lease on the way out.
func (p *schedulerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Errorf("%s did not stop in 30s after SIGTERM", p.name)
		p.kill()
	}
}

// get requests path from the secure port, with a bearer token unless empty,
// as a kubelet probe or a Prometheus scrape would (the certificate is
// self-signed), and returns the status code and body.
func (p *schedulerProcess) get(ctx context.Context, path, token string) (int, string, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", p.port, path), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitHTTP waits until path answers 200 without credentials.
func (p *schedulerProcess) waitHTTP(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		code, body, err := p.get(ctx, path, "")
		if err == nil && code == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %q %v", code, strings.TrimSpace(body), err)
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v)", p.name, p.exitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s %s not OK in %v: last answer %s", p.name, path, timeout, last)
}

// writeSchedulerConfig writes config with clientConnection.kubeconfig set.
func writeSchedulerConfig(file string, config []byte, kubeconfig string) error {
	var cfg map[string]any
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("decoding the scheduler configuration: %w", err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
