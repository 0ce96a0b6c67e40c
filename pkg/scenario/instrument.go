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

// attemptsMetric is kube-scheduler's counter of scheduling attempts. It is
// process-wide: runs take the difference before and after.
const attemptsMetric = "scheduler_schedule_attempts_total"

// scheduleAttempts is the counter's current sum over results and profiles.
func scheduleAttempts() int {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != attemptsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return int(total)
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
