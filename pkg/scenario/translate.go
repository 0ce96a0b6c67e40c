package scenario

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	musterv1alpha1 "github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Labels the runner puts on every scenario pod, in every profile, so that
// metrics see the scenario's gangs even where the scheduler does not.
const (
	LabelWorkload = "scenario.muster.dev/workload"
	LabelGang     = "scenario.muster.dev/gang"
)

// DefaultNamespace holds the workloads that name no queue.
const DefaultNamespace = "scenario"

// arrival is one copy of a workload arriving.
type arrival struct {
	at       time.Duration
	workload *Workload
	copy     int
	// member is the one pod of the copy that arrives (memberEvery), or −1
	// for all of them.
	member int
}

// timeline is every arrival of the scenario, in time order.
func (s *Scenario) timeline() []arrival {
	var out []arrival
	for i := range s.Workloads {
		w := &s.Workloads[i]
		for c := range w.repeat() {
			at := w.arrival + time.Duration(c)*w.every
			if w.memberEvery == 0 {
				out = append(out, arrival{at: at, workload: w, copy: c, member: -1})
				continue
			}
			for m := range w.size() {
				out = append(out, arrival{at: at + time.Duration(m)*w.memberEvery, workload: w, copy: c, member: m})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// lastArrival is when the last pod of the timeline arrives.
func (s *Scenario) lastArrival() time.Duration {
	var last time.Duration
	for _, a := range s.timeline() {
		last = max(last, a.at)
	}
	return last
}

// namespace is where a workload's pods live: its queue's name, so that
// per-namespace quotas (CapacityScheduling) and queues coincide.
func (w *Workload) namespace() string {
	if w.Queue != "" {
		return w.Queue
	}
	return DefaultNamespace
}

// Namespaces lists every namespace the workloads use.
func (s *Scenario) namespaces() []string {
	seen := map[string]bool{}
	var out []string
	for i := range s.Workloads {
		if ns := s.Workloads[i].namespace(); !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

// nodeShape is the simulator's shape for a node group.
func (g *NodeGroup) nodeShape() simulator.NodeShape {
	shape := simulator.NodeShape{CPU: g.CPU, Memory: g.Memory, Pods: g.Pods, GPUs: g.GPUs, Labels: map[string]string{LabelNodeGroup: g.Name}}
	for k, v := range g.Labels {
		shape.Labels[k] = v
	}
	if len(g.Extended) > 0 {
		shape.Extended = map[v1.ResourceName]string{}
		for k, v := range g.Extended {
			shape.Extended[v1.ResourceName(k)] = v
		}
	}
	for _, t := range g.Taints {
		shape.Taints = append(shape.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	return shape
}

// LabelNodeGroup names a simulated node's group.
const LabelNodeGroup = "scenario.muster.dev/node-group"

// priorityClassName is the PriorityClass the runner creates for a value.
func priorityClassName(p int32) string {
	if p < 0 {
		return fmt.Sprintf("scenario-priority-m%d", -p)
	}
	return fmt.Sprintf("scenario-priority-%d", p)
}

// priorityClasses are the classes the workloads' priorities need.
func (s *Scenario) priorityClasses() []*schedulingv1.PriorityClass {
	seen := map[int32]bool{}
	var out []*schedulingv1.PriorityClass
	for _, w := range s.Workloads {
		if w.Priority == 0 || seen[w.Priority] {
			continue
		}
		seen[w.Priority] = true
		out = append(out, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: priorityClassName(w.Priority)},
			Value:      w.Priority,
		})
	}
	return out
}

// musterQueue is a scenario queue as a Muster Queue.
func (q *Queue) musterQueue() *musterv1alpha1.Queue {
	return &musterv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: q.Name},
		Spec: musterv1alpha1.QueueSpec{
			Weight:     q.Weight,
			Priority:   q.Priority,
			Deserved:   quantities(q.Deserved),
			Guarantee:  quantities(q.Guarantee),
			Capability: quantities(q.Capability),
		},
	}
}

// elasticQuota is a scenario queue as scheduler-plugins' ElasticQuota in
// the queue's namespace: min is deserved (or guarantee), max capability.
func (q *Queue) elasticQuota() *unstructured.Unstructured {
	spec := map[string]any{}
	min := q.Deserved
	if len(min) == 0 {
		min = q.Guarantee
	}
	if len(min) > 0 {
		spec["min"] = stringMap(min)
	}
	if len(q.Capability) > 0 {
		spec["max"] = stringMap(q.Capability)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1",
		"kind":       "ElasticQuota",
		"metadata":   map[string]any{"name": q.Name, "namespace": q.Name},
		"spec":       spec,
	}}
}

func stringMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func quantities(m map[string]string) map[v1.ResourceName]resource.Quantity {
	if len(m) == 0 {
		return nil
	}
	out := map[v1.ResourceName]resource.Quantity{}
	for k, v := range m {
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

// groupName is the gang's name for one copy of a workload.
func (a arrival) groupName() string { return fmt.Sprintf("%s-%d", a.workload.Name, a.copy) }

// musterPodGroup is the copy's gang as a Muster PodGroup.
func (a arrival) musterPodGroup(gangWait time.Duration) *musterv1alpha1.PodGroup {
	w := a.workload
	timeout := int32(gangWait.Seconds())
	pg := &musterv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: a.groupName(), Namespace: w.namespace()},
		Spec: musterv1alpha1.PodGroupSpec{
			MinMember:              int32(w.minMember()),
			Queue:                  w.Queue,
			ScheduleTimeoutSeconds: &timeout,
			Topology:               w.musterTopology(),
		},
	}
	if w.Priority != 0 {
		pg.Spec.PriorityClassName = priorityClassName(w.Priority)
	}
	for _, r := range w.Roles {
		if r.Min > 0 {
			if pg.Spec.MinTaskMember == nil {
				pg.Spec.MinTaskMember = map[string]int32{}
			}
			pg.Spec.MinTaskMember[r.Name] = int32(r.Min)
		}
	}
	return pg
}

// coschedulingPodGroup is the copy's gang as scheduler-plugins' PodGroup.
func (a arrival) coschedulingPodGroup(gangWait time.Duration) *spv1alpha1.PodGroup {
	timeout := int32(gangWait.Seconds())
	return &spv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: a.groupName(), Namespace: a.workload.namespace()},
		Spec: spv1alpha1.PodGroupSpec{
			MinMember:              int32(a.workload.minMember()),
			ScheduleTimeoutSeconds: &timeout,
		},
	}
}

// upstreamPodGroup is the copy's gang as Kubernetes' own PodGroup, with the
// gang policy (it has no per-role minimums), the members' priority class,
// which kube-scheduler requires their priority to match, and a required
// topology key as its topology constraint.
func (a arrival) upstreamPodGroup() *schedulingv1beta1.PodGroup {
	w := a.workload
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: a.groupName(), Namespace: w.namespace()},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(w.minMember())},
		}},
	}
	if w.Priority != 0 {
		pg.Spec.PriorityClassName = priorityClassName(w.Priority)
	}
	if t := w.Topology; t != nil && t.Required != "" {
		// TopologyAwareWorkloadScheduling (alpha, on with the gang API in
		// the run's control plane) has required keys only.
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: t.Required}},
		}
	}
	return pg
}

