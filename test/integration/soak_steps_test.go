package integration

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// soakQueues are the Queues the soak creates and deletes; pods may name
// one that does not exist (they wait until it does). The default queue is
// the scheduler's and is left alone.
var soakQueues = []string{"soak-a", "soak-b", "soak-c"}

// pick returns one of items, drawn.
func pick[T any](s *soak, items []T) T { return items[s.rng.IntN(len(items))] }

func (s *soak) name(prefix string) string {
	s.serial++
	return fmt.Sprintf("%s-%d", prefix, s.serial)
}

// shape draws the requests of a pod, or of every member of a gang.
func (s *soak) shape() map[v1.ResourceName]string {
	return map[v1.ResourceName]string{
		v1.ResourceCPU:    pick(s, []string{"500m", "1", "1", "2", "3"}),
		v1.ResourceMemory: pick(s, []string{"512Mi", "1Gi", "2Gi", "4Gi"}),
	}
}

// lifetime draws the simulated kubelet's annotations: a run time after
// which the pod succeeds (else it runs until deleted) and a stop time for
// its deletion (else it goes at once).
func (s *soak) lifetime() map[string]string {
	a := map[string]string{}
	if s.rng.IntN(10) < 6 {
		a[simulator.AnnotationRunTime] = fmt.Sprintf("%dms", 500+s.rng.IntN(5000))
	}
	if s.rng.IntN(2) == 0 {
		a[simulator.AnnotationStopTime] = fmt.Sprintf("%dms", 100+s.rng.IntN(1400))
	}
	return a
}

// room reports whether n more pods keep the case within soakMaxPods.
func (s *soak) room(n int) bool { return len(s.pods())+n <= soakMaxPods }

func (s *soak) newPod(name string, shape map[v1.ResourceName]string, labels map[string]string) *v1.Pod {
	p := s.e.pod(name, shape)
	p.Labels, p.Annotations = labels, s.lifetime()
	return p
}

// createPods creates the pods; they are the step's, so a failure fails it.
func (s *soak) createPods(pods ...*v1.Pod) []string {
	var names []string
	for _, p := range pods {
		if _, err := cluster.Client.CoreV1().Pods(s.e.ns).Create(s.e.ctx, p, metav1.CreateOptions{}); err != nil {
			s.fatalf("creating pod %s: %v", p.Name, err)
		}
		names = append(names, p.Name)
	}
	return names
}

func createPlainPods(s *soak) string {
	n := 1 + s.rng.IntN(3)
	if !s.room(n) {
		return ""
	}
	var pods []*v1.Pod
	for range n {
		pods = append(pods, s.newPod(s.name("plain"), s.shape(), nil))
	}
	return fmt.Sprint(s.createPods(pods...))
}

// queueChoices are the queues a gang may name: the soak's (existing or
// not) and default.
func (s *soak) queueChoice() string {
	return pick(s, append([]string{v1alpha1.DefaultQueue}, soakQueues...))
}

// createQueuePods creates gangs of one: pods that name only a queue.
func createQueuePods(s *soak) string {
	n := 1 + s.rng.IntN(3)
	if !s.room(n) {
		return ""
	}
	q := s.queueChoice()
	var pods []*v1.Pod
	for range n {
		pods = append(pods, s.newPod(s.name("solo"), s.shape(), map[string]string{v1alpha1.LabelQueue: q}))
	}
	return fmt.Sprintf("queue %s: %v", q, s.createPods(pods...))
}

// gangPods builds a gang's members: minMember, sometimes one more.
func (s *soak) gangPods(group string, min int, labels map[string]string) []*v1.Pod {
	shape := s.shape()
	var pods []*v1.Pod
	for i := range min + s.rng.IntN(2) {
		l := map[string]string{v1alpha1.LabelPodGroup: group}
		for k, v := range labels {
			l[k] = v
		}
		pods = append(pods, s.newPod(fmt.Sprintf("%s-%d", group, i), shape, l))
	}
	return pods
}

