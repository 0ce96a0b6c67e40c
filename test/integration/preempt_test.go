package integration

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Preemption within a queue: by priority, and by dominant share. Each
// case runs once per kind of queue.

// TestPreemptWithinQueue: a high-priority gang evicts low-priority work of
// its own queue only, never another queue's.
func TestPreemptWithinQueue(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/only the gang's own queue", func(t *testing.T) {
			e := newEnv(t)
			e.priorityClasses(map[string]int32{"it-low": 10, "it-high": 1000})
			e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
			e.queueOf(kind, "qa", v1alpha1.QueueSpec{Weight: 1})
			e.queueOf(kind, "qb", v1alpha1.QueueSpec{Weight: 1})
			low := func(p *v1.Pod) { p.Spec.PriorityClassName = "it-low" }
			var lowA, otherB []string
			for i := range 2 {
				lowA = append(lowA, e.gangOf(fmt.Sprintf("low%d", i), "qa", 2, 2, "5", low)...)
				otherB = append(otherB, e.gangOf(fmt.Sprintf("other%d", i), "qb", 2, 2, "5", low)...)
			}
			e.startScheduler(configFor(t, kind))
			e.waitBound(append(lowA, otherB...)...)
			// qa holds its deserved 20 cpu; the high-priority gang needs 10 more.
			high := e.gangOf("urgent", "qa", 2, 2, "5", func(p *v1.Pod) { p.Spec.PriorityClassName = "it-high" })
			e.waitBoundWithin(10*time.Second, high...)
			left := e.podNames()
			for _, name := range otherB {
				if !left[name] {
					t.Errorf("pod %s of another queue was evicted", name)
				}
			}
			if gone := missing(left, lowA); gone != 2 {
				t.Errorf("%d low-priority pods of qa evicted, want one whole gang (2)", gone)
			}
			// Evicted gangs go whole: no low gang is left with one member.
			err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
				left = e.podNames()
				for i := range 2 {
					if left[fmt.Sprintf("low%d-0", i)] != left[fmt.Sprintf("low%d-1", i)] {
						return false, nil
					}
				}
				return true, nil
			})
			if err != nil {
				t.Errorf("a low-priority gang was broken: %v", left)
			}
		})
	}
}

// priorityClasses creates PriorityClasses for the case.
func (e *env) priorityClasses(values map[string]int32) {
	e.t.Helper()
	for name, value := range values {
		_, err := cluster.Client.SchedulingV1().PriorityClasses().Create(e.ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		}, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() {
			_ = cluster.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

// TestPreemptElasticMemberTakesExtras: one extra member of a started
// high-priority gang preempts one member above the minimum of a
// low-priority gang, not the whole gang (a review found it took all 10).
func TestPreemptElasticMemberTakesExtras(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/one member above the minimum", func(t *testing.T) {
			e := newEnv(t)
			e.priorityClasses(map[string]int32{"el-low": 10, "el-high": 1000})
			e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
			e.queueOf(kind, "qa", v1alpha1.QueueSpec{Weight: 1})
			e.startScheduler(configFor(t, kind))
			high := func(p *v1.Pod) { p.Spec.PriorityClassName = "el-high" }
			h := e.gangOf("h", "qa", 2, 10, "2", high)
			l := e.gangOf("l", "qa", 2, 10, "2", func(p *v1.Pod) { p.Spec.PriorityClassName = "el-low" })
			e.waitBound(append(h, l...)...)
			p := e.member("h-extra", "2", map[string]string{v1alpha1.LabelPodGroup: "h", v1alpha1.LabelQueue: "qa"})
			high(p)
			e.create(p)
			e.waitBoundWithin(20*time.Second, "h-extra")
			e.waitSettled(time.Second)
			if gone := missing(e.podNames(), l); gone != 1 {
				t.Errorf("%d pods of the low-priority gang evicted for one 2-cpu member; want 1 of its 8 above minMember", gone)
			}
		})
	}
}

// TestDRFPreemption: one queue, a cpu-heavy job holds the whole node when
// a memory-heavy job of the same priority arrives. With drfPreemption the
// memory-heavy job evicts cpu-heavy members until the dominant shares are
// equal within one task, and then nothing more (the victim's share after
// an eviction must stay above the preemptor's: no preemption back); it
// never takes a job below its minMember. Without it, nothing is evicted.
func TestDRFPreemption(t *testing.T) {
	for _, kind := range queueKinds {
		for _, drf := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/drfPreemption=%v", kind, drf), func(t *testing.T) {
				e := newEnv(t)
				e.nodes("n", 1, simulator.NodeShape{CPU: "32", Memory: "128Gi"})
				e.queueOf(kind, "q", v1alpha1.QueueSpec{Weight: 1})
				cpuHeavy := e.gangOf("cpu-heavy", "q", 2, 20, "2", withMemory("1Gi"))
				// In every profile: config/volcano.yaml's must stay alike.
				e.startScheduler(withPluginArgs(t, configFor(t, kind), "Proportion", map[string]any{"drfPreemption": drf}))
				// The scheduler starts with the pods pending: settled means
				// the node full first, then nothing more for a while.
				e.waitBoundAtLeast(cpuHeavy, 16)
				e.waitSettled(time.Second)
				if n := count(e.bound(), cpuHeavy); n != 16 {
					t.Fatalf("cpu-heavy has %d pods bound before mem-heavy arrives, want 16 (the whole node)", n)
				}
				memHeavy := e.gangOf("mem-heavy", "q", 1, 40, "1", withMemory("4Gi"))
				if drf {
					e.waitBoundAtLeast(memHeavy, 1)
				}
				bound := e.waitSettled(2 * time.Second)
				a, b := count(bound, cpuHeavy), count(bound, memHeavy)
				left := e.podNames()
				evictedA, evictedB := missing(left, cpuHeavy), missing(left, memHeavy)
				shareA, shareB := float64(2*a)/32, float64(4*b)/128
				t.Logf("cpu-heavy: %d bound (%.3f), %d evicted; mem-heavy: %d bound (%.3f), %d evicted", a, shareA, evictedA, b, shareB, evictedB)
				if evictedB > 0 {
					t.Errorf("%d mem-heavy pods evicted: the preemptor must never be preempted back", evictedB)
				}
				if !drf {
					if evictedA > 0 || b > 0 {
						t.Errorf("without drfPreemption: %d cpu-heavy pods evicted, %d mem-heavy bound; want none", evictedA, b)
					}
					return
				}
				if a < 2 {
					t.Errorf("cpu-heavy left with %d pods, below its minMember 2", a)
				}
				if math.Abs(shareA-shareB) > 2.0/32+1e-9 {
					t.Errorf("dominant shares differ by more than one task: cpu-heavy %.3f, mem-heavy %.3f", shareA, shareB)
				}
				// Each eviction freed room mem-heavy used: 2 cpu for 2 pods.
				if want := (b + 1) / 2; evictedA > want {
					t.Errorf("%d cpu-heavy pods evicted for %d mem-heavy pods; at most %d needed", evictedA, b, want)
				}
				e.waitEvent("cpu-heavy", "Preempted", "to even dominant shares (DRF) with gang "+e.ns+"/mem-heavy")
			})
		}
	}
}

// missing counts the names that are not in left.
func missing(left map[string]bool, names []string) int {
	n := 0
	for _, name := range names {
		if !left[name] {
			n++
		}
	}
	return n
}
