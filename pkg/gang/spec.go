package gang

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// Spec is what a gang requires, whichever source defines it.
type Spec struct {
	MinMember     int32
	MinTaskMember map[string]int32
	// MinResources as given by the source; empty when it gives none.
	MinResources v1.ResourceList
	Queue        string
	// Timeout bounds the wait of placed members at Permit; 0 means the
	// scheduler's default.
	Timeout time.Duration
	// PodGroup is the Muster PodGroup defining the gang, if one does.
	PodGroup *v1alpha1.PodGroup
	// Priority is the value of the PodGroup's priorityClassName: the
	// gang's priority for ordering, preemption and reclaim. nil when it
	// names none: the gang then has its members' priority.
	Priority *int32
	// Topology is the gang's own constraint; zero when its source gives
	// none (its queue's default then applies).
	Topology Topology
}

// PriorityOf is the priority member pod of a gang of that spec has in
// ordering, preemption and reclaim.
func PriorityOf(pod *v1.Pod, spec *Spec) int32 {
	if spec.Priority != nil {
		return *spec.Priority
	}
	return corev1helpers.PodPriority(pod)
}

// sources are the objects that may define a gang: the PodGroup of its
// family, nil when it does not exist.
type sources struct {
	muster           *v1alpha1.PodGroup
	schedulerPlugins *spv1alpha1.PodGroup
	upstream         *schedulingv1beta1.PodGroup
	volcano          *vcv1beta1.PodGroup
	// priorityClass is the class the Muster or Volcano PodGroup names,
	// nil when it names none or the class does not exist.
	priorityClass *schedulingv1.PriorityClass
	// spInstalled and vcInstalled say whether scheduler-plugins' and
	// Volcano's PodGroup CRDs are.
	spInstalled, vcInstalled bool
}

// resolveSpec derives a gang's spec from its source. A gang that cannot be
// scheduled as specified gets an error saying why, in words for its users,
// and as much of the spec as is known.
func resolveSpec(key Key, members []*v1.Pod, src sources) (Spec, error) {
	pg, sp := src.muster, src.schedulerPlugins
	switch key.Family {
	case FamilyUpstream:
		return upstreamSpec(key, members, src.upstream)
	case FamilyMuster:
		if pg != nil {
			spec := Spec{
				MinMember:     pg.Spec.MinMember,
				MinTaskMember: pg.Spec.MinTaskMember,
				MinResources:  v1.ResourceList(pg.Spec.MinResources),
				Queue:         pg.Spec.Queue,
				Timeout:       seconds(pg.Spec.ScheduleTimeoutSeconds),
				PodGroup:      pg,
				Topology:      TopologyOf(pg.Spec.Topology),
			}
			if name := pg.Spec.PriorityClassName; name != "" {
				// As for a pod naming a missing class, which admission
				// refuses: the gang waits until the class exists. The
				// spec still says how many members it needs.
				if src.priorityClass == nil {
					return spec, fmt.Errorf("PodGroup %s/%s names PriorityClass %q, which does not exist", key.Namespace, key.Name, name)
				}
				spec.Priority = ptr.To(src.priorityClass.Value) // not into the informer's object
			}
			return spec, nil
		}
		min, err := labelMinMember(members, v1alpha1.LabelMinAvailable)
		if err != nil {
			return Spec{}, fmt.Errorf("PodGroup %s/%s does not exist and %w", key.Namespace, key.Name, err)
		}
		return labelSpec(min, members)
	case FamilyLegacy:
		min, err := labelMinMember(members, v1alpha1.LegacyLabelMinAvailable)
		if err != nil {
			return Spec{}, err
		}
		return labelSpec(min, members)
	case FamilySolo:
		queue, err := agreedQueue(members)
		if err != nil {
			return Spec{}, err
		}
		if queue == "" && len(members) > 0 {
			queue = members[0].Annotations[v1alpha1.VolcanoAnnotationQueueName]
		}
		return Spec{MinMember: 1, Queue: queue}, nil
	case FamilySchedulerPlugins:
		if !src.spInstalled {
			return Spec{}, fmt.Errorf("pods name scheduler-plugins PodGroup %s/%s but its CRD (scheduling.x-k8s.io) was not installed when the scheduler started", key.Namespace, key.Name)
		}
		if sp == nil {
			return Spec{}, fmt.Errorf("scheduler-plugins PodGroup %s/%s does not exist", key.Namespace, key.Name)
		}
		if sp.Spec.MinMember < 1 {
			return Spec{}, fmt.Errorf("scheduler-plugins PodGroup %s/%s has minMember %d; want >= 1", key.Namespace, key.Name, sp.Spec.MinMember)
		}
		if t := sp.Spec.ScheduleTimeoutSeconds; t != nil && *t < 1 {
			// scheduler-plugins would reject at Permit at once: the gang
			// could never bind.
			return Spec{}, fmt.Errorf("scheduler-plugins PodGroup %s/%s has scheduleTimeoutSeconds %d; want >= 1 or unset", key.Namespace, key.Name, *t)
		}
		spec, err := labelSpec(sp.Spec.MinMember, members)
		spec.MinResources, spec.Timeout = sp.Spec.MinResources, seconds(sp.Spec.ScheduleTimeoutSeconds)
		return spec, err
	case FamilyVolcano:
		return volcanoSpec(key, src)
	}
	return Spec{}, fmt.Errorf("unknown gang family %q", key.Family)
}

