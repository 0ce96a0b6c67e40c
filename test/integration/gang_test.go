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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// gangConfig is the replace-default profile with Gang, as shipped.
func gangConfig(t *testing.T) string { return readConfig(t, "replace-default.yaml") }

// member builds a pod of a gang: labels say which gang, cpu what it needs.
func (e *env) member(name, cpu string, labels map[string]string) *v1.Pod {
	p := e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: cpu})
	p.Labels = labels
	return p
}

func musterLabels(group string, min int) map[string]string {
	return map[string]string{v1alpha1.LabelPodGroup: group, v1alpha1.LabelMinAvailable: fmt.Sprint(min)}
}

// members creates n members named <group>-<i>.
func (e *env) members(group string, n int, cpu string, labels map[string]string) []string {
	names := names(group, n)
	for _, name := range names {
		e.create(e.member(name, cpu, labels))
	}
	return names
}

// bound returns the pods of the case bound to a node, by name.
func (e *env) bound() map[string]string {
	e.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// staysUnbound checks for d that none of the pods gets bound.
func (e *env) staysUnbound(d time.Duration, names ...string) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b := e.bound()
		for _, n := range names {
			if node, ok := b[n]; ok {
				e.t.Fatalf("pod %s was bound to %s; want it pending", n, node)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBoundWithin waits at most d for the pods to be bound.
func (e *env) waitBoundWithin(d time.Duration, names ...string) map[string]string {
	e.t.Helper()
	var b map[string]string
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, d, true, func(context.Context) (bool, error) {
		b = e.bound()
		for _, n := range names {
			if b[n] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("pods %v not all bound within %v (bound: %v)", names, d, b)
	}
	return b
}

func TestGangAllOrNothing(t *testing.T) {
	t.Run("a gang that fits binds entirely", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		e.waitBound(e.members("fits", 4, "3", musterLabels("fits", 4))...)
	})
	t.Run("a gang of 4 where 3 fit binds none and holds nothing", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		members := e.members("big", 4, "3", musterLabels("big", 4))
		e.staysUnbound(2*time.Second, members...)
		// Nothing is reserved for the gang: a plain pod needing a whole node
		// is scheduled at once.
		e.create(e.pod("plain", map[v1.ResourceName]string{v1.ResourceCPU: "4"}))
		e.waitBoundWithin(2*time.Second, "plain")
		e.staysUnbound(time.Second, members...)
	})
}

// TestGangMembersSeeEachOther: the whole-gang plan places each member
// seeing the members planned before it, so identical members that repel
// each other (required pod anti-affinity per node) are planned one per
// node, and a gang with more members than nodes is refused by its plan,
// saying how many members fit, before any member is reserved.
func TestGangMembersSeeEachOther(t *testing.T) {
	spread := func(e *env, group string, n int) []string {
		e.podGroup(group, v1alpha1.PodGroupSpec{MinMember: int32(n)})
		names := names(group, n)
		for _, name := range names {
			p := e.member(name, "1", map[string]string{v1alpha1.LabelPodGroup: group})
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelPodGroup: group}},
					TopologyKey:   v1.LabelHostname,
				}},
			}}
			e.create(p)
		}
		return names
	}
	t.Run("one member per node", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		placed := e.waitBound(spread(e, "apart", 4)...)
		if nodes := distinctNodes(placed); len(nodes) != 4 {
			t.Errorf("members share nodes: %v", placed)
		}
	})
	t.Run("more members than nodes binds none", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		members := spread(e, "crowd", 4)
		e.waitPodGroup("crowd", "refused by its plan", func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && c.Reason == "Unschedulable" && strings.HasPrefix(c.Message, "placeable 3/4: member ")
		})
		e.staysUnbound(time.Second, members...)
	})
}

