package placement

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
)

// takers tells whether some member of a gang could go to a node as far as
// the node's static constraints say: not cordoned, no NoSchedule or
// NoExecute taint the member does not tolerate, and within the member's
// required node affinity and node selector. Members of one gang mostly
// share these, so each distinct set is checked once per node.
type takers struct {
	kinds       []taker // one per distinct set of constraints
	comparisons bool    // taint tolerations with Gt and Lt
}

// taker is a member and its parsed required node affinity.
type taker struct {
	pod      *v1.Pod
	affinity nodeaffinity.RequiredNodeAffinity
}

// takersOf groups the members by their tolerations, node selector and
// node affinity.
func takersOf(members []*v1.Pod) takers {
	t := takers{comparisons: utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators)}
	for _, m := range members {
		same := false
		for _, k := range t.kinds {
			if sameConstraints(k.pod, m) {
				same = true
				break
			}
		}
		if !same {
			t.kinds = append(t.kinds, taker{pod: m, affinity: nodeaffinity.GetRequiredNodeAffinity(m)})
		}
	}
	return t
}

func sameConstraints(a, b *v1.Pod) bool {
	return apiequality.Semantic.DeepEqual(a.Spec.Tolerations, b.Spec.Tolerations) &&
		apiequality.Semantic.DeepEqual(a.Spec.NodeSelector, b.Spec.NodeSelector) &&
		apiequality.Semantic.DeepEqual(nodeAffinityOf(a), nodeAffinityOf(b))
}

func nodeAffinityOf(p *v1.Pod) *v1.NodeAffinity {
	if p.Spec.Affinity == nil {
		return nil
	}
	return p.Spec.Affinity.NodeAffinity
}

// CanTake returns whether some member could go to a node as far as the
// node's static constraints say (see takers).
func CanTake(members []*v1.Pod) func(*v1.Node) bool { return takersOf(members).take }

// take reports whether some member could go to the node. With no members
// (a caller that knows none) every schedulable node takes.
func (t takers) take(node *v1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	if len(t.kinds) == 0 {
		return true
	}
	for _, k := range t.kinds {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, k.pod.Spec.Tolerations, doNotSchedule, t.comparisons); untolerated {
			continue
		}
		// A selector that does not parse is left to the trial placement,
		// whose NodeAffinity filter reports it.
		if ok, err := k.affinity.Match(node); ok || err != nil {
			return true
		}
	}
	return false
}

func doNotSchedule(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}
