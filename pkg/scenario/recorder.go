package scenario

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
)

// RecorderName is the instrument plugin the runner enables in every
// profile. It only watches: Reserve opens a reservation, Unreserve closes it
// as released without a bind.
const RecorderName = "ScenarioRecorder"

var _ fwk.ReservePlugin = &recorder{}

// reservation is a pod's resources held on a node from Reserve on.
type reservation struct {
	start    time.Time
	requests v1.ResourceList
}

// released is a reservation that ended in Unreserve.
type released struct {
	pod      types.UID
	seconds  float64
	requests v1.ResourceList
}

// recorder records reservations of one run. It is shared by the plugin
// instances of the run's scheduler and read by the runner at the end.
type recorder struct {
	mu       sync.Mutex
	now      func() time.Time
	open     map[types.UID]reservation
	released []released
}

func newRecorder() *recorder {
	return &recorder{now: time.Now, open: map[types.UID]reservation{}}
}

// factory makes the plugin for the scheduler's registry.
func (r *recorder) factory(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return r, nil
}

func (r *recorder) Name() string { return RecorderName }

// Reserve and Unreserve skip a gang's trial placement, which reserves
// devices and volumes for the length of the trial only.
func (r *recorder) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	if gang.IsTrial(state) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[pod.UID] = reservation{start: r.now(), requests: podRequests(pod)}
	return nil
}

func (r *recorder) Unreserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if gang.IsTrial(state) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.open[pod.UID]
	if !ok {
		return // an earlier Reserve plugin failed before ours ran
	}
	delete(r.open, pod.UID)
	r.released = append(r.released, released{pod: pod.UID, seconds: r.now().Sub(res.start).Seconds(), requests: res.requests})
}

// snapshot returns the released reservations, and the reservations still
// open at end, closed at end.
func (r *recorder) snapshot(end time.Time) (rel, stillOpen []released) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rel = append(rel, r.released...)
	for uid, res := range r.open {
		stillOpen = append(stillOpen, released{pod: uid, seconds: end.Sub(res.start).Seconds(), requests: res.requests})
	}
	return rel, stillOpen
}

// podRequests sums the requests of the pod's containers (init containers
// are not used by scenario pods).
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
