package integration

import (
	"testing"
	"time"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestQueueRequeue: a gang its queue refused is retried within 1 s of a
// change that lets the queue take it, whichever informer sees the change
// first: the scheduler's (which retries the gang) or the accounting's.
func TestQueueRequeue(t *testing.T) {
	t.Run("the queue's capability is raised", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("team", v1alpha1.QueueSpec{Capability: res("cpu", "2")})
		e.startScheduler(gangConfig(t))
		e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
		members := e.members("g", 2, "2", map[string]string{v1alpha1.LabelPodGroup: "g"})
		e.waitPodGroup("g", "refused by its queue", func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && c.Message == "queue team: cpu 0 allocated+inqueue of 2 deserved, gang needs 4"
		})
		e.updateQueue("team", func(q *v1alpha1.Queue) { q.Spec.Capability = res("cpu", "8") })
		e.waitBoundWithin(time.Second, members...)
	})
	t.Run("another gang of the queue finishes", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("team", v1alpha1.QueueSpec{Capability: res("cpu", "4")})
		e.startScheduler(gangConfig(t))
		e.podGroup("first", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
		var first []string
		for _, name := range names("first", 2) {
			p := e.member(name, "2", map[string]string{v1alpha1.LabelPodGroup: "first"})
			p.Annotations = map[string]string{simulator.AnnotationRunTime: "5s"} // outlasts the second gang's refusal
			e.create(p)
			first = append(first, name)
		}
		e.waitBound(first...)
		e.podGroup("second", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
		second := e.members("second", 2, "2", map[string]string{v1alpha1.LabelPodGroup: "second"})
		e.waitPodGroup("second", "refused by its queue", func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && c.Reason == "Unschedulable" && c.Message != ""
		})
		e.staysUnbound(500*time.Millisecond, second...)
		waitPhase(t, e, first, "Succeeded", 10*time.Second)
		e.waitBoundWithin(time.Second, second...)
	})
}