// createPodGroupGang creates a PodGroup and its members, the PodGroup
// first or last.
func createPodGroupGang(s *soak) string {
	group, min, q := s.name("pg"), 2+s.rng.IntN(2), s.queueChoice()
	pods := s.gangPods(group, min, nil)
	if !s.room(len(pods)) {
		return ""
	}
	spec := v1alpha1.PodGroupSpec{MinMember: int32(min), Queue: q}
	if s.rng.IntN(10) < 7 {
		s.podGroup(group, spec)
		return fmt.Sprintf("PodGroup %s (min %d, queue %s), then %v", group, min, q, s.createPods(pods...))
	}
	names := s.createPods(pods...)
	s.podGroup(group, spec)
	return fmt.Sprintf("%v, then PodGroup %s (min %d, queue %s)", names, group, min, q)
}

func (s *soak) podGroup(name string, spec v1alpha1.PodGroupSpec) {
	_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(s.e.ns).Create(s.e.ctx, &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		s.fatalf("creating PodGroup %s: %v", name, err)
	}
}

// createLabelGang creates a label-only gang, in a queue or default.
func createLabelGang(s *soak) string {
	group, min := s.name("lg"), 2+s.rng.IntN(2)
	labels := map[string]string{v1alpha1.LabelMinAvailable: fmt.Sprint(min)}
	if s.rng.IntN(2) == 0 {
		labels[v1alpha1.LabelQueue] = s.queueChoice()
	}
	pods := s.gangPods(group, min, labels)
	if !s.room(len(pods)) {
		return ""
	}
	return fmt.Sprintf("min %d, queue %q: %v", min, labels[v1alpha1.LabelQueue], s.createPods(pods...))
}

// createAndDelete creates a pod of each kind, or a gang, and deletes it
// within 200 ms: while it is pending, being placed or being bound.
func createAndDelete(s *soak) string {
	var pods []*v1.Pod
	switch s.rng.IntN(3) {
	case 0:
		pods = []*v1.Pod{s.newPod(s.name("plain"), s.shape(), nil)}
	case 1:
		pods = []*v1.Pod{s.newPod(s.name("solo"), s.shape(), map[string]string{v1alpha1.LabelQueue: s.queueChoice()})}
	default:
		group, min := s.name("lg"), 2+s.rng.IntN(2)
		pods = s.gangPods(group, min, map[string]string{v1alpha1.LabelMinAvailable: fmt.Sprint(min)})
	}
	if !s.room(len(pods)) {
		return ""
	}
	names := s.createPods(pods...)
	delay := time.Duration(s.rng.IntN(200)) * time.Millisecond
	time.Sleep(delay)
	force := s.rng.IntN(3) == 0
	for _, name := range names {
		s.deletePod(name, force)
	}
	return fmt.Sprintf("%v deleted after %v (force %v)", names, delay, force)
}

// deletePod deletes a pod, at once when force, else with its grace period
// (the simulated kubelet stops it after its stop time). A pod already gone
// is no failure: it may have been deleted or finished meanwhile.
func (s *soak) deletePod(name string, force bool) {
	opts := metav1.DeleteOptions{}
	if force {
		opts.GracePeriodSeconds = new(int64)
	}
	err := cluster.Client.CoreV1().Pods(s.e.ns).Delete(s.e.ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		s.fatalf("deleting pod %s: %v", name, err)
	}
}

