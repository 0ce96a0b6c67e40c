package main

import (
	"context"
	"encoding/json"
	"runtime/metrics"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// RecorderName is the instrument plugin the runner enables in every
// profile; the same name as the runner's in-process recorder.
const RecorderName = "ScenarioRecorder"

var _ framework.ReservePlugin = &recorder{}

// Reservation is a pod's resources held on a node from Reserve on; End is
// set when Unreserve released them without a bind. The runner reads this
// JSON (pkg/scenario's comparatorReport).
type Reservation struct {
	Pod      types.UID       `json:"pod"`
	Start    time.Time       `json:"start"`
	End      *time.Time      `json:"end,omitempty"`
	Requests v1.ResourceList `json:"requests,omitempty"`
}

// Report is what the runner reads when the scheduler has stopped.
type Report struct {
	Reservations []Reservation `json:"reservations"`
	// Attempts and Seconds are kube-scheduler's scheduling attempts and
	// the time of its algorithm ("algorithm") and of each timed extension
	// point, summed over results and profiles.
	Attempts float64            `json:"attempts"`
	Seconds  map[string]float64 `json:"seconds"`
	// PeakHeapBytes is the largest Go heap sampled while it ran.
	PeakHeapBytes uint64 `json:"peakHeapBytes"`
}

// recorder records reservations: Reserve opens one, Unreserve closes it
// as released without a bind.
type recorder struct {
	mu       sync.Mutex
	open     map[types.UID]Reservation
	released []Reservation
	peakHeap uint64
}

func newRecorder() *recorder {
	return &recorder{open: map[types.UID]Reservation{}}
}

func (r *recorder) factory(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return r, nil
}

func (r *recorder) Name() string { return RecorderName }

func (r *recorder) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[pod.UID] = Reservation{Pod: pod.UID, Start: time.Now(), Requests: podRequests(pod)}
	return nil
}

func (r *recorder) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.open[pod.UID]
	if !ok {
		return // an earlier Reserve plugin failed before ours ran
	}
	delete(r.open, pod.UID)
	end := time.Now()
	res.End = &end
	r.released = append(r.released, res)
}

// sampleHeap records the Go heap every half second until ctx ends.
func (r *recorder) sampleHeap(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			r.mu.Lock()
			r.peakHeap = max(r.peakHeap, s[0].Value.Uint64())
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// report is the JSON of the reservations and kube-scheduler's counters.
func (r *recorder) report() ([]byte, error) {
	r.mu.Lock()
	rep := Report{Reservations: append([]Reservation(nil), r.released...), Seconds: map[string]float64{}, PeakHeapBytes: r.peakHeap}
	for _, res := range r.open {
		rep.Reservations = append(rep.Reservations, res)
	}
	r.mu.Unlock()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		switch f.GetName() {
		case "scheduler_schedule_attempts_total":
			for _, m := range f.GetMetric() {
				rep.Attempts += m.GetCounter().GetValue()
			}
		case "scheduler_scheduling_algorithm_duration_seconds":
			for _, m := range f.GetMetric() {
				rep.Seconds["algorithm"] += m.GetHistogram().GetSampleSum()
			}
		case "scheduler_framework_extension_point_duration_seconds":
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "extension_point" {
						rep.Seconds[l.GetValue()] += m.GetHistogram().GetSampleSum()
					}
				}
			}
		}
	}
	return json.Marshal(rep)
}

// podRequests sums the requests of the pod's containers (scenario pods
// have no init containers).
func podRequests(pod *v1.Pod) v1.ResourceList {
	out := v1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}
