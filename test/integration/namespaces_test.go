package integration

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestQueueNamespaces: a queue whose namespaceSelector does not match the
// gang's namespace does not admit it: the PodGroup and an Event say why,
// and the gang reclaims nothing although its queue's share is lent to
// another queue. Once the namespace is labelled to match, the gang is
// admitted and takes its share back.
func TestQueueNamespaces(t *testing.T) {
	e := newEnv(t)
	team := fmt.Sprintf("team-%s", e.ns)
	e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
	e.queue("tenant", v1alpha1.QueueSpec{Weight: 1, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"muster.dev/test-team": team}}})
	e.queue("other", v1alpha1.QueueSpec{Weight: 1})
	var other []string
	for i := range 4 {
		other = append(other, e.gangOf(fmt.Sprintf("other%d", i), "other", 2, 2, "5", nil)...)
	}
	e.startScheduler(gangConfig(t))
	e.waitBound(other...) // all 40 cpu: tenant's 20 are lent

	tenant := e.gangOf("tenant", "tenant", 2, 2, "5", nil)
	why := fmt.Sprintf(`namespace %s may not use queue tenant: its namespaceSelector (muster.dev/test-team=%s) does not match the namespace's labels`, e.ns, team)
	e.waitPodGroup("tenant", "refused for its namespace", func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		return c != nil && c.Reason == "Unschedulable" && c.Message == why
	})
	e.waitEvent("tenant", "Unschedulable", why)
	e.staysUnbound(2*time.Second, tenant...)
	left := e.podNames()
	for _, name := range other {
		if !left[name] {
			t.Fatalf("pod %s was evicted for a gang its queue does not admit", name)
		}
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := cluster.Client.CoreV1().Namespaces().Get(e.ctx, e.ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["muster.dev/test-team"] = team
		_, err = cluster.Client.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitBoundWithin(10*time.Second, tenant...)
}