// pods are the copy's pods as the profile sees them: gang members carry
// the group label of the profile's gang implementation, or none (stock,
// capacityscheduling).
func (a arrival) pods(profile string) []*v1.Pod {
	w := a.workload
	type part struct {
		role     string
		count    int
		requests map[string]string
	}
	parts := []part{{count: w.Members, requests: w.Requests}}
	if len(w.Roles) > 0 {
		parts = parts[:0]
		for _, r := range w.Roles {
			reqs := r.Requests
			if reqs == nil {
				reqs = w.Requests
			}
			parts = append(parts, part{role: r.Name, count: r.Members, requests: reqs})
		}
	}
	var out []*v1.Pod
	for _, p := range parts {
		for i := range p.count {
			name := fmt.Sprintf("%s-%d", a.groupName(), len(out))
			if p.role != "" {
				name = fmt.Sprintf("%s-%s-%d", a.groupName(), p.role, i)
			}
			pod := a.pod(name, p.requests)
			if w.Kind == KindGang {
				pod.Labels[LabelGang] = a.groupName()
				if !musterProfile(profile) {
					// Muster's PodGroup holds the constraint; elsewhere the
					// members state it, as a label-only gang's do.
					addAnnotations(pod, w.topologyAnnotations())
				}
				switch {
				case musterProfile(profile):
					pod.Labels[musterv1alpha1.LabelPodGroup] = a.groupName()
					if p.role != "" {
						pod.Labels[musterv1alpha1.LabelRole] = p.role
					}
				case profile == ProfileCoscheduling:
					pod.Labels[musterv1alpha1.SchedulerPluginsLabelPodGroup] = a.groupName()
				case profile == ProfileUpstream:
					pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(a.groupName())}
				}
			}
			out = append(out, pod)
		}
	}
	if a.member >= 0 {
		return out[a.member : a.member+1]
	}
	return out
}

func (a arrival) pod(name string, requests map[string]string) *v1.Pod {
	w := a.workload
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: w.namespace(),
			Labels:    map[string]string{LabelWorkload: w.Name},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:      "sim",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: requirements(requests),
			}},
			NodeSelector:                  w.NodeSelector,
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if w.Queue != "" {
		pod.Labels[musterv1alpha1.LabelQueue] = w.Queue
	}
	if w.Priority != 0 {
		pod.Spec.PriorityClassName = priorityClassName(w.Priority)
	}
	if w.RunTime != "" {
		addAnnotations(pod, map[string]string{simulator.AnnotationRunTime: w.runTime.String()})
	}
	for _, t := range w.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{
			Key: t.Key, Operator: v1.TolerationOperator(t.Operator), Value: t.Value, Effect: v1.TaintEffect(t.Effect),
		})
	}
	return pod
}

func addAnnotations(pod *v1.Pod, m map[string]string) {
	if len(m) == 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range m {
		pod.Annotations[k] = v
	}
}

// requirements are the requests, and limits equal to them for extended
// resources, which cannot be overcommitted.
func requirements(requests map[string]string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: resourceList(requests)}
	for name, q := range r.Requests {
		switch name {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
			continue
		}
		if r.Limits == nil {
			r.Limits = v1.ResourceList{}
		}
		r.Limits[name] = q
	}
	return r
}
