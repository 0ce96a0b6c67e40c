package integration

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// badInput is one row of TestBadInput: an input Muster may be given, and
// what it does with it.
type badInput struct {
	// name is the input, in words.
	name string
	// skip ("bug: …") says why Muster does not do what the row asserts yet;
	// MUSTER_TEST_BUGS=1 runs the row anyway, to see it fail or pass.
	skip string
	// nodes are the row's nodes: two of 4 cpu when nil.
	nodes []badNodes
	// give gives the scheduler the input, and the state it meets.
	give func(r *badRow)
	// then asserts what happens.
	then func(r *badRow)
}

type badNodes struct {
	prefix string
	count  int
	shape  simulator.NodeShape
}

// badRow is one row's slice of the cluster while it runs.
type badRow struct {
	*env
	// running are pods bound before the input that must stay bound.
	running []string
	// pods are the pods the input created, for then.
	pods []string
}

// run runs the row on a fresh namespace and nodes with the replace-default
// scheduler, a plain pod bound before the input; after it, that pod is still
// bound and a new plain pod binds within 2 s.
func (tc badInput) run(t *testing.T) {
	if tc.skip != "" && os.Getenv("MUSTER_TEST_BUGS") == "" {
		t.Skip(tc.skip + " (MUSTER_TEST_BUGS=1 runs it)")
	}
	// The scheduler logs to the test at the chart's verbosity, 2: at the
	// test default, 5, formatting a log line per gated pod per event costs
	// more than scheduling does with thousands of pods.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	e := newEnvContext(t, klog.NewContext(context.Background(), logger))
	nodes := tc.nodes
	if nodes == nil {
		nodes = []badNodes{{"n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"}}}
	}
	for _, n := range nodes {
		e.nodes(n.prefix, n.count, n.shape)
	}
	e.startScheduler(gangConfig(t))
	r := &badRow{env: e}
	// A pod with no requests fits beside whatever the row fills the nodes
	// with, and takes nothing from the queues' totals.
	e.create(e.pod("bystander", nil))
	r.bindsWithin(30*time.Second, "bystander")
	r.running = append(r.running, "bystander")
	tc.give(r)
	tc.then(r)
	r.survived()
}

// survived checks what every row leaves: the scheduler still binds a plain
// pod within 2 s, and the pods bound before the input are still bound.
func (r *badRow) survived() {
	r.t.Helper()
	r.create(r.pod("probe-after", nil))
	r.bindsWithin(2*time.Second, "probe-after")
	for _, name := range r.running {
		p, err := cluster.Client.CoreV1().Pods(r.ns).Get(r.ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			r.t.Errorf("pod %s, bound before the input, is gone: %v", name, err)
		case p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodFailed:
			r.t.Errorf("pod %s, bound before the input, is no longer running: node %q, deleted %v, phase %s",
				name, p.Spec.NodeName, p.DeletionTimestamp, p.Status.Phase)
		}
	}
}

// bindsWithin waits at most d for the pods to be bound, getting each by
// name: rows with thousands of pods make listing the namespace slow.
func (r *badRow) bindsWithin(d time.Duration, names ...string) {
	r.t.Helper()
	left := slices.Clone(names)
	err := wait.PollUntilContextTimeout(r.ctx, 20*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		left = slices.DeleteFunc(left, func(name string) bool {
			p, err := cluster.Client.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Spec.NodeName != ""
		})
		return len(left) == 0, nil
	})
	if err != nil {
		r.t.Fatalf("pods %v not bound within %v", left, d)
	}
}

// refused fails unless err is the apiserver's refusal carrying want.
func (r *badRow) refused(err error, want string) {
	r.t.Helper()
	switch {
	case err == nil:
		r.t.Fatalf("want the input refused with %q, it was accepted", want)
	case !strings.Contains(err.Error(), want):
		r.t.Fatalf("refused with:\n  %v\nwant a message containing:\n  %s", err, want)
	}
}

