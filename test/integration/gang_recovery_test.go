package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Gangs left partly placed: by a member that does not come, by a scheduler
// that stopped midway.

// TestGangTimeout places a gang one of whose members is held back by a
// scheduling gate: the other member waits at Permit for the gang's
// scheduleTimeoutSeconds, is released, and holds nothing afterwards.
// Volcano's PodGroup has no timeout of its own: its members wait for the
// Gang plugin's defaultScheduleTimeoutSeconds.
func TestGangTimeout(t *testing.T) {
	for _, k := range withPodGroup(groupKinds(t)) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			spec := v1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: ptr.To[int32](1)}
			config := k.config(t)
			if !k.has(spec) {
				spec.ScheduleTimeoutSeconds = nil
				config = withPluginArgs(t, config, "Gang", map[string]any{"defaultScheduleTimeoutSeconds": 1})
			}
			e.startScheduler(config)
			deletePod := func(name string) {
				if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
					t.Fatal(err)
				}
			}
			g := e.gang(k, "gated", spec)
			free := g.member("gated-0", "4", "")
			held := g.member("gated-1", "4", "")
			held.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
			e.create(free, held)
			e.staysUnbound(2500*time.Millisecond, "gated-0", "gated-1")
			// After the timeout the free member holds nothing: plain pods
			// take both nodes whole.
			e.create(e.pod("plain-0", map[v1.ResourceName]string{v1.ResourceCPU: "4"}),
				e.pod("plain-1", map[v1.ResourceName]string{v1.ResourceCPU: "4"}))
			e.waitBoundWithin(2*time.Second, "plain-0", "plain-1")
			deletePod("plain-1")
			// Lift the gate: with one node left, the gang still cannot bind…
			e.liftSchedulingGates("gated-1")
			e.staysUnbound(time.Second, "gated-0", "gated-1")
			// …until the other plain pod goes.
			deletePod("plain-0")
			e.waitBoundWithin(3*time.Second, "gated-0", "gated-1")
		})
	}
}

// TestGangRestart starts the scheduler on a cluster where a gang is half
// bound (as a scheduler that stopped midway leaves it): the bound members
// count, and the rest bind.
func TestGangRestart(t *testing.T) {
	for _, k := range withPodGroup(groupKinds(t)) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			g := e.gang(k, "half", v1alpha1.PodGroupSpec{MinMember: 4})
			for i := range 2 {
				p := g.member(fmt.Sprintf("half-%d", i), "3", "")
				p.Spec.NodeName = fmt.Sprintf("n-%d", i)
				e.create(p)
			}
			e.create(g.member("late-0", "3", ""), g.member("late-1", "3", ""))
			e.startScheduler(k.config(t))
			e.waitBoundWithin(5*time.Second, "half-0", "half-1", "late-0", "late-1")
			if b := e.bound(); b["late-0"] == b["late-1"] || b["late-0"] == "n-0" || b["late-0"] == "n-1" {
				t.Errorf("late members share or overcommit nodes: %v", b)
			}
		})
	}
}
