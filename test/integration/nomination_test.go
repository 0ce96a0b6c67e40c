package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestGangNominationGate runs Muster with kube-scheduler's gate
// NominatedNodeNameForExpectation on (the default) and off (an option the
// README offers for throughput). On, kube-scheduler writes the
// NominatedNodeName of a member before it waits at Permit; off, it writes
// nothing until the member binds. Either way gangs bind whole, a few
// members at a time, beside pods in no gang.
func TestGangNominationGate(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("NominatedNodeNameForExpectation=%t", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.NominatedNodeNameForExpectation, on)
			e := newEnv(t)
			e.nodes("n", 50, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(withPluginArgs(t, gangConfig(t), "Gang", map[string]any{"planStepMilliseconds": 1}))

			// gated-0 waits at Permit while gated-1 is held by a scheduling gate.
			e.podGroup("gated", v1alpha1.PodGroupSpec{MinMember: 2})
			labels := map[string]string{v1alpha1.LabelPodGroup: "gated"}
			held := e.member("gated-1", "4", labels)
			held.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
			e.create(e.member("gated-0", "4", labels), held)
			e.waitPodGroup("gated", "1 of 2 members placed", func(s *v1alpha1.PodGroupStatus) bool {
				c := scheduledCondition(s)
				return c != nil && strings.HasPrefix(c.Message, "1 of minMember 2 placed")
			})
			// Long enough for a write that must come, to return once it has;
			// a second for one that must not.
			within := time.Second
			if on {
				within = 10 * time.Second
			}
			nominated := e.waitNominated("gated-0", within)
			if on && nominated == "" {
				t.Error("gated-0 waits at Permit with no NominatedNodeName; kube-scheduler writes it with the gate on")
			}
			if !on && nominated != "" {
				t.Errorf("gated-0 waits at Permit nominated to %s; nothing should be written with the gate off", nominated)
			}
			e.liftSchedulingGates("gated-1")
			e.waitBound("gated-0", "gated-1")

			// A gang of 152 and 40 pods in no gang fill the 48 nodes left.
			gang := e.members("big", 152, "1", musterLabels("big", 152))
			var plain []string
			for i := range 40 {
				name := fmt.Sprintf("web-%d", i)
				e.create(e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "1"}))
				plain = append(plain, name)
			}
			e.waitBoundWithin(time.Minute, append(gang, plain...)...)
		})
	}
}

// waitNominated waits at most d for the pod to be nominated to a node and
// returns the node, or "" when it is not.
func (e *env) waitNominated(name string, d time.Duration) string {
	e.t.Helper()
	node := ""
	_ = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		p, err := cluster.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Status.NominatedNodeName
		return node != "", nil
	})
	return node
}

// liftSchedulingGates removes the pod's scheduling gates.
func (e *env) liftSchedulingGates(name string) {
	e.t.Helper()
	p, err := cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if _, err := cluster.Client.CoreV1().Pods(e.ns).Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