// deletePods deletes up to three pods, whatever their state.
func deletePods(s *soak) string {
	var names []string
	for _, p := range s.pods() {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	var done []string
	for range 1 + s.rng.IntN(3) {
		name := pick(s, names)
		force := s.rng.IntN(4) == 0
		s.deletePod(name, force)
		done = append(done, fmt.Sprintf("%s (force %v)", name, force))
	}
	return fmt.Sprint(done)
}

// finishPods ends up to two running pods, as their kubelet would when
// they exit 0.
func finishPods(s *soak) string {
	var running []string
	for _, p := range s.pods() {
		if p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	if len(running) == 0 {
		return ""
	}
	var done []string
	for range 1 + s.rng.IntN(2) {
		name := pick(s, running)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := cluster.Client.CoreV1().Pods(s.e.ns).Get(s.e.ctx, name, metav1.GetOptions{})
			if err != nil || finished(p) {
				return err
			}
			p.Status.Phase = v1.PodSucceeded
			_, err = cluster.Client.CoreV1().Pods(s.e.ns).UpdateStatus(s.e.ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			s.fatalf("finishing pod %s: %v", name, err)
		}
		done = append(done, name)
	}
	return fmt.Sprint(done)
}

// reapPods deletes, at once, the finished pods and the pods bound to a
// node that is gone, as the pod garbage collector would.
func reapPods(s *soak) string {
	nodes := map[string]bool{}
	for _, n := range s.nodes() {
		nodes[n.Name] = true
	}
	var reaped []string
	for _, p := range s.pods() {
		if finished(p) || (p.Spec.NodeName != "" && !nodes[p.Spec.NodeName]) {
			s.deletePod(p.Name, true)
			reaped = append(reaped, p.Name)
		}
	}
	if len(reaped) == 0 {
		return ""
	}
	return fmt.Sprint(reaped)
}

// deletePodGroup deletes a PodGroup: alone (its pods stay), before its
// pods, or after them.
func deletePodGroup(s *soak) string {
	groups, err := cluster.Muster.SchedulingV1alpha1().PodGroups(s.e.ns).List(s.e.ctx, metav1.ListOptions{})
	if err != nil {
		s.fatalf("listing PodGroups: %v", err)
	}
	if len(groups.Items) == 0 {
		return ""
	}
	group := pick(s, groups.Items).Name
	var members []string
	for _, p := range s.pods() {
		if p.Labels[v1alpha1.LabelPodGroup] == group {
			members = append(members, p.Name)
		}
	}
	deleteGroup := func() {
		err := cluster.Muster.SchedulingV1alpha1().PodGroups(s.e.ns).Delete(s.e.ctx, group, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.fatalf("deleting PodGroup %s: %v", group, err)
		}
	}
	deletePods := func() {
		for _, name := range members {
			s.deletePod(name, false)
		}
	}
	switch s.rng.IntN(3) {
	case 0:
		deleteGroup()
		return fmt.Sprintf("PodGroup %s alone (pods %v stay)", group, members)
	case 1:
		deleteGroup()
		deletePods()
		return fmt.Sprintf("PodGroup %s, then its pods %v", group, members)
	default:
		deletePods()
		deleteGroup()
		return fmt.Sprintf("pods %v, then their PodGroup %s", members, group)
	}
}

// soakQueue returns one of the soak's Queues that exists, drawn, or nil.
func (s *soak) soakQueue() *v1alpha1.Queue {
	var have []*v1alpha1.Queue
	for _, name := range soakQueues {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(s.e.ctx, name, metav1.GetOptions{})
		if err == nil {
			have = append(have, q)
		} else if !apierrors.IsNotFound(err) {
			s.fatalf("reading queue %s: %v", name, err)
		}
	}
	if len(have) == 0 {
		return nil
	}
	return pick(s, have)
}

// capability draws a queue's cpu ceiling: none, mostly.
func (s *soak) capability() map[v1.ResourceName]resource.Quantity {
	if s.rng.IntN(4) > 0 {
		return nil
	}
	return res("cpu", fmt.Sprint(4+s.rng.IntN(9)))
}

func createQueue(s *soak) string {
	name := pick(s, soakQueues)
	spec := v1alpha1.QueueSpec{Weight: int32(1 + s.rng.IntN(4)), Capability: s.capability()}
	_, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(s.e.ctx, &v1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ""
	}
	if err != nil {
		s.fatalf("creating queue %s: %v", name, err)
	}
	return fmt.Sprintf("%s weight %d capability %v", name, spec.Weight, spec.Capability)
}

// updateQueue changes a soak Queue's spec, retried on conflicts.
func (s *soak) updateQueue(change func(*v1alpha1.QueueSpec) string) string {
	q := s.soakQueue()
	if q == nil {
		return ""
	}
	var what string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(s.e.ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		what = q.Name + ": " + change(&cur.Spec)
		_, err = cluster.Muster.SchedulingV1alpha1().Queues().Update(s.e.ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.fatalf("updating queue %s: %v", q.Name, err)
	}
	return what
}

func toggleQueue(s *soak) string {
	return s.updateQueue(func(spec *v1alpha1.QueueSpec) string {
		if spec.State == v1alpha1.QueueClosed {
			spec.State = v1alpha1.QueueOpen
		} else {
			spec.State = v1alpha1.QueueClosed
		}
		return string(spec.State)
	})
}

func reweightQueue(s *soak) string {
	return s.updateQueue(func(spec *v1alpha1.QueueSpec) string {
		spec.Weight = int32(1 + s.rng.IntN(4))
		spec.Capability = s.capability()
		return fmt.Sprintf("weight %d capability %v", spec.Weight, spec.Capability)
	})
}

func deleteQueue(s *soak) string {
	q := s.soakQueue()
	if q == nil {
		return ""
	}
	err := cluster.Muster.SchedulingV1alpha1().Queues().Delete(s.e.ctx, q.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.fatalf("deleting queue %s: %v", q.Name, err)
	}
	return q.Name
}

// addNode adds a node of 4 or 8 cpu.
func (s *soak) addNode() string {
	shape := pick(s, []simulator.NodeShape{{CPU: "4", Memory: "16Gi"}, {CPU: "8", Memory: "32Gi"}})
	node, err := shape.Node(s.name("node"))
	if err != nil {
		s.fatalf("%v", err)
	}
	if _, err := simulator.CreateNode(s.e.ctx, cluster.Client, node); err != nil {
		s.fatalf("adding node %s: %v", node.Name, err)
	}
	return fmt.Sprintf("%s (%s cpu)", node.Name, shape.CPU)
}

func addNodeStep(s *soak) string {
	if len(s.nodes()) >= soakMaxNodes {
		return ""
	}
	return s.addNode()
}

// cordonStep cordons a node, keeping one schedulable, or uncordons one.
func cordonStep(s *soak) string {
	nodes := s.nodes()
	var schedulable []string
	for _, n := range nodes {
		if !n.Spec.Unschedulable {
			schedulable = append(schedulable, n.Name)
		}
	}
	n := pick(s, nodes)
	if !n.Spec.Unschedulable && len(schedulable) < 2 {
		return ""
	}
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, !n.Spec.Unschedulable)
	if _, err := cluster.Client.CoreV1().Nodes().Patch(s.e.ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.fatalf("cordoning node %s: %v", n.Name, err)
	}
	return fmt.Sprintf("%s unschedulable=%v", n.Name, !n.Spec.Unschedulable)
}

// deleteNodeStep deletes a node with its pods on it: they stay bound to
// it until reaped, as with no pod garbage collector yet.
func deleteNodeStep(s *soak) string {
	nodes := s.nodes()
	schedulable := 0
	for _, n := range nodes {
		if !n.Spec.Unschedulable {
			schedulable++
		}
	}
	n := pick(s, nodes)
	if len(nodes) <= soakMinNodes || (!n.Spec.Unschedulable && schedulable < 2) {
		return ""
	}
	if err := cluster.Client.CoreV1().Nodes().Delete(s.e.ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		s.fatalf("deleting node %s: %v", n.Name, err)
	}
	var on []string
	for _, p := range s.pods() {
		if p.Spec.NodeName == n.Name && !finished(p) {
			on = append(on, p.Name)
		}
	}
	return fmt.Sprintf("%s with pods %v", n.Name, on)
}

func restartStep(s *soak) string {
	s.sched.Stop()
	s.start()
	return "stopped and started"
}