// nodeOf returns the node the pod is bound to ("" for none).
func (r *badRow) nodeOf(name string) string {
	r.t.Helper()
	p, err := cluster.Client.CoreV1().Pods(r.ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return p.Spec.NodeName
}

// gang creates a PodGroup of minMember in queue and n members of cpu each,
// named <name>-<i>; mutate, when not nil, changes each member.
func (r *badRow) gang(name, queue string, minMember int32, n int, cpu string, mutate func(*v1.Pod)) []string {
	r.t.Helper()
	r.podGroup(name, v1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue})
	var out []string
	for _, pod := range names(name, n) {
		p := r.member(pod, cpu, map[string]string{v1alpha1.LabelPodGroup: name})
		if mutate != nil {
			mutate(p)
		}
		r.create(p)
		out = append(out, pod)
	}
	return out
}

// gated holds the pod back with a scheduling gate: the rest of its gang is
// placed and waits at Permit for it.
func gated(p *v1.Pod) {
	p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
}

// waitingAtPermit waits until the pod is nominated, which kube-scheduler
// does just before a pod waits at Permit, and returns the node.
func (r *badRow) waitingAtPermit(name string) string {
	r.t.Helper()
	node := r.waitNominated(name, 10*time.Second)
	if node == "" {
		r.t.Fatalf("pod %s was not placed to wait at Permit within 10 s", name)
	}
	if bound := r.nodeOf(name); bound != "" {
		r.t.Fatalf("pod %s was bound to %s; want it waiting at Permit", name, bound)
	}
	return node
}

// setLabels replaces the pod's labels.
func (r *badRow) setLabels(name string, labels map[string]string) {
	r.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := cluster.Client.CoreV1().Pods(r.ns).Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Labels = labels
		_, err = cluster.Client.CoreV1().Pods(r.ns).Update(r.ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// deletePods deletes the pods at once (grace period 0).
func (r *badRow) deletePods(names ...string) {
	r.t.Helper()
	for _, name := range names {
		if err := cluster.Client.CoreV1().Pods(r.ns).Delete(r.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// waitGone waits until none of the pods exists, or each is being deleted.
func (r *badRow) waitGone(names ...string) {
	r.t.Helper()
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return missing(r.podNames(), names) == len(names), nil
	})
	if err != nil {
		r.t.Fatalf("pods %v still exist: %v", names, r.podNames())
	}
}

// waitNote waits for an Event of the reason, on any object of the row,
// whose note matches the regular expression.
func (r *badRow) waitNote(reason, pattern string) {
	r.t.Helper()
	re := regexp.MustCompile(pattern)
	var seen []string
	err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.Client.EventsV1().Events(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range events.Items {
			seen = append(seen, ev.Regarding.Name+" "+ev.Reason+": "+ev.Note)
			if ev.Reason == reason && re.MatchString(ev.Note) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		r.t.Fatalf("no Event %s matching %q; events: %q", reason, pattern, seen)
	}
}

// waitCondition waits until the PodGroup's Scheduled condition has the
// reason and a message matching the regular expression.
func (r *badRow) waitCondition(group, reason, pattern string) {
	r.t.Helper()
	r.waitConditionWithin(10*time.Second, group, reason, pattern)
}

// waitConditionWithin is waitCondition waiting up to d.
func (r *badRow) waitConditionWithin(d time.Duration, group, reason, pattern string) {
	r.t.Helper()
	re := regexp.MustCompile(pattern)
	var c *metav1.Condition
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		pg, err := cluster.Muster.SchedulingV1alpha1().PodGroups(r.ns).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c = scheduledCondition(&pg.Status)
		return c != nil && c.Reason == reason && re.MatchString(c.Message), nil
	})
	if err != nil {
		r.t.Fatalf("PodGroup %s: want its Scheduled condition %s %q; it is %+v", group, reason, pattern, c)
	}
}

// waitInvalidQueue waits until the queue's Valid condition is False with
// the message.
func (r *badRow) waitInvalidQueue(name, message string) {
	r.t.Helper()
	r.waitQueueWithin(name, "Valid False: "+message, func(s *v1alpha1.QueueStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, "Valid")
		return c != nil && c.Status == metav1.ConditionFalse && c.Message == message
	})
}

// setQueueState opens or closes the queue.
func (r *badRow) setQueueState(name string, state v1alpha1.QueueState) {
	r.t.Helper()
	queues := cluster.Muster.SchedulingV1alpha1().Queues()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := queues.Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.State = state
		_, err = queues.Update(r.ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// charged sums what kube-scheduler charges the nodes for the pods: their
// PodRequests (containers, init and sidecar containers, overhead).
func (r *badRow) charged(names ...string) v1.ResourceList {
	r.t.Helper()
	sum := v1.ResourceList{}
	for _, name := range names {
		p, err := cluster.Client.CoreV1().Pods(r.ns).Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		for rn, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			cur := sum[rn]
			cur.Add(q)
			sum[rn] = cur
		}
	}
	return sum
}

// sameResources reports whether a and b hold equal quantities, an absent
// resource counting as zero.
func sameResources(a, b v1.ResourceList) bool {
	for _, pair := range [][2]v1.ResourceList{{a, b}, {b, a}} {
		for rn, q := range pair[0] {
			other := pair[1][rn]
			if q.Cmp(other) != 0 {
				return false
			}
		}
	}
	return true
}

// resources builds a resource list of name/quantity pairs.
func resources(pairs ...string) v1.ResourceList {
	return v1.ResourceList(res(pairs...))
}

// container is a pause container requesting the resources.
func container(name string, requests v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Requests: requests}}
}