// volcanoSpec is the spec of a Volcano PodGroup, read as vc-scheduler reads
// it: minMember (0 asks for no gang: one member at a time), minTaskMember
// (each role its minimum, where they sum to at most minMember),
// minResources, its queue (Volcano's default queue is Muster's) and its
// priority class.
func volcanoSpec(key Key, src sources) (Spec, error) {
	if !src.vcInstalled {
		return Spec{}, fmt.Errorf("pods name Volcano PodGroup %s/%s but its CRD (scheduling.volcano.sh) was not installed when the scheduler started", key.Namespace, key.Name)
	}
	vc := src.volcano
	if vc == nil {
		return Spec{}, fmt.Errorf("Volcano PodGroup %s/%s does not exist", key.Namespace, key.Name)
	}
	spec := Spec{MinMember: max(vc.Spec.MinMember, 1), MinTaskMember: vc.Spec.MinTaskMember, Queue: vc.Spec.Queue, Topology: volcanoTopology(vc)}
	if vc.Spec.MinResources != nil {
		spec.MinResources = podResources(*vc.Spec.MinResources)
	}
	if vc.Spec.MinMember < 0 {
		return spec, fmt.Errorf("Volcano PodGroup %s/%s has minMember %d; want >= 0", key.Namespace, key.Name, vc.Spec.MinMember)
	}
	var sum int64
	for role, n := range spec.MinTaskMember {
		if n < 0 {
			return spec, fmt.Errorf("Volcano PodGroup %s/%s has minTaskMember[%s] %d; want >= 0", key.Namespace, key.Name, role, n)
		}
		sum += int64(n)
	}
	if sum > int64(spec.MinMember) {
		// Volcano checks the roles only when their minimums fit in
		// minMember (its Job webhook sets a role's minimum to its
		// replicas, so an elastic job's roles ask for more).
		spec.MinTaskMember = nil
	}
	if name := vc.Spec.PriorityClassName; name != "" {
		if src.priorityClass == nil {
			return spec, fmt.Errorf("Volcano PodGroup %s/%s names PriorityClass %q, which does not exist", key.Namespace, key.Name, name)
		}
		spec.Priority = ptr.To(src.priorityClass.Value)
	}
	return spec, nil
}

// labelSpec is the spec of a gang of min members whose queue and topology
// their labels and annotations give.
func labelSpec(min int32, members []*v1.Pod) (Spec, error) {
	queue, err := agreedQueue(members)
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{MinMember: min, Queue: queue}
	if spec.Topology, err = annotatedTopology(members); err != nil {
		return spec, err
	}
	return spec, checkTopologyKeys(spec.Topology)
}

func seconds(s *int32) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}

// labelMinMember reads the min-available label every member must carry with
// the same value.
func labelMinMember(members []*v1.Pod, label string) (int32, error) {
	if len(members) == 0 {
		return 0, fmt.Errorf("the group has no members")
	}
	for _, p := range members {
		if _, ok := p.Labels[label]; !ok {
			return 0, fmt.Errorf("pod %s has no %s label", p.Name, label)
		}
	}
	v, err := agreed(members, label)
	if err != nil {
		return 0, err
	}
	return parseMinAvailable(label, v)
}

// agreedQueue is the muster.dev/queue label the members carry; they must
// agree.
func agreedQueue(members []*v1.Pod) (string, error) { return agreed(members, v1alpha1.LabelQueue) }

// agreed is the value of label the members carry ("" for none); they must
// agree. It is read on every change of a gang: it allocates only to say
// how they disagree.
func agreed(members []*v1.Pod, label string) (string, error) {
	if len(members) == 0 {
		return "", nil
	}
	first := members[0].Labels[label]
	for _, p := range members[1:] {
		if p.Labels[label] != first {
			values := map[string][]string{}
			for _, p := range members {
				values[p.Labels[label]] = append(values[p.Labels[label]], p.Name)
			}
			return "", fmt.Errorf("members disagree on %s: %s", label, describeValues(values))
		}
	}
	return first, nil
}

// describeValues renders {"3": [a b], "4": [c]} as `"3" (a, b), "4" (c)`.
func describeValues(values map[string][]string) string {
	var parts []string
	for v, pods := range values {
		sort.Strings(pods)
		if len(pods) > 3 {
			pods = append(pods[:3], "…")
		}
		parts = append(parts, fmt.Sprintf("%q (%s)", v, strings.Join(pods, ", ")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// podResources keeps of a Volcano PodGroup's minResources what pods request
// from nodes. Volcano's Job controller writes it in ResourceQuota's terms
// (pods, count/pods, requests.cpu beside cpu), which vc-scheduler drops or
// counts apart; no pod asks for them, so a queue never holds any, and a
// gang needing them would never fit its share.
func podResources(rl v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(rl))
	for name, q := range rl {
		n := string(name)
		if name == v1.ResourcePods || strings.HasPrefix(n, "count/") ||
			strings.HasPrefix(n, v1.DefaultResourceRequestsPrefix) || strings.HasPrefix(n, "limits.") {
			continue
		}
		out[name] = q
	}
	return out
}
