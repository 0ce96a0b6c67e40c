package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Which members a gang has and needs: roles, members beyond minMember, and
// members that move between gangs.

// TestGangRoles: a gang with minTaskMember waits for each role's minimum.
// A member's role is its label muster.dev/role, else Volcano's annotation
// volcano.sh/task-spec, whatever its kind. Label-only gangs and
// scheduler-plugins' PodGroups have no minTaskMember.
func TestGangRoles(t *testing.T) {
	job := v1alpha1.PodGroupSpec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1, "worker": 2}}
	for _, k := range groupKinds(t) {
		if !k.has(job) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			g := e.gang(k, "job", job)
			workers := names("worker", 3)
			for _, name := range workers {
				e.create(g.member(name, "1", "worker"))
			}
			// Three members, but no ps: the gang is not valid and nothing
			// binds.
			e.staysUnbound(time.Second, workers...)
			// The ps arrives, through Volcano's annotation.
			ps := g.member("ps-0", "1", "")
			setMeta(&ps.Annotations, v1alpha1.VolcanoAnnotationTaskSpec, "ps")
			e.create(ps)
			e.waitBoundWithin(3*time.Second, append(workers, "ps-0")...)
		})
	}
	// Volcano checks the roles only where their minimums fit in minMember
	// (its Job webhook sets a role's minimum to its replicas, so an elastic
	// job's roles ask for more). Muster's PodGroup refuses such minimums.
	t.Run("volcano/roles asking more than minMember are not checked", func(t *testing.T) {
		k := volcanoKind(t)
		e := newEnv(t)
		e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(k.config(t))
		g := e.gang(k, "elastic", v1alpha1.PodGroupSpec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 1, "worker": 3}})
		e.create(g.member("worker-0", "1", "worker"))
		e.staysUnbound(time.Second, "worker-0")
		// With minMember workers, no ps and fewer workers than their
		// minimum, the gang binds.
		e.create(g.member("worker-1", "1", "worker"))
		e.waitBoundWithin(3*time.Second, "worker-0", "worker-1")
	})
}

// TestGangElastic: members beyond minMember bind one by one, as far as
// they fit, once minMember are placed.
func TestGangElastic(t *testing.T) {
	for _, k := range withPodGroup(groupKinds(t)) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			members := e.gang(k, "elastic", v1alpha1.PodGroupSpec{MinMember: 2}).members(5, "3")
			// minMember 2 place together; one more fits; two stay pending.
			err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return count(e.bound(), members) == 3, nil
			})
			if err != nil {
				t.Fatalf("want 3 of 5 elastic members bound, got %v", e.bound())
			}
			e.staysUnbound(time.Second, unbound(e.bound(), members)...)
		})
	}
}

// TestGangExtrasArriveWhilePlaced: members beyond minMember created right
// after the minimum, while the gang is being placed, schedule too (they
// wait behind the plan, then are woken when the gang is ready).
func TestGangExtrasArriveWhilePlaced(t *testing.T) {
	for _, k := range groupKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
			e.startScheduler(k.config(t))
			var all []string
			for g := range 6 {
				all = append(all, e.gang(k, fmt.Sprintf("g%d", g), v1alpha1.PodGroupSpec{MinMember: 2}).members(4, "1")...)
			}
			e.waitBoundWithin(10*time.Second, all...)
		})
	}
}

func unbound(bound map[string]string, names []string) []string {
	var out []string
	for _, n := range names {
		if bound[n] == "" {
			out = append(out, n)
		}
	}
	return out
}

// TestGangMembershipFollowsLabels: a pod is a member of the gang its labels
// (Volcano's: its annotations) name now. One moved into another gang leaves
// the first (no ghost member counted there), and one that loses an
// unrelated Muster label (it leaves one of the scheduler's label-selected
// watches) stays a member.
func TestGangMembershipFollowsLabels(t *testing.T) {
	for _, k := range withPodGroup(groupKinds(t)) {
		t.Run(k.name, func(t *testing.T) {
			membershipFollowsLabels(t, k)
		})
	}
}

func membershipFollowsLabels(t *testing.T, k groupKind) {
	e := newEnv(t)
	e.nodes("n", 1, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.startScheduler(k.config(t))
	a := e.gang(k, "a", v1alpha1.PodGroupSpec{MinMember: 3})
	b := e.gang(k, "b", v1alpha1.PodGroupSpec{MinMember: 2})
	queued := a.member("a-0", "1", "")
	// The queue label is unrelated where the PodGroup names the queue:
	// scheduler-plugins' gangs take theirs from their members' labels.
	if k.has(v1alpha1.PodGroupSpec{MinMember: 3, Queue: v1alpha1.DefaultQueue}) {
		setMeta(&queued.Labels, v1alpha1.LabelQueue, v1alpha1.DefaultQueue)
	}
	e.create(queued, a.member("a-1", "1", ""), b.member("mover", "1", ""))
	a.waitWhy("a-1", "Invalid", "2 members exist, minMember 3")
	b.waitWhy("mover", "Invalid", "1 members exist, minMember 2")

	// rejoin makes the pod name a member of g alone, as g's kind makes
	// members.
	rejoin := func(name string, g kindGang) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod, err := cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod.Labels, pod.Annotations = nil, nil
			k.join(pod, g, "")
			_, err = cluster.Client.CoreV1().Pods(e.ns).Update(e.ctx, pod, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// a-0 leaves the queue-label watch and stays in a.
	rejoin("a-0", a)
	// mover leaves b for a: a has its three members, b none.
	rejoin("mover", a)
	e.waitBound("a-0", "a-1", "mover")

	// b's one new member does not make it valid: mover is not counted there.
	e.create(b.member("b-0", "1", ""))
	b.waitWhy("b-0", "Invalid", "1 members exist, minMember 2")
	e.staysUnbound(2*time.Second, "b-0")
}