// TestGangsDoNotDeadlock interleaves two gangs that each fit alone but not
// together: one binds whole, the other waits holding nothing and binds
// within 2 s of the first finishing.
func TestGangsDoNotDeadlock(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(gangConfig(t))
	var a, b []string
	for i := range 4 {
		for _, g := range []string{"a", "b"} {
			name := fmt.Sprintf("%s-%d", g, i)
			p := e.member(name, "3", musterLabels(g, 4))
			p.Annotations = map[string]string{simulator.AnnotationRunTime: "3s"}
			e.create(p)
			if g == "a" {
				a = append(a, name)
			} else {
				b = append(b, name)
			}
		}
	}
	// One gang binds whole; the other has no member bound.
	var first, second []string
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		bound := e.bound()
		na, nb := count(bound, a), count(bound, b)
		if na > 0 && nb > 0 {
			t.Fatalf("both gangs have bound members: a %d, b %d", na, nb)
		}
		switch {
		case na == 4:
			first, second = a, b
		case nb == 4:
			first, second = b, a
		}
		return first != nil, nil
	})
	if err != nil {
		t.Fatalf("no gang bound whole: %v", e.bound())
	}
	// The first runs for 3 s; the second must bind within 2 s after.
	waitPhase(t, e, first, v1.PodSucceeded, 10*time.Second)
	e.waitBoundWithin(2*time.Second, second...)
}

func count(bound map[string]string, names []string) int {
	n := 0
	for _, name := range names {
		if bound[name] != "" {
			n++
		}
	}
	return n
}

func waitPhase(t *testing.T, e *env, names []string, phase v1.PodPhase, d time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			p, err := cluster.Client.CoreV1().Pods(e.ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Status.Phase != phase {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods %v did not reach %s within %v", names, phase, d)
	}
}

func TestGangRequeue(t *testing.T) {
	t.Run("binds within 2s of a node being added", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		members := e.members("g", 4, "3", musterLabels("g", 4))
		e.staysUnbound(time.Second, members...)
		e.nodes("extra", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.waitBoundWithin(2*time.Second, members...)
	})
	t.Run("binds within 2s of pods finishing", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(gangConfig(t))
		blocker := e.pod("blocker", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
		// Long enough that the gang is still blocked a second after its
		// members are created, on a loaded machine (-race) too.
		blocker.Annotations = map[string]string{simulator.AnnotationRunTime: "5s"}
		e.create(blocker)
		e.waitBound("blocker")
		members := e.members("g", 4, "3", musterLabels("g", 4))
		e.staysUnbound(time.Second, members...)
		waitPhase(t, e, []string{"blocker"}, v1.PodSucceeded, 10*time.Second)
		e.waitBoundWithin(2*time.Second, members...)
	})
}

func TestGangSources(t *testing.T) {
	sp, err := spclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	vc, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		setup       func(e *env)
	}{
		{name: "muster labels", labels: musterLabels("g", 3)},
		{name: "legacy labels", labels: map[string]string{
			v1alpha1.LegacyLabelPodGroup: "g", v1alpha1.LegacyLabelMinAvailable: "3",
		}},
		{name: "muster PodGroup", labels: map[string]string{v1alpha1.LabelPodGroup: "g"}, setup: func(e *env) {
			e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 3})
		}},
		{name: "scheduler-plugins PodGroup", labels: map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "g"}, setup: func(e *env) {
			_, err := sp.SchedulingV1alpha1().PodGroups(e.ns).Create(e.ctx, &spv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: spv1alpha1.PodGroupSpec{MinMember: 3},
			}, metav1.CreateOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "volcano PodGroup", annotations: map[string]string{v1alpha1.VolcanoAnnotationGroupName: "g"}, setup: func(e *env) {
			_, err := vc.SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, &vcv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: vcv1beta1.PodGroupSpec{MinMember: 3},
			}, metav1.CreateOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(gangConfig(t))
			if tt.setup != nil {
				tt.setup(e)
			}
			// Three members of 3 cpu on two 4-cpu nodes: the gang never
			// fits, and none may bind.
			members := names("g", 3)
			for _, name := range members {
				p := e.member(name, "3", tt.labels)
				p.Annotations = tt.annotations
				e.create(p)
			}
			e.staysUnbound(time.Second, members...)
			// With room for all three, all bind.
			e.nodes("extra", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.waitBoundWithin(2*time.Second, members...)
		})
	}
}

