package integration

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// queue creates a Queue for the case; it is deleted at the end.
func (e *env) queue(name string, spec v1alpha1.QueueSpec) {
	e.t.Helper()
	q, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(e.ctx, &v1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cluster.Muster.SchedulingV1alpha1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	})
}

// queuePods creates n pods of cpu each in a queue.
func (e *env) queuePods(queue string, n int, cpu string) []string {
	names := names(queue, n)
	for _, name := range names {
		e.create(e.member(name, cpu, map[string]string{v1alpha1.LabelQueue: queue}))
	}
	return names
}

// boundCPU sums the cpu (cores) of the case's bound pods per queue label.
func (e *env) boundCPU() map[string]float64 {
	e.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		q := p.Labels[v1alpha1.LabelQueue]
		for _, c := range p.Spec.Containers {
			out[q] += float64(c.Resources.Requests.Cpu().MilliValue()) / 1000
		}
	}
	return out
}

// waitShares waits until the bound cpu per queue is within tolerance
// (cores) of want and stays there for a second.
func (e *env) waitShares(want map[string]float64, tolerance float64) {
	e.t.Helper()
	var got map[string]float64
	stableSince := time.Time{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		got = e.boundCPU()
		for q, w := range want {
			if math.Abs(got[q]-w) > tolerance {
				stableSince = time.Time{}
				return false, nil
			}
		}
		if stableSince.IsZero() {
			stableSince = time.Now()
		}
		return time.Since(stableSince) > time.Second, nil
	})
	if err != nil {
		e.t.Fatalf("bound cpu per queue %v, want %v ± %v", got, want, tolerance)
	}
}

func TestProportionShares(t *testing.T) {
	tests := []struct {
		name   string
		queues map[string]v1alpha1.QueueSpec
		want   map[string]float64
	}{
		{
			name:   "weights 1:2:3",
			queues: map[string]v1alpha1.QueueSpec{"qa": {Weight: 1}, "qb": {Weight: 2}, "qc": {Weight: 3}},
			want:   map[string]float64{"qa": 10, "qb": 20, "qc": 30},
		},
		{
			name: "a capability cap gives the excess to the others",
			queues: map[string]v1alpha1.QueueSpec{"qa": {Weight: 1}, "qb": {Weight: 2},
				"qc": {Weight: 3, Capability: res("cpu", "15")}},
			want: map[string]float64{"qa": 15, "qb": 30, "qc": 15},
		},
		{
			name: "guarantee is honoured",
			queues: map[string]v1alpha1.QueueSpec{"qa": {Weight: 1, Guarantee: res("cpu", "30")}, "qb": {Weight: 2},
				"qc": {Weight: 3}},
			// qa keeps 30 cpu; the other 30 go 2:3.
			want: map[string]float64{"qa": 30, "qb": 12, "qc": 18},
		},
	}
	for _, kind := range queueKinds {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				e := newEnv(t)
				// 60 cpu; each queue asks for all of it: saturated.
				e.nodes("n", 6, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
				for name, spec := range tt.queues {
					e.queueOf(kind, name, spec)
				}
				// Every queue asks at once: the pods exist before the scheduler
				// starts. (A queue that arrives later gets its share back by
				// reclaim.)
				for name := range tt.queues {
					e.queuePods(name, 60, "1")
				}
				e.startScheduler(gangConfig(t))
				// Within 2 % of the cluster (60 cpu): one pod of 1 cpu.
				e.waitShares(tt.want, 1.2)
			})
		}
	}
}

