package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestBadInput gives the scheduler, one row at a time, an input it may meet
// in a real cluster and should not: malformed labels, conflicting gang
// sources, broken queue hierarchies, pods shaped unusually, gangs far too
// big, objects changed or deleted at the worst moment. Each row says what
// happens: the apiserver refuses the input with a clear message, or Muster
// takes it and says what is wrong in a condition or an Event, or handles
// it as stated. After every row the scheduler still binds a plain pod
// within 2 s, and what ran before the input still runs (badInput.run).
// README.md ("Bad input") lists the rows.
func TestBadInput(t *testing.T) {
	for _, tc := range badInputs() {
		t.Run(tc.name, tc.run)
	}
}

// badInputs returns the table, built afresh for each run: some rows keep
// state between their give and then.
func badInputs() []badInput {
	pg := v1alpha1.LabelPodGroup
	minAvailable := v1alpha1.LabelMinAvailable
	q := v1alpha1.LabelQueue
	legacy, legacyMin := v1alpha1.LegacyLabelPodGroup, v1alpha1.LegacyLabelMinAvailable
	rows := []badInput{
		{
			name: "label min-available negative",
			give: func(r *badRow) {
				_, err := cluster.Client.CoreV1().Pods(r.ns).Create(r.ctx,
					r.member("neg", "1", map[string]string{pg: "g", minAvailable: "-1"}), metav1.CreateOptions{})
				r.refused(err, `metadata.labels: Invalid value: "-1"`)
			},
			then: func(r *badRow) {},
		},
		invalidLabels("label min-available 0",
			`^gang g: PodGroup \S+/g does not exist and label muster.dev/min-available="0" is not a whole number >= 1$`,
			map[string]string{pg: "g", minAvailable: "0"}),
		invalidLabels("label min-available beyond int32",
			`^gang g: PodGroup \S+/g does not exist and label muster.dev/min-available="99999999999" is not a whole number >= 1$`,
			map[string]string{pg: "g", minAvailable: "99999999999"}),
		invalidLabels("label min-available not a number",
			`^gang g: PodGroup \S+/g does not exist and label muster.dev/min-available="abc" is not a whole number >= 1$`,
			map[string]string{pg: "g", minAvailable: "abc"}),
		invalidLabels("members disagree on min-available",
			`^gang g: PodGroup \S+/g does not exist and members disagree on muster.dev/min-available: "2" \(bad-0-0.*\), "3" \(bad-1-0.*\)$`,
			map[string]string{pg: "g", minAvailable: "2"}, map[string]string{pg: "g", minAvailable: "3"}),
		invalidLabels("members disagree on queue",
			`^gang g: members disagree on muster.dev/queue: "bi-a" \(bad-0-0.*\), "bi-b" \(bad-1-0.*\)$`,
			map[string]string{pg: "g", minAvailable: "2", q: "bi-a"}, map[string]string{pg: "g", minAvailable: "2", q: "bi-b"}),
		invalidLabels("pod-group label with no PodGroup and no min-available",
			`^gang g: PodGroup \S+/g does not exist and pod bad-0-[01] has no muster.dev/min-available label$`,
			map[string]string{pg: "g"}),
		invalidLabels("legacy labels, min-available not a number",
			`^gang g: label pod-group.scheduling.sigs.k8s.io/min-available="x" is not a whole number >= 1$`,
			map[string]string{legacy: "g", legacyMin: "x"}),
		invalidLabels("legacy labels, min-available 0",
			`^gang g: label pod-group.scheduling.sigs.k8s.io/min-available="0" is not a whole number >= 1$`,
			map[string]string{legacy: "g", legacyMin: "0"}),
		invalidLabels("legacy name without min-available",
			`^gang g: pod bad-0-[01] has no pod-group.scheduling.sigs.k8s.io/min-available label$`,
			map[string]string{legacy: "g"}),
		invalidLabels("scheduler-plugins label naming no PodGroup",
			`^gang g: scheduler-plugins PodGroup \S+/g does not exist$`,
			map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "g"}),
		{
			name: "muster and scheduler-plugins labels name different groups",
			give: func(r *badRow) {
				// Muster's PodGroup a takes 2 members; scheduler-plugins' b
				// would want 3. Muster's label goes first (membership.go).
				r.podGroup("a", v1alpha1.PodGroupSpec{MinMember: 2})
				createSchedulerPluginsPodGroup(r, "b", 3)
				r.pods = r.members("x", 2, "1", map[string]string{pg: "a", v1alpha1.SchedulerPluginsLabelPodGroup: "b"})
			},
			then: func(r *badRow) {
				r.bindsWithin(10*time.Second, r.pods...)
				r.waitPodGroup("a", "Running with 2 scheduled", func(s *v1alpha1.PodGroupStatus) bool {
					return s.Phase == v1alpha1.PodGroupRunning && s.Scheduled == 2
				})
			},
		},
		{
			name: "muster and legacy labels name different groups",
			give: func(r *badRow) {
				r.pods = r.members("x", 2, "1", map[string]string{pg: "a", minAvailable: "2", legacy: "b", legacyMin: "3"})
			},
			then: func(r *badRow) { r.bindsWithin(10*time.Second, r.pods...) },
		},
		{
			name: "PodGroup spec.queue differs from its members' queue label",
			give: func(r *badRow) {
				r.queue("bi-spec", v1alpha1.QueueSpec{Weight: 1})
				r.queue("bi-label", v1alpha1.QueueSpec{Weight: 1})
				r.pods = r.gang("g", "bi-spec", 2, 2, "1", func(p *v1.Pod) { p.Labels[q] = "bi-label" })
			},
			then: func(r *badRow) {
				// The PodGroup's spec decides: the gang runs in, and is
				// counted by, bi-spec.
				r.bindsWithin(10*time.Second, r.pods...)
				r.waitQueueWithin("bi-spec", "2 cpu allocated", func(s *v1alpha1.QueueStatus) bool {
					return quantityIs(s.Allocated, "cpu", "2") && s.Running == 1
				})
				r.waitQueueWithin("bi-label", "nothing allocated", func(s *v1alpha1.QueueStatus) bool {
					return s.Allocated.Cpu().IsZero() && s.Running == 0
				})
			},
		},
		{
			name: "minMember above the pods that exist",
			give: func(r *badRow) { r.pods = r.gang("g", "", 5, 4, "1", nil) },
			then: func(r *badRow) {
				r.waitCondition("g", "Invalid", "^4 members exist, minMember 5$")
				r.waitNote("Invalid", "members exist, minMember 5$")
				r.staysUnbound(time.Second, r.pods...)
				// The fifth member makes it valid: all five bind.
				r.create(r.member("g-4", "1", map[string]string{pg: "g"}))
				r.bindsWithin(10*time.Second, append(r.pods, "g-4")...)
			},
		},
	}
	rows = append(rows, queueRows()...)
	rows = append(rows, shapeRows()...)
	rows = append(rows, timingRows()...)
	return append(rows, specRows()...)
}