func (e *env) podGroup(name string, spec v1alpha1.PodGroupSpec) {
	e.t.Helper()
	_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).Create(e.ctx, &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestGangRoles(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(gangConfig(t))
	e.podGroup("job", v1alpha1.PodGroupSpec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1, "worker": 2}})
	var workers []string
	for i := range 3 {
		name := fmt.Sprintf("worker-%d", i)
		e.create(e.member(name, "1", map[string]string{v1alpha1.LabelPodGroup: "job", v1alpha1.LabelRole: "worker"}))
		workers = append(workers, name)
	}
	// Three members, but no ps: the gang is not valid and nothing binds.
	e.staysUnbound(time.Second, workers...)
	// The ps arrives, through Volcano's annotation.
	ps := e.member("ps-0", "1", map[string]string{v1alpha1.LabelPodGroup: "job"})
	ps.Annotations = map[string]string{v1alpha1.VolcanoAnnotationTaskSpec: "ps"}
	e.create(ps)
	e.waitBoundWithin(3*time.Second, append(workers, "ps-0")...)
}

func TestGangElastic(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(gangConfig(t))
	e.podGroup("elastic", v1alpha1.PodGroupSpec{MinMember: 2})
	members := e.members("elastic", 5, "3", map[string]string{v1alpha1.LabelPodGroup: "elastic"})
	// minMember 2 place together; one more fits; two stay pending.
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return count(e.bound(), members) == 3, nil
	})
	if err != nil {
		t.Fatalf("want 3 of 5 elastic members bound, got %v", e.bound())
	}
	e.staysUnbound(time.Second, unbound(e.bound(), members)...)
}

// TestGangExtrasArriveWhilePlaced: members beyond minMember created right
// after the minimum, while the gang is being placed, schedule too (they
// wait behind the plan, then are woken when the gang is ready).
func TestGangExtrasArriveWhilePlaced(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 3, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.startScheduler(gangConfig(t))
	var all []string
	for g := range 6 {
		group := fmt.Sprintf("g%d", g)
		all = append(all, e.members(group, 4, "1", musterLabels(group, 2))...)
	}
	e.waitBoundWithin(10*time.Second, all...)
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

// TestGangTimeout places a gang one of whose members is held back by a
// scheduling gate: the other member waits at Permit for the gang's
// scheduleTimeoutSeconds, is released, and holds nothing afterwards.
func TestGangTimeout(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(gangConfig(t))
	e.podGroup("gated", v1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: ptr.To[int32](1)})
	free := e.member("gated-0", "4", map[string]string{v1alpha1.LabelPodGroup: "gated"})
	held := e.member("gated-1", "4", map[string]string{v1alpha1.LabelPodGroup: "gated"})
	held.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
	e.create(free, held)
	e.staysUnbound(2500*time.Millisecond, "gated-0", "gated-1")
	// After the timeout the free member holds nothing: a plain pod can take
	// either node whole.
	e.create(e.pod("plain-0", map[v1.ResourceName]string{v1.ResourceCPU: "4"}))
	e.waitBoundWithin(2*time.Second, "plain-0")
	// Lift the gate: with one node left, the gang still cannot bind…
	e.liftSchedulingGates("gated-1")
	e.staysUnbound(time.Second, "gated-0", "gated-1")
	// …until the plain pod goes.
	if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, "plain-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.waitBoundWithin(3*time.Second, "gated-0", "gated-1")
}

// TestGangRestart starts the scheduler on a cluster where a gang is half
// bound (as a scheduler that stopped midway leaves it): the bound members
// count, and the rest bind.
func TestGangRestart(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.podGroup("half", v1alpha1.PodGroupSpec{MinMember: 4})
	labels := map[string]string{v1alpha1.LabelPodGroup: "half"}
	for i := range 2 {
		p := e.member(fmt.Sprintf("half-%d", i), "3", labels)
		p.Spec.NodeName = fmt.Sprintf("n-%d", i)
		e.create(p)
	}
	e.members("late", 2, "3", labels)
	e.startScheduler(gangConfig(t))
	e.waitBoundWithin(5*time.Second, "half-0", "half-1", "late-0", "late-1")
	if b := e.bound(); b["late-0"] == b["late-1"] || b["late-0"] == "n-0" || b["late-0"] == "n-1" {
		t.Errorf("late members share or overcommit nodes: %v", b)
	}
}

