package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestIdleRoomIsLent: three queues of weight 1 share 16 units (cpu, or
// GPUs), so each deserves 5⅓ and whole pods meet 5. Two queues fill the
// cluster, 8 and 8; the third arrives. Reclaim cuts the first two back to
// make room for the third, and the unit no queue can claim under its share
// is lent: 16 of 16 in use, 5 or 6 pods a queue, and it stays so.
func TestIdleRoomIsLent(t *testing.T) {
	tests := []struct {
		name     string
		shape    simulator.NodeShape
		nodes    int
		resource v1.ResourceName
		requests map[v1.ResourceName]string
	}{
		{
			name: "cpu", nodes: 4, shape: simulator.NodeShape{CPU: "4", Memory: "16Gi"},
			resource: v1.ResourceCPU, requests: map[v1.ResourceName]string{v1.ResourceCPU: "1"},
		},
		{
			name: "gpu", nodes: 2, shape: simulator.NodeShape{CPU: "64", Memory: "256Gi", GPUs: 8},
			resource: simulator.GPUResource,
			requests: map[v1.ResourceName]string{v1.ResourceCPU: "100m", simulator.GPUResource: "1"},
		},
	}
	for _, kind := range queueKinds {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				e := newEnv(t)
				e.nodes("n", tt.nodes, tt.shape)
				for _, q := range []string{"qa", "qb", "qc"} {
					e.queueOf(kind, q, v1alpha1.QueueSpec{Weight: 1})
				}
				pods := func(q string) {
					for i := range 16 {
						p := e.pod(fmt.Sprintf("%s-%d", q, i), tt.requests)
						p.Labels = map[string]string{v1alpha1.LabelQueue: q}
						e.create(p)
					}
				}
				pods("qa")
				pods("qb")
				e.startScheduler(configFor(t, kind))
				e.waitUse(tt.resource, 16, func(use map[string]int64) bool { return use["qa"] == 8 && use["qb"] == 8 }, 20*time.Second)

				start := time.Now()
				pods("qc")
				use := e.waitUse(tt.resource, 16, func(use map[string]int64) bool {
					for _, q := range []string{"qa", "qb", "qc"} {
						if use[q] != 5 && use[q] != 6 {
							return false
						}
					}
					return true
				}, 5*time.Second) // at once, not on a periodic flush
				t.Logf("16 of 16 %s in use %v after qc's pods were created: %v", tt.resource, time.Since(start).Round(time.Millisecond), use)
				// And it stays: no queue takes the lent unit back and forth.
				if got := e.useFor(tt.resource, 3*time.Second); !equalUse(got, use) {
					t.Errorf("use moved after it settled: %v, then %v", use, got)
				}
			})
		}
	}
}

// use sums, per queue label, the given resource (whole units) that the
// case's bound, unfinished pods request.
func (e *env) use(r v1.ResourceName) map[string]int64 {
	e.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[r]
			out[p.Labels[v1alpha1.LabelQueue]] += q.Value()
		}
	}
	return out
}

// waitUse waits until the queues use total units of r between them and
// ok holds, and returns the use.
func (e *env) waitUse(r v1.ResourceName, total int64, ok func(map[string]int64) bool, timeout time.Duration) map[string]int64 {
	e.t.Helper()
	var got map[string]int64
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = e.use(r)
		var sum int64
		for _, n := range got {
			sum += n
		}
		return sum == total && ok(got), nil
	})
	if err != nil {
		e.t.Fatalf("%s in use per queue: %v; want %d in all", r, got, total)
	}
	return got
}

// useFor polls the use of r for d and returns the first that differs from
// the use at the start, or that one.
func (e *env) useFor(r v1.ResourceName, d time.Duration) map[string]int64 {
	e.t.Helper()
	first := e.use(r)
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if got := e.use(r); !equalUse(got, first) {
			return got
		}
	}
	return first
}

func equalUse(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestLentRoomIsTakenBack: three queues of weight 1 share 16 cpu and end
// 6, 5 and 5 of it, one of them on the cpu lent. When qc's weight goes to
// 2 it deserves 8, and reclaim takes back what the others hold above their
// new shares of 4, lent cpu included: 4, 4 and 8, and it stays so.
func TestLentRoomIsTakenBack(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/by reclaim, when a weight grows", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			for _, q := range []string{"qa", "qb", "qc"} {
				e.queueOf(kind, q, v1alpha1.QueueSpec{Weight: 1})
				for i := range 16 {
					p := e.pod(fmt.Sprintf("%s-%d", q, i), map[v1.ResourceName]string{v1.ResourceCPU: "1"})
					p.Labels = map[string]string{v1alpha1.LabelQueue: q}
					e.create(p)
				}
			}
			e.startScheduler(configFor(t, kind))
			e.waitUse(v1.ResourceCPU, 16, func(use map[string]int64) bool {
				return use["qa"]+use["qb"]+use["qc"] == 16 && max(use["qa"], use["qb"], use["qc"]) == 6
			}, 20*time.Second)

			e.setQueueWeight(kind, "qc", 2)
			use := e.waitUse(v1.ResourceCPU, 16, func(use map[string]int64) bool {
				return use["qa"] == 4 && use["qb"] == 4 && use["qc"] == 8
			}, 20*time.Second)
			if got := e.useFor(v1.ResourceCPU, 3*time.Second); !equalUse(got, use) {
				t.Errorf("use moved after it settled: %v, then %v", use, got)
			}
		})
	}
}