// invalidLabels is a row of label sets that make no valid gang: two pods of
// each set are created, alternately, so the gang is never valid; none
// binds, and an Event on them says why (pattern).
func invalidLabels(name, pattern string, sets ...map[string]string) badInput {
	return badInput{
		name: name,
		give: func(r *badRow) {
			for j := range 2 {
				for i, labels := range sets {
					name := fmt.Sprintf("bad-%d-%d", i, j)
					r.create(r.member(name, "1", labels))
					r.pods = append(r.pods, name)
				}
			}
		},
		then: func(r *badRow) {
			r.waitNote("GangInvalid", pattern)
			r.staysUnbound(time.Second, r.pods...)
		},
	}
}

func createSchedulerPluginsPodGroup(r *badRow, name string, minMember int32) {
	r.t.Helper()
	sp, err := spclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = sp.SchedulingV1alpha1().PodGroups(r.ns).Create(r.ctx, &spv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spv1alpha1.PodGroupSpec{MinMember: minMember},
	}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
}

// queueRows: queue hierarchies that are wrong, and queues that change
// under gangs.
func queueRows() []badInput {
	return []badInput{
		{
			name: "queue parent loop a -> b -> a",
			give: func(r *badRow) {
				r.queue("bi-loop-a", v1alpha1.QueueSpec{Parent: "bi-loop-b"})
				r.queue("bi-loop-b", v1alpha1.QueueSpec{Parent: "bi-loop-a"})
				r.pods = r.gang("g", "bi-loop-a", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitInvalidQueue("bi-loop-a", "parent chain loops: bi-loop-a -> bi-loop-b -> bi-loop-a")
				r.waitInvalidQueue("bi-loop-b", "parent chain loops: bi-loop-b -> bi-loop-a -> bi-loop-b")
				r.waitCondition("g", "Unschedulable", `^queue bi-loop-a: parent chain loops: bi-loop-a -> bi-loop-b -> bi-loop-a$`)
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			name: "queue parent missing, then created",
			give: func(r *badRow) {
				r.queue("bi-orphan", v1alpha1.QueueSpec{Parent: "bi-nowhere"})
				r.pods = r.gang("g", "bi-orphan", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitInvalidQueue("bi-orphan", `parent queue "bi-nowhere" does not exist`)
				r.waitCondition("g", "Unschedulable", `^queue bi-orphan: parent queue "bi-nowhere" does not exist$`)
				r.staysUnbound(time.Second, r.pods...)
				r.queue("bi-nowhere", v1alpha1.QueueSpec{})
				r.bindsWithin(10*time.Second, r.pods...)
			},
		},
		{
			name: "gang names a queue with child queues",
			give: func(r *badRow) {
				r.queue("bi-org", v1alpha1.QueueSpec{})
				r.queue("bi-team", v1alpha1.QueueSpec{Parent: "bi-org"})
				r.pods = r.gang("g", "bi-org", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitCondition("g", "Unschedulable", "^queue bi-org has child queues; gangs belong in leaf queues$")
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			name: "queue created after its gang",
			give: func(r *badRow) { r.pods = r.gang("g", "bi-late", 2, 2, "1", nil) },
			then: func(r *badRow) {
				r.waitCondition("g", "Unschedulable", "^queue bi-late does not exist$")
				r.staysUnbound(time.Second, r.pods...)
				r.queue("bi-late", v1alpha1.QueueSpec{})
				r.bindsWithin(10*time.Second, r.pods...)
			},
		},
		{
			name: "queue deleted under a running gang",
			give: func(r *badRow) {
				r.queue("bi-doomed", v1alpha1.QueueSpec{})
				r.running = append(r.running, r.gang("g", "bi-doomed", 2, 2, "1", nil)...)
				r.bindsWithin(10*time.Second, r.running...)
				if err := cluster.Muster.SchedulingV1alpha1().Queues().Delete(r.ctx, "bi-doomed", metav1.DeleteOptions{}); err != nil {
					r.t.Fatal(err)
				}
			},
			then: func(r *badRow) {
				// Its pods keep running, counted in default.
				r.waitQueueWithin(v1alpha1.DefaultQueue, "the gang's 2 cpu allocated", func(s *v1alpha1.QueueStatus) bool {
					return quantityIs(s.Allocated, "cpu", "2")
				})
			},
		},
		{
			name: "queue closed under a running gang, then a new gang",
			give: func(r *badRow) {
				r.queue("bi-shut", v1alpha1.QueueSpec{})
				r.running = append(r.running, r.gang("old", "bi-shut", 2, 2, "1", nil)...)
				r.bindsWithin(10*time.Second, r.running...)
				r.setQueueState("bi-shut", v1alpha1.QueueClosed)
				// The status is written from the scheduler's own queue
				// state: once it reads Closing, the scheduler has seen the
				// closure, and a gang created after it must not start.
				r.waitQueueWithin("bi-shut", "Closing, one gang running", func(s *v1alpha1.QueueStatus) bool {
					return s.State == v1alpha1.QueueClosing && s.Running == 1
				})
				r.pods = r.gang("new", "bi-shut", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitCondition("new", "Unschedulable", "^queue bi-shut is closed$")
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			name: "closed and orphan queues with waiting work",
			give: func(r *badRow) {
				r.queue("bi-closed", v1alpha1.QueueSpec{State: v1alpha1.QueueClosed})
				r.queue("bi-stray", v1alpha1.QueueSpec{Parent: "bi-missing"})
				r.queue("bi-open", v1alpha1.QueueSpec{})
				r.queuePods("bi-closed", 8, "1")
				r.queuePods("bi-stray", 8, "1")
				// Starts only with the whole cluster: the closed and
				// orphan queues must take no share of it.
				r.pods = r.gang("whole", "bi-open", 8, 8, "1", nil)
			},
			then: func(r *badRow) {
				r.bindsWithin(lifecycleTimeout, r.pods...)
				for _, name := range []string{"bi-closed", "bi-stray"} {
					r.waitQueueWithin(name, "deserved nothing", func(s *v1alpha1.QueueStatus) bool {
						return quantityIs(s.Deserved, "cpu", "0") && s.Allocated.Cpu().IsZero()
					})
				}
			},
		},
	}
}

// shapeRows: gang members whose requests kube-scheduler computes from more
// than their containers. They schedule, and their queue's allocated is
// what the nodes are charged for them (PodRequests), checked against the
// figure worked out by hand too.
func shapeRows() []badInput {
	shaped := func(name, want string, shape func(p *v1.Pod)) badInput {
		return badInput{
			name: name,
			give: func(r *badRow) {
				r.queue("bi-shapes", v1alpha1.QueueSpec{})
				r.pods = r.gang("g", "bi-shapes", 2, 2, "1", shape)
			},
			then: func(r *badRow) {
				r.bindsWithin(10*time.Second, r.pods...)
				charged := r.charged(r.pods...)
				if !sameResources(charged, resources(strings.Fields(want)...)) {
					r.t.Errorf("PodRequests of the members %v, want %s", charged, want)
				}
				r.waitQueueWithin("bi-shapes", fmt.Sprintf("allocated %v", charged), func(s *v1alpha1.QueueStatus) bool {
					return sameResources(s.Allocated, charged)
				})
			},
		}
	}
	return []badInput{
		shaped("gang members with no requests", "", func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{container("c", nil)}
		}),
		// max(containers 1, init 3) each.
		shaped("gang members with init containers", "cpu 6 memory 2Gi", func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{container("c", resources("cpu", "1", "memory", "1Gi"))}
			p.Spec.InitContainers = []v1.Container{container("init", resources("cpu", "3"))}
		}),
		// A sidecar runs beside the init container after it and the
		// containers: max(sidecar 0.5 + init 2, sidecar 0.5 + container 1).
		shaped("gang members with a sidecar (restartable init) container", "cpu 5", func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			sidecar := container("sidecar", resources("cpu", "500m"))
			sidecar.RestartPolicy = &always
			p.Spec.InitContainers = []v1.Container{sidecar, container("init", resources("cpu", "2"))}
		}),
		overhead(shaped("gang members with pod overhead (RuntimeClass)", "cpu 2500m memory 128Mi", func(p *v1.Pod) {
			p.Spec.RuntimeClassName = ptr.To("bi-overhead")
		})),
	}
}

// overhead gives the row a RuntimeClass bi-overhead whose pods are charged
// 250m cpu and 64Mi memory more than their containers ask.
func overhead(row badInput) badInput {
	give := row.give
	row.give = func(r *badRow) {
		_, err := cluster.Client.NodeV1().RuntimeClasses().Create(r.ctx, &nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{Name: "bi-overhead"},
			Handler:    "runc",
			Overhead:   &nodev1.Overhead{PodFixed: resources("cpu", "250m", "memory", "64Mi")},
		}, metav1.CreateOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() {
			_ = cluster.Client.NodeV1().RuntimeClasses().Delete(context.Background(), "bi-overhead", metav1.DeleteOptions{})
		})
		give(r)
	}
	return row
}

// timingRows: gangs whose objects change, or vanish, at the worst moment.
func timingRows() []badInput {
	inG := map[string]string{v1alpha1.LabelPodGroup: "g"}
	oneNode := func(cpu string) []badNodes {
		return []badNodes{{"n", 1, simulator.NodeShape{CPU: cpu, Memory: "64Gi"}}}
	}
	return []badInput{
		{
			name: "PodGroup created 10 s after its pods",
			give: func(r *badRow) { r.pods = r.members("g", 2, "1", inG) },
			then: func(r *badRow) {
				r.waitNote("GangInvalid", `^gang g: PodGroup \S+/g does not exist and pod g-[01] has no muster.dev/min-available label$`)
				r.staysUnbound(10*time.Second, r.pods...)
				r.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 2})
				r.bindsWithin(10*time.Second, r.pods...)
			},
		},
		{
			// One 8-cpu node: g-0 holds half of it at Permit, waiting for
			// the gated g-1.
			name:  "PodGroup deleted while members wait at Permit",
			nodes: oneNode("8"),
			give: func(r *badRow) {
				r.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 2})
				r.create(r.member("g-0", "4", inG))
				held := r.member("g-1", "4", inG)
				gated(held)
				r.create(held)
				r.pods = []string{"g-0", "g-1"}
				r.waitingAtPermit("g-0")
				if err := cluster.Muster.SchedulingV1alpha1().PodGroups(r.ns).Delete(r.ctx, "g", metav1.DeleteOptions{}); err != nil {
					r.t.Fatal(err)
				}
			},
			then: func(r *badRow) {
				r.waitNote("GangInvalid", `^gang g: PodGroup \S+/g does not exist and pod g-[01] has no muster.dev/min-available label$`)
				// g-0 holds nothing: a pod needing the whole node binds.
				r.create(r.pod("whole", map[v1.ResourceName]string{v1.ResourceCPU: "8"}))
				r.bindsWithin(10*time.Second, "whole")
				r.liftSchedulingGates("g-1")
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			// One 12-cpu node: g-0 and g-1 wait at Permit for the gated g-2;
			// g-1 leaves the gang, which is then too small to start.
			name:  "member relabelled out of its gang while the others wait at Permit",
			nodes: oneNode("12"),
			give: func(r *badRow) {
				r.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 3})
				r.create(r.member("g-0", "4", inG), r.member("g-1", "4", inG))
				held := r.member("g-2", "4", inG)
				gated(held)
				r.create(held)
				r.waitingAtPermit("g-0")
				r.waitingAtPermit("g-1")
				r.setLabels("g-1", nil)
			},
			then: func(r *badRow) {
				r.waitCondition("g", "Invalid", "^2 members exist, minMember 3$")
				// g-1 is a plain pod now, and binds as one; g-0 holds
				// nothing: a pod needing the rest of the node binds.
				r.bindsWithin(10*time.Second, "g-1")
				r.create(r.pod("rest", map[v1.ResourceName]string{v1.ResourceCPU: "8"}))
				r.bindsWithin(10*time.Second, "rest")
				r.staysUnbound(time.Second, "g-0", "g-2")
			},
		},
		plannedNodeDeleted(),
		{
			name: "all members deleted and the gang recreated under the same name",
			give: func(r *badRow) {
				r.queue("bi-again", v1alpha1.QueueSpec{})
				first := r.gang("g", "bi-again", 2, 2, "1", nil)
				r.bindsWithin(10*time.Second, first...)
				r.waitQueueWithin("bi-again", "2 cpu allocated", func(s *v1alpha1.QueueStatus) bool { return quantityIs(s.Allocated, "cpu", "2") })
				if err := cluster.Muster.SchedulingV1alpha1().PodGroups(r.ns).Delete(r.ctx, "g", metav1.DeleteOptions{}); err != nil {
					r.t.Fatal(err)
				}
				r.deletePods(first...)
				r.waitGone(first...)
				r.pods = r.gang("g", "bi-again", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				// Counted once: no figure of the first gang is left.
				r.bindsWithin(10*time.Second, r.pods...)
				r.waitPodGroup("g", "Running with 2 scheduled", func(s *v1alpha1.PodGroupStatus) bool {
					return s.Phase == v1alpha1.PodGroupRunning && s.Scheduled == 2 && s.Running == 2 && s.Failed == 0 && s.Succeeded == 0
				})
				r.waitQueueWithin("bi-again", "2 cpu allocated, one gang running", func(s *v1alpha1.QueueStatus) bool {
					return quantityIs(s.Allocated, "cpu", "2") && s.Running == 1
				})
			},
		},
		victimBehindFinalizer(),
		pdbAllowingOne(),
		pdbAnotherChoice(0),
		pdbAnotherChoice(1),
	}
}

// plannedNodeDeleted: g-0 waits at Permit on a node for the gated g-1; the
// node is deleted and the gate lifted. No member binds to the deleted node:
// both bind on the nodes left.
func plannedNodeDeleted() badInput {
	var planned string
	inG := map[string]string{v1alpha1.LabelPodGroup: "g"}
	return badInput{
		name:  "planned node deleted while members wait at Permit",
		nodes: []badNodes{{"n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"}}},
		give: func(r *badRow) {
			r.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 2})
			r.create(r.member("g-0", "4", inG))
			held := r.member("g-1", "4", inG)
			gated(held)
			r.create(held)
			r.pods = []string{"g-0", "g-1"}
			planned = r.waitingAtPermit("g-0")
			deleteNode(r.env, planned)
			r.liftSchedulingGates("g-1")
		},
		then: func(r *badRow) {
			r.bindsWithin(15*time.Second, r.pods...)
			for _, name := range r.pods {
				if node := r.nodeOf(name); node == planned {
					r.t.Errorf("pod %s bound to %s, which was deleted", name, node)
				}
			}
		},
	}
}
