package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// waitBoundWithin waits at most d (under the race detector, raceSlowdown
// times d) for the pods to be bound.
func (e *env) waitBoundWithin(d time.Duration, names ...string) map[string]string {
	e.t.Helper()
	d *= raceSlowdown
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

// The gang tests run over the kinds of gangs (gang_kinds_test.go): every
// kind where the test had a label-only gang, every kind with a PodGroup
// where it had a Muster PodGroup.

func TestGangAllOrNothing(t *testing.T) {
	for _, k := range groupKinds(t) {
		t.Run(k.name+"/a gang that fits binds entirely", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			e.waitBound(e.gang(k, "fits", v1alpha1.PodGroupSpec{MinMember: 4}).members(4, "3")...)
		})
		t.Run(k.name+"/a gang of 4 where 3 fit binds none and holds nothing", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			members := e.gang(k, "big", v1alpha1.PodGroupSpec{MinMember: 4}).members(4, "3")
			e.staysUnbound(2*time.Second, members...)
			// Nothing is reserved for the gang: a plain pod needing a whole
			// node is scheduled at once.
			e.create(e.pod("plain", map[v1.ResourceName]string{v1.ResourceCPU: "4"}))
			e.waitBoundWithin(2*time.Second, "plain")
			e.staysUnbound(time.Second, members...)
		})
	}
}

// TestGangMembersSeeEachOther: the whole-gang plan places each member
// seeing the members planned before it, so identical members that repel
// each other (required pod anti-affinity per node) are planned one per
// node, and a gang with more members than nodes is refused by its plan,
// saying how many members fit, before any member is reserved.
func TestGangMembersSeeEachOther(t *testing.T) {
	spread := func(e *env, k groupKind, group string, n int) (kindGang, []string) {
		g := e.gang(k, group, v1alpha1.PodGroupSpec{MinMember: int32(n)})
		names := names(group, n)
		for _, name := range names {
			p := g.member(name, "1", "")
			setMeta(&p.Labels, "app", group)
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": group}},
					TopologyKey:   v1.LabelHostname,
				}},
			}}
			e.create(p)
		}
		return g, names
	}
	for _, k := range withPodGroup(groupKinds(t)) {
		t.Run(k.name+"/one member per node", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			_, members := spread(e, k, "apart", 4)
			placed := e.waitBound(members...)
			if nodes := distinctNodes(placed); len(nodes) != 4 {
				t.Errorf("members share nodes: %v", placed)
			}
		})
		t.Run(k.name+"/more members than nodes binds none", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			g, members := spread(e, k, "crowd", 4)
			g.waitWhy("crowd-0", "Unschedulable", "placeable 3/4: member ")
			e.staysUnbound(time.Second, members...)
		})
	}
}

// TestGangsDoNotDeadlock interleaves two gangs that each fit alone but not
// together: one binds whole, the other waits holding nothing and binds
// within 2 s of the first finishing.
func TestGangsDoNotDeadlock(t *testing.T) {
	for _, k := range groupKinds(t) {
		t.Run(k.name, func(t *testing.T) { gangsDoNotDeadlock(t, k) })
	}
}

func gangsDoNotDeadlock(t *testing.T, k groupKind) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(k.config(t))
	gangs := []kindGang{e.gang(k, "a", v1alpha1.PodGroupSpec{MinMember: 4}), e.gang(k, "b", v1alpha1.PodGroupSpec{MinMember: 4})}
	for i := range 4 {
		for _, g := range gangs {
			p := g.member(fmt.Sprintf("%s-%d", g.name, i), "3", "")
			setMeta(&p.Annotations, simulator.AnnotationRunTime, "3s")
			e.create(p)
		}
	}
	a, b := names("a", 4), names("b", 4)
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
	for _, k := range groupKinds(t) {
		t.Run(k.name+"/binds within 2s of a node being added", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			members := e.gang(k, "g", v1alpha1.PodGroupSpec{MinMember: 4}).members(4, "3")
			e.staysUnbound(time.Second, members...)
			e.nodes("extra", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.waitBoundWithin(2*time.Second, members...)
		})
		t.Run(k.name+"/binds within 2s of pods finishing", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(k.config(t))
			blocker := e.pod("blocker", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
			// Long enough that the gang is still blocked a second after its
			// members are created, on a loaded machine (-race) too.
			blocker.Annotations = map[string]string{simulator.AnnotationRunTime: "5s"}
			e.create(blocker)
			e.waitBound("blocker")
			members := e.gang(k, "g", v1alpha1.PodGroupSpec{MinMember: 4}).members(4, "3")
			e.staysUnbound(time.Second, members...)
			waitPhase(t, e, []string{"blocker"}, v1.PodSucceeded, 10*time.Second)
			e.waitBoundWithin(2*time.Second, members...)
		})
	}
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
