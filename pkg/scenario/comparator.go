package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-sched/muster/pkg/simulator"
)

// ComparatorEnv names the muster-comparator binary to run, overriding the
// search of comparatorBinary.
const ComparatorEnv = "MUSTER_COMPARATOR"

// comparatorName is the binary of the comparators module (comparators/):
// kube-scheduler with scheduler-plugins' Coscheduling and
// CapacityScheduling, on the Kubernetes release those plugins compile
// against, which is older than Muster's.
const comparatorName = "muster-comparator"

// external reports whether a profile's scheduler is the comparator binary.
func external(profile string) bool {
	return profile == ProfileCoscheduling || profile == ProfileCapacityScheduling
}

// comparatorReport is the JSON the comparator writes when it stops
// (comparators/recorder.go).
type comparatorReport struct {
	Reservations []struct {
		Pod      types.UID       `json:"pod"`
		Start    time.Time       `json:"start"`
		End      *time.Time      `json:"end"`
		Requests v1.ResourceList `json:"requests"`
	} `json:"reservations"`
	Attempts      float64            `json:"attempts"`
	Seconds       map[string]float64 `json:"seconds"`
	PeakHeapBytes uint64             `json:"peakHeapBytes"`
}

// comparator is the comparator binary scheduling one run.
type comparator struct {
	cmd    *exec.Cmd
	dir    string
	report string
	log    *os.File
	done   chan struct{}
	err    error // of the process, once done is closed
	once   sync.Once
	out    outcome
	outErr error
}

// startComparator starts the comparator on the KubeSchedulerConfiguration
// config against the cluster of kubeconfig.
func startComparator(ctx context.Context, kubeconfig string, config []byte) (*comparator, error) {
	bin, err := comparatorBinary(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "muster-comparator")
	if err != nil {
		return nil, err
	}
	c := &comparator{dir: dir, report: filepath.Join(dir, "report.json"), done: make(chan struct{})}
	configFile := filepath.Join(dir, "config.yaml")
	if err := simulator.WriteConfig(configFile, kubeconfig, config); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if c.log, err = os.Create(filepath.Join(dir, "stderr")); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config="+configFile, "--report="+c.report)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	dieWithParent(c.cmd)
	if err := c.cmd.Start(); err != nil {
		c.log.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop ends the comparator (SIGTERM, then SIGKILL after 30 s) and returns
// its report, with reservations still open closed at end.
func (c *comparator) stop(end time.Time) (outcome, error) {
	c.once.Do(func() { c.out, c.outErr = c.finish(end) })
	return c.out, c.outErr
}

func (c *comparator) finish(end time.Time) (outcome, error) {
	defer os.RemoveAll(c.dir)
	defer c.log.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	if c.err != nil {
		return outcome{}, fmt.Errorf("%s: %w; its last output:\n%s", comparatorName, c.err, c.tail())
	}
	data, err := os.ReadFile(c.report)
	if err != nil {
		return outcome{}, fmt.Errorf("%s wrote no report: %w", comparatorName, err)
	}
	var rep comparatorReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return outcome{}, fmt.Errorf("%s's report: %w", comparatorName, err)
	}
	out := outcome{counters: schedulerCounters{attempts: rep.Attempts, seconds: rep.Seconds}, peakHeap: rep.PeakHeapBytes}
	if out.counters.seconds == nil {
		out.counters.seconds = map[string]float64{}
	}
	for _, r := range rep.Reservations {
		if r.End != nil {
			out.rel = append(out.rel, released{pod: r.Pod, seconds: r.End.Sub(r.Start).Seconds(), requests: r.Requests})
		} else {
			out.open = append(out.open, released{pod: r.Pod, seconds: end.Sub(r.Start).Seconds(), requests: r.Requests})
		}
	}
	if st := c.cmd.ProcessState; st != nil {
		out.cpu = st.UserTime() + st.SystemTime()
		out.peakRSS = peakRSS(st)
	}
	return out, nil
}

// tail is the end of the comparator's output.
func (c *comparator) tail() string {
	data, _ := os.ReadFile(c.log.Name())
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	return string(data)
}

var buildComparator sync.Mutex

// comparatorBinary finds muster-comparator: $MUSTER_COMPARATOR, beside
// this executable, on PATH, or, in a source checkout (the working
// directory or one above it), built from comparators/ into bin/ (go
// build's cache makes that quick after the first time).
func comparatorBinary(ctx context.Context) (string, error) {
	if bin := os.Getenv(ComparatorEnv); bin != "" {
		return bin, nil
	}
	if exe, err := os.Executable(); err == nil {
		if bin := filepath.Join(filepath.Dir(exe), comparatorName); isFile(bin) {
			return bin, nil
		}
	}
	if bin, err := exec.LookPath(comparatorName); err == nil {
		return bin, nil
	}
	root, err := sourceRoot()
	if err != nil {
		return "", fmt.Errorf("profiles coscheduling and capacityscheduling run the %s binary (scheduler-plugins, in the module comparators/): "+
			"build it with `make build` and put bin/ on PATH, or set %s: %w", comparatorName, ComparatorEnv, err)
	}
	buildComparator.Lock()
	defer buildComparator.Unlock()
	bin := filepath.Join(root, "bin", comparatorName)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "comparators")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w\n%s", comparatorName, cmd.Dir, err, stderr.String())
	}
	return bin, nil
}

// sourceRoot is the Muster checkout holding the working directory.
func sourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(mod), "module github.com/muster-sched/muster\n") && isFile(filepath.Join(dir, "comparators", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not in a Muster source checkout")
		}
		dir = parent
	}
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
