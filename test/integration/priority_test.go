package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestPodGroupPriority: a PodGroup's priorityClassName is its gang's
// priority. A gang naming a class that does not exist waits, and its
// PodGroup says so; once the class exists, the gang — whose pods have no
// priority of their own — preempts a lower-priority gang of its queue
// (pods of class pg-low, 10) and never another queue's.
func TestPodGroupPriority(t *testing.T) {
	e := newEnv(t)
	e.priorityClasses(map[string]int32{"pg-low": 10})
	e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
	e.queue("qa", v1alpha1.QueueSpec{Weight: 1})
	e.queue("qb", v1alpha1.QueueSpec{Weight: 1})
	var lowA, otherB []string
	for i := range 2 {
		lowA = append(lowA, e.gangOf(fmt.Sprintf("low%d", i), "qa", 2, 2, "5", withClassName("pg-low"))...)
		otherB = append(otherB, e.gangOf(fmt.Sprintf("other%d", i), "qb", 2, 2, "5", withClassName("pg-low"))...)
	}
	e.startScheduler(gangConfig(t))
	e.waitBound(append(lowA, otherB...)...)

	e.podGroup("urgent", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "qa", PriorityClassName: "pg-urgent"})
	urgent := e.members("urgent", 2, "5", map[string]string{v1alpha1.LabelPodGroup: "urgent", v1alpha1.LabelQueue: "qa"})
	const missing = `PodGroup %s/urgent names PriorityClass "pg-urgent", which does not exist`
	e.waitPodGroup("urgent", "invalid for the missing class", func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		return c != nil && c.Reason == "Invalid" && c.Message == fmt.Sprintf(missing, e.ns)
	})
	e.staysUnbound(time.Second, urgent...)
	if left := e.podNames(); len(left) != len(lowA)+len(otherB)+len(urgent) {
		t.Fatalf("pods were evicted for a gang with no valid priority: %v", left)
	}

	e.priorityClasses(map[string]int32{"pg-urgent": 1000})
	e.waitBoundWithin(10*time.Second, urgent...)
	left := e.podNames()
	for _, name := range otherB {
		if !left[name] {
			t.Errorf("pod %s of another queue was evicted", name)
		}
	}
	gone := 0
	for _, name := range lowA {
		if !left[name] {
			gone++
		}
	}
	if gone != 2 {
		t.Errorf("%d low-priority pods of qa evicted, want one whole gang (2)", gone)
	}
}

func withClassName(name string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.PriorityClassName = name }
}