// TestQueuePoliciesAreAlternatives: Proportion and Capacity together are
// refused at start-up: in one profile, and across the two profiles of
// config/volcano.yaml, which share one queue state. (No queue is read
// before the refusal: there is no kind of queue to vary.)
func TestQueuePoliciesAreAlternatives(t *testing.T) {
	volcano := volcanoConfig(t)
	at := strings.Index(volcano, "- schedulerName: volcano")
	if at < 0 {
		t.Fatal("config/volcano.yaml has no profile volcano")
	}
	tests := []struct {
		name, config string
	}{
		{
			name: "in one profile",
			config: stockConfig + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Proportion}, {name: Capacity}, {name: Gang}]
      disabled: [{name: PrioritySort}]
`,
		},
		{
			name:   "Capacity in the volcano profile, Proportion in the other",
			config: volcano[:at] + strings.ReplaceAll(volcano[at:], "name: Proportion", "name: Capacity"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(tt.config))
			if err == nil {
				s.Stop()
				t.Fatal("a scheduler with both Proportion and Capacity started")
			}
			if want := "the Proportion and Capacity plugins are alternatives: enable one of them"; !strings.Contains(err.Error(), want) {
				t.Fatalf("refused with %v, want a message containing %q", err, want)
			}
		})
	}
}

// TestCapacityDeserved: under Capacity, a queue's deserved share and its
// capability come from its spec, whichever kind of Queue it is.
func TestCapacityDeserved(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/deserved and capability from the spec", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 6, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
			e.queueOf(kind, "qa", v1alpha1.QueueSpec{Deserved: res("cpu", "20"), Capability: res("cpu", "20")})
			e.queueOf(kind, "qb", v1alpha1.QueueSpec{Deserved: res("cpu", "40"), Capability: res("cpu", "40")})
			e.startScheduler(capacityConfigFor(t, kind))
			e.queuePods("qa", 40, "1")
			e.queuePods("qb", 40, "1")
			e.waitShares(map[string]float64{"qa": 20, "qb": 40}, 0)
			if kind == volcanoQueue {
				// Volcano's status has no deserved, and its state is
				// Volcano's queue controller's.
				e.waitVolcanoQueue("qa", "20 cpu allocated, its state unset", func(s *vcv1beta1.QueueStatus) bool {
					return quantityIs(s.Allocated, "cpu", "20") && s.State == ""
				})
				return
			}
			e.waitQueue("qa", func(s *v1alpha1.QueueStatus) bool {
				return quantityIs(s.Deserved, "cpu", "20") && quantityIs(s.Allocated, "cpu", "20") && s.State == v1alpha1.QueueOpen
			})
		})
		// With no capability, each queue may place up to the whole
		// cluster: qb fills it, and qa, arriving late, reclaims up to its
		// deserved share. (Above, capability equals deserved: either one
		// alone gives those shares.)
		t.Run(kind+"/reclaim works back to deserved", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 6, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
			e.queueOf(kind, "qa", v1alpha1.QueueSpec{Deserved: res("cpu", "40")})
			e.queueOf(kind, "qb", v1alpha1.QueueSpec{Deserved: res("cpu", "20")})
			e.startScheduler(capacityConfigFor(t, kind))
			e.queuePods("qb", 60, "1")
			e.waitShares(map[string]float64{"qb": 60}, 0)
			e.queuePods("qa", 60, "1")
			e.waitShares(map[string]float64{"qa": 40, "qb": 20}, 0)
		})
	}
}

func quantityIs(l v1.ResourceList, name v1.ResourceName, want string) bool {
	q, ok := l[name]
	return ok && q.Cmp(resource.MustParse(want)) == 0
}

func (e *env) waitQueue(name string, ok func(*v1alpha1.QueueStatus) bool) *v1alpha1.Queue {
	e.t.Helper()
	q := &v1alpha1.Queue{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q = got
		return ok(&q.Status), nil
	})
	if err != nil {
		e.t.Fatalf("queue %s: status %+v", name, q.Status)
	}
	return q
}

func TestAdmission(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/a gang beyond its queue's capability never starts and says so", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
			e.queueOf(kind, "small", v1alpha1.QueueSpec{Capability: res("cpu", "6")})
			e.startScheduler(gangConfig(t))
			e.podGroup("big", v1alpha1.PodGroupSpec{MinMember: 4, Queue: "small"})
			members := e.members("big", 4, "2", map[string]string{v1alpha1.LabelPodGroup: "big"})
			e.staysUnbound(2*time.Second, members...)
			e.waitPodGroup("big", "Pending, naming the queue and the resource", func(s *v1alpha1.PodGroupStatus) bool {
				c := scheduledCondition(s)
				return s.Phase == v1alpha1.PodGroupPending && c != nil &&
					c.Message == "queue small: cpu 0 allocated+inqueue of 6 deserved, gang needs 8"
			})
		})
		t.Run(kind+"/closing a queue stops new admissions; running work continues", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
			e.queueOf(kind, "team", v1alpha1.QueueSpec{})
			e.startScheduler(configFor(t, kind))
			e.podGroup("first", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
			first := e.members("first", 2, "2", map[string]string{v1alpha1.LabelPodGroup: "first"})
			e.waitBound(first...)
			if kind == volcanoQueue {
				e.waitVolcanoQueue("team", "running the gang, holding its 4 cpu, its state unset", func(s *vcv1beta1.QueueStatus) bool {
					return s.State == "" && s.Running == 1 && s.Allocated.Cpu().Cmp(resource.MustParse("4")) == 0
				})
			}
			e.setQueueState(kind, "team", v1alpha1.QueueClosed)
			if kind == musterQueue {
				e.waitQueue("team", func(s *v1alpha1.QueueStatus) bool { return s.State == v1alpha1.QueueClosing && s.Running == 1 })
			} else {
				e.waitRefusedBy("team", "queue team is closed")
			}
			e.podGroup("second", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
			second := e.members("second", 2, "2", map[string]string{v1alpha1.LabelPodGroup: "second"})
			e.staysUnbound(2*time.Second, second...)
			e.waitPodGroup("second", "refused by the closed queue", func(s *v1alpha1.PodGroupStatus) bool {
				c := scheduledCondition(s)
				return s.Phase == v1alpha1.PodGroupPending && c != nil && c.Message == "queue team is closed"
			})
			if got := e.bound(); got[first[0]] == "" || got[first[1]] == "" {
				t.Errorf("running members were disturbed: %v", got)
			}
			// Opened again, the queue admits the second gang.
			e.setQueueState(kind, "team", v1alpha1.QueueOpen)
			e.waitBound(second...)
		})
	}
	t.Run("an admitted gang that cannot be placed gives its admission back", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("team", v1alpha1.QueueSpec{Capability: res("cpu", "6")})
		e.startScheduler(gangConfig(t))
		// stuck is admitted (its 4 CPUs fit the queue's 6) but no node
		// matches its selector.
		e.podGroup("stuck", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
		for _, name := range names("stuck", 2) {
			p := e.member(name, "2", map[string]string{v1alpha1.LabelPodGroup: "stuck"})
			p.Spec.NodeSelector = map[string]string{"no-such-label": "x"}
			e.create(p)
		}
		e.waitPodGroup("stuck", "waiting for a node that matches", func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && strings.Contains(c.Message, "node(s) didn't match Pod's node affinity/selector")
		})
		// fits needs 4 more: with stuck's minimum still held as inqueue,
		// the queue's ceiling would refuse it.
		e.podGroup("fits", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "team"})
		start := time.Now()
		fits := e.members("fits", 2, "2", map[string]string{v1alpha1.LabelPodGroup: "fits"})
		e.waitBoundWithin(15*time.Second, fits...)
		t.Logf("the other gang of the queue bound %v after it was created", time.Since(start).Round(time.Millisecond))
	})
}

func TestHierarchy(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/children share their parent's share", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 8, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
			e.queueOf(kind, "org", v1alpha1.QueueSpec{Weight: 1})
			e.queueOf(kind, "other", v1alpha1.QueueSpec{Weight: 1})
			e.queueOf(kind, "small", v1alpha1.QueueSpec{Weight: 1, Parent: "org"})
			e.queueOf(kind, "large", v1alpha1.QueueSpec{Weight: 3, Parent: "org"})
			for _, q := range []string{"other", "small", "large"} {
				e.queuePods(q, 80, "1")
			}
			e.startScheduler(configFor(t, kind))
			// 80 cpu: org and other 40 each; org's 40 go 1:3 to its children.
			e.waitShares(map[string]float64{"other": 40, "small": 10, "large": 30}, 1.6)
			if kind == volcanoQueue {
				// What its children hold; Volcano's status has no deserved.
				e.waitVolcanoQueue("org", "its children's 40 cpu allocated", func(s *vcv1beta1.QueueStatus) bool {
					return quantityIs(s.Allocated, "cpu", "40")
				})
				return
			}
			e.waitQueue("org", func(s *v1alpha1.QueueStatus) bool {
				return quantityIs(s.Deserved, "cpu", "40") && quantityIs(s.Allocated, "cpu", "40")
			})
		})
	}
}

// TestQueueFiguresSurviveRestart compares every queue's status figures
// before and after the scheduler is replaced.
func TestQueueFiguresSurviveRestart(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
	e.queue("qa", v1alpha1.QueueSpec{Weight: 1})
	e.queue("qb", v1alpha1.QueueSpec{Weight: 3})
	e.queuePods("qa", 40, "1")
	e.podGroup("job", v1alpha1.PodGroupSpec{MinMember: 3, Queue: "qb"})
	// The PodGroup names the queue; the label only keys this test's sums.
	e.members("job", 40, "1", map[string]string{v1alpha1.LabelPodGroup: "job", v1alpha1.LabelQueue: "qb"})
	s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(gangConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	e.waitShares(map[string]float64{"qa": 10, "qb": 30}, 0.8)
	figures := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"qa", "qb"} {
			q := e.waitQueue(name, func(s *v1alpha1.QueueStatus) bool { return len(s.Allocated) > 0 })
			out[name] = fmt.Sprintf("allocated %v deserved %v real %v running %d", q.Status.Allocated.Cpu(), q.Status.Deserved.Cpu(), q.Status.RealCapability.Cpu(), q.Status.Running)
		}
		return out
	}
	before := e.stable(figures)
	s.Stop()
	// Clear the figures, so that what is read after comes from the new
	// scheduler.
	for _, name := range []string{"qa", "qb"} {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q.Status = v1alpha1.QueueStatus{}
		if _, err := cluster.Muster.SchedulingV1alpha1().Queues().UpdateStatus(e.ctx, q, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startScheduler(gangConfig(t))
	time.Sleep(2 * time.Second)
	after := figures()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("queue figures changed across a restart (-before,+after):\n%s", diff)
	}
	t.Logf("figures: %v", after)
}

// stable reads until what read returns has stayed the same for settledFor
// (the status controller caught up), and returns it.
func (e *env) stable(read func() map[string]string) map[string]string {
	e.t.Helper()
	last, since := read(), time.Now()
	for deadline := time.Now().Add(lifecycleTimeout); time.Since(since) < settledFor; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("still changing after %v: %v", lifecycleTimeout, last)
		}
		if now := read(); !maps.Equal(now, last) {
			last, since = now, time.Now()
		}
	}
	return last
}

// TestDRF: two jobs in one queue, one cpu-heavy and one memory-heavy, each
// with more pods than the cluster holds, all pending when the scheduler
// starts (the cpu-heavy job's pods created first). Dominant resource
// fairness orders their pods by projected dominant share: they end with
// dominant shares equal within one task, not first come, first served.
// (One node, and tasks that divide it, so that no fragment is left that
// only one job's task fits: the scheduler is work-conserving and gives
// such a fragment to whichever job fits it.)
func TestDRF(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/equal dominant shares", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 1, simulator.NodeShape{CPU: "32", Memory: "128Gi"})
			e.queueOf(kind, "q", v1alpha1.QueueSpec{Weight: 1})
			// A task of cpu-heavy takes 2/32 of the cpu (its dominant
			// share), one of memory-heavy 4/128 of the memory: fair is
			// twice as many memory-heavy tasks.
			cpuHeavy := e.gangOf("cpu-heavy", "q", 1, 20, "2", withMemory("1Gi"))
			memHeavy := e.gangOf("mem-heavy", "q", 1, 40, "1", withMemory("4Gi"))
			e.startScheduler(configFor(t, kind))

			// The scheduler starts with the pods pending: settled means
			// the cluster full first, then nothing more for a while.
			err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, lifecycleTimeout, true, func(context.Context) (bool, error) {
				bound := e.bound()
				return 2*count(bound, cpuHeavy)+count(bound, memHeavy) >= 31, nil
			})
			if err != nil {
				t.Fatalf("the cluster is not full: %v bound", e.bound())
			}
			bound := e.waitSettled(2 * time.Second)
			a, b := count(bound, cpuHeavy), count(bound, memHeavy)
			shareA, shareB := float64(2*a)/32, float64(4*b)/128
			t.Logf("cpu-heavy: %d pods bound, dominant share %.3f; mem-heavy: %d pods, %.3f", a, shareA, b, shareB)
			if 2*a+b < 31 {
				t.Fatalf("the cluster is not full: %d of 32 cpu bound", 2*a+b)
			}
			// Equal within one task is what DRF gives; first come, first
			// served ends 1.0 against 0.
			if math.Abs(shareA-shareB) > 2.0/32+1e-9 {
				t.Errorf("dominant shares differ by more than one task: cpu-heavy %.3f, mem-heavy %.3f", shareA, shareB)
			}
		})
	}
}

// withMemory makes a pod request mem too.
func withMemory(mem string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
	}
}

// waitSettled waits until the case's bound pods have not changed for quiet
// and returns them.
func (e *env) waitSettled(quiet time.Duration) map[string]string {
	e.t.Helper()
	last, since := e.bound(), time.Now()
	for time.Since(since) < quiet {
		select {
		case <-e.ctx.Done():
			e.t.Fatal(e.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if now := e.bound(); !maps.Equal(now, last) {
			last, since = now, time.Now()
		}
	}
	return last
}