// removeFinalizers clears the pods' finalizers, ignoring pods gone.
func removeFinalizers(ctx context.Context, ns string, names ...string) error {
	for _, name := range names {
		_, err := cluster.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// createAll creates the pods with workers concurrent clients.
func (r *badRow) createAll(pods []*v1.Pod, workers int) {
	r.t.Helper()
	work := make(chan *v1.Pod)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				_, err := cluster.Client.CoreV1().Pods(r.ns).Create(r.ctx, p, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	if first != nil {
		r.t.Fatalf("creating %d pods: %v", len(pods), first)
	}
}

// reclaimNodes are four nodes of 10 cpu. A preemptor's gang asks 8 cpu of
// them: with the cluster full, more would be refused admission by the
// overcommit check (1.2 × 40 cpu).
var reclaimNodes = []badNodes{{"n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"}}}

// reclaimQueues creates queues bi-qa and bi-qb of weight 1: bi-qa may hold
// the whole cluster while bi-qb asks nothing.
func reclaimQueues(r *badRow) {
	r.queue("bi-qa", v1alpha1.QueueSpec{Weight: 1})
	r.queue("bi-qb", v1alpha1.QueueSpec{Weight: 1})
}

// victimBehindFinalizer: bi-qa fills the cluster with two gangs of 2×10 cpu
// whose pods carry a finalizer; bi-qb's gang needs 2×4 cpu. Reclaim evicts one
// whole gang of bi-qa, whose pods stay terminating; it evicts nothing more
// while they do, and the preemptor binds once the finalizer is removed.
func victimBehindFinalizer() badInput {
	var a []string
	return badInput{
		name:  "reclaim victim stuck terminating behind a finalizer",
		nodes: reclaimNodes,
		give: func(r *badRow) {
			reclaimQueues(r)
			ns := r.ns
			r.t.Cleanup(func() {
				if err := removeFinalizers(context.Background(), ns, a...); err != nil {
					r.t.Errorf("removing finalizers: %v", err)
				}
			})
			hold := func(p *v1.Pod) { p.Finalizers = []string{"example.com/hold"} }
			for _, g := range []string{"a0", "a1"} {
				a = append(a, g+"-0", g+"-1")
				r.gang(g, "bi-qa", 2, 2, "10", hold)
			}
			r.bindsWithin(10*time.Second, a...)
			r.pods = r.gang("b", "bi-qb", 2, 2, "4", nil)
		},
		then: func(r *badRow) {
			var victims []string
			err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
				victims = r.terminating(a)
				return len(victims) > 0, nil
			})
			if err != nil {
				r.t.Fatalf("no pod of bi-qa evicted for bi-qb's gang")
			}
			// One whole gang, and nothing more while it terminates.
			r.staysUnbound(2*time.Second, r.pods...)
			victims = r.terminating(a)
			if len(victims) != 2 || gangOf(victims[0]) != gangOf(victims[1]) {
				r.t.Fatalf("terminating pods of bi-qa %v, want one whole gang of 2", victims)
			}
			if err := removeFinalizers(r.ctx, r.ns, victims...); err != nil {
				r.t.Fatal(err)
			}
			r.bindsWithin(10*time.Second, r.pods...)
			for _, name := range a {
				if !slices.Contains(victims, name) {
					r.running = append(r.running, name)
				}
			}
		},
	}
}