func TestGangBadInput(t *testing.T) {
	tests := []struct {
		name   string
		labels []map[string]string
	}{
		{name: "min-available not a number", labels: []map[string]string{{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "abc"}}},
		{name: "min-available 0", labels: []map[string]string{{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "0"}}},
		{name: "min-available beyond int32", labels: []map[string]string{{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "99999999999"}}},
		{name: "members disagree", labels: []map[string]string{
			{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "2"},
			{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "3"},
		}},
		{name: "no PodGroup and no min-available", labels: []map[string]string{{v1alpha1.LabelPodGroup: "g"}}},
		{name: "legacy name without min-available", labels: []map[string]string{{v1alpha1.LegacyLabelPodGroup: "g"}}},
		{name: "scheduler-plugins PodGroup missing", labels: []map[string]string{{v1alpha1.SchedulerPluginsLabelPodGroup: "g"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(gangConfig(t))
			// Members of each label set in turn: members that disagree
			// exist from the second on, so the gang is never valid (two
			// that agree, created first, could start before the others
			// exist).
			var bad []string
			for j := range 2 {
				for i, l := range tt.labels {
					name := fmt.Sprintf("bad-%d-%d", i, j)
					e.create(e.member(name, "1", l))
					bad = append(bad, name)
				}
			}
			e.staysUnbound(time.Second, bad...)
			// The scheduler keeps working.
			e.create(e.pod("plain", map[v1.ResourceName]string{v1.ResourceCPU: "1"}))
			e.waitBoundWithin(2*time.Second, "plain")
		})
	}
}

// TestGangMembershipFollowsLabels: a pod is a member of the gang its labels
// name now. One relabelled into another gang leaves the first (no ghost
// member counted there), and one that loses an unrelated Muster label (it
// leaves one of the scheduler's label-selected watches) stays a member.
func TestGangMembershipFollowsLabels(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 1, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.startScheduler(gangConfig(t))
	e.podGroup("a", v1alpha1.PodGroupSpec{MinMember: 3})
	e.podGroup("b", v1alpha1.PodGroupSpec{MinMember: 2})
	inA := map[string]string{v1alpha1.LabelPodGroup: "a"}
	e.create(
		e.member("a-0", "1", map[string]string{v1alpha1.LabelPodGroup: "a", v1alpha1.LabelQueue: v1alpha1.DefaultQueue}),
		e.member("a-1", "1", inA),
		e.member("mover", "1", map[string]string{v1alpha1.LabelPodGroup: "b"}),
	)
	invalid := func(group, message string) {
		e.waitPodGroup(group, message, func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && c.Reason == "Invalid" && c.Message == message
		})
	}
	invalid("a", "2 members exist, minMember 3")
	invalid("b", "1 members exist, minMember 2")

	relabel := func(name string, labels map[string]string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod, err := cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod.Labels = labels
			_, err = cluster.Client.CoreV1().Pods(e.ns).Update(e.ctx, pod, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// a-0 leaves the queue-label watch and stays in a.
	relabel("a-0", inA)
	// mover leaves b for a: a has its three members, b none.
	relabel("mover", inA)
	e.waitBound("a-0", "a-1", "mover")

	// b's one new member does not make it valid: mover is not counted there.
	e.create(e.member("b-0", "1", map[string]string{v1alpha1.LabelPodGroup: "b"}))
	invalid("b", "1 members exist, minMember 2")
	e.staysUnbound(2*time.Second, "b-0")
}

// TestGangPlannedInSteps: with a plan step of 1 ms, a gang of 160 members
// is planned over many of its members' cycles while 40 pods in no gang
// arrive; the cluster has room for exactly both. Every member must be
// reactivated as the plan goes on, the plain pods must keep off the room
// planned for members, and the gang binds whole.
func TestGangPlannedInSteps(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 50, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(withPluginArgs(t, gangConfig(t), "Gang", map[string]any{"planStepMilliseconds": 1}))
	gang := e.members("big", 160, "1", musterLabels("big", 160))
	var plain []string
	for i := range 40 {
		name := fmt.Sprintf("web-%d", i)
		e.create(e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "1"}))
		plain = append(plain, name)
	}
	e.waitBoundWithin(time.Minute, append(gang, plain...)...)
}
