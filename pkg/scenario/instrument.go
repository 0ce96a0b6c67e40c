package scenario

import (
	"bufio"
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
)

// kube-scheduler's process-wide metrics the runner reads: each run takes
// the difference before and after.
const (
	// attemptsMetric counts scheduling attempts.
	attemptsMetric = "scheduler_schedule_attempts_total"
	// algorithmMetric times the scheduling algorithm of each attempt:
	// PreFilter, Filter and Score over the nodes.
	algorithmMetric = "scheduler_scheduling_algorithm_duration_seconds"
	// extensionPointMetric times each extension point of each attempt
	// (label extension_point); Filter is not among them.
	extensionPointMetric = "scheduler_framework_extension_point_duration_seconds"
)

// schedulerCounters are sums over kube-scheduler's metrics so far, over
// results and profiles.
type schedulerCounters struct {
	attempts float64
	// seconds holds the time of the scheduling algorithm under
	// "algorithm" and of each timed extension point under its name.
	seconds map[string]float64
}

// readSchedulerCounters reads the counters; zero when the registry cannot
// be gathered.
func readSchedulerCounters() schedulerCounters {
	c := schedulerCounters{seconds: map[string]float64{}}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return c
	}
	for _, f := range families {
		switch f.GetName() {
		case attemptsMetric:
			for _, m := range f.GetMetric() {
				c.attempts += m.GetCounter().GetValue()
			}
		case algorithmMetric:
			for _, m := range f.GetMetric() {
				c.seconds["algorithm"] += m.GetHistogram().GetSampleSum()
			}
		case extensionPointMetric:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "extension_point" {
						c.seconds[l.GetValue()] += m.GetHistogram().GetSampleSum()
					}
				}
			}
		}
	}
	return c
}

// since is what the counters gained since before.
func (c schedulerCounters) since(before schedulerCounters) schedulerCounters {
	d := schedulerCounters{attempts: c.attempts - before.attempts, seconds: map[string]float64{}}
	for k, v := range c.seconds {
		d.seconds[k] = v - before.seconds[k]
	}
	return d
}

// memorySampler records the process's peak resident set and Go heap.
type memorySampler struct {
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	peakRSS  uint64
	peakHeap uint64
}

func startMemorySampler(ctx context.Context) *memorySampler {
	m := &memorySampler{done: make(chan struct{})}
	m.sample()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.done:
				return
			case <-tick.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *memorySampler) sample() {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	heap := uint64(0)
	if s[0].Value.Kind() == metrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	rss := residentSet()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peakHeap = max(m.peakHeap, heap)
	m.peakRSS = max(m.peakRSS, rss)
}

// stop ends the sampling and returns the peaks.
func (m *memorySampler) stop() (rss, heap uint64) {
	close(m.done)
	m.wg.Wait()
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peakRSS, m.peakHeap
}

// residentSet is the process's resident set size (Linux), or 0.
func residentSet() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmRSS:") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 2 {
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