// gangOf is the gang of a member named <gang>-<i>.
func gangOf(member string) string { return member[:strings.LastIndex(member, "-")] }

// terminating returns the pods of names that are being deleted, sorted.
func (r *badRow) terminating(names []string) []string {
	r.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(r.ns).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil && slices.Contains(names, p.Name) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// budget creates a PodDisruptionBudget over the size pods of gang group that
// allows that many disruptions, and writes the status the disruption
// controller would (none runs here): all pods healthy, allowed disruptions.
func (r *badRow) budget(group string, size, allowed int32) {
	r.t.Helper()
	pdbs := cluster.Client.PolicyV1().PodDisruptionBudgets(r.ns)
	minAvailable := intstr.FromInt32(size - allowed)
	b, err := pdbs.Create(r.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: group},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelPodGroup: group}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	b.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: b.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: size, DesiredHealthy: size - allowed, ExpectedPods: size,
	}
	if _, err := pdbs.UpdateStatus(r.ctx, b, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// pdbAllowingOne: bi-qa's one gang, 4 members of 10 cpu with minMember 4,
// fills the cluster, under a PodDisruptionBudget that allows one
// disruption; bi-qb's gang needs 2×4 cpu. Reclaim evicts the gang whole
// (one member would leave it below minMember): 4 disruptions where the
// budget allows one, taken because no other choice lets bi-qb's gang fit.
// A budget only orders victims (README, reclaim.go): reclaim deletes pods,
// as stock preemption does, with no Eviction API call a budget could
// refuse.
func pdbAllowingOne() badInput {
	var a []string
	return badInput{
		name:  "PodDisruptionBudget allowing one disruption over a 4-pod gang reclaim takes",
		nodes: reclaimNodes,
		give: func(r *badRow) {
			reclaimQueues(r)
			a = r.gang("a", "bi-qa", 4, 4, "10", nil)
			r.budget("a", 4, 1)
			r.bindsWithin(10*time.Second, a...)
			r.pods = r.gang("b", "bi-qb", 2, 2, "4", nil)
		},
		then: func(r *badRow) {
			r.bindsWithin(15*time.Second, r.pods...)
			r.waitGone(a...)
			r.waitEvent("a", "Reclaimed", fmt.Sprintf("evicted 4 pods of %s/a to give queue bi-qb its deserved share (gang %s/b)", r.ns, r.ns))
		},
	}
}

// pdbAnotherChoice: bi-qa runs two gangs of 2×10 cpu, a1 under a budget
// that allows the disruptions given, a2 under none; bi-qb's gang needs one
// of them whole. Taking a1 would disrupt two of its pods, beyond its budget,
// while a2 breaks no budget: reclaim takes a2, as stock preemption prefers
// victims whose budgets allow their eviction.
func pdbAnotherChoice(allowed int32) badInput {
	var a1, a2 []string
	return badInput{
		name:  fmt.Sprintf("PodDisruptionBudget allowing %d disruptions, with a gang under no budget to take instead", allowed),
		nodes: reclaimNodes,
		give: func(r *badRow) {
			reclaimQueues(r)
			a1 = r.gang("a1", "bi-qa", 2, 2, "10", nil)
			a2 = r.gang("a2", "bi-qa", 2, 2, "10", nil)
			r.budget("a1", 2, allowed)
			r.bindsWithin(10*time.Second, append(a1, a2...)...)
			r.pods = r.gang("b", "bi-qb", 2, 2, "4", nil)
		},
		then: func(r *badRow) {
			r.bindsWithin(15*time.Second, r.pods...)
			r.waitGone(a2...)
			r.running = append(r.running, a1...)
		},
	}
}
