package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// Clients read the cluster. Custom resources are read through the dynamic
// client: a kind whose CRD is not installed is simply not found.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// groupKind is one PodGroup API Muster schedules.
type groupKind struct {
	family gang.Family
	kind   string // as printed
	gvr    schema.GroupVersionResource
}

// groupKinds in the order `muster explain podgroup NAME` looks a name up.
var groupKinds = []groupKind{
	{gang.FamilyMuster, "PodGroup.scheduling.muster.dev", schema.GroupVersionResource{Group: "scheduling.muster.dev", Version: "v1alpha1", Resource: "podgroups"}},
	{gang.FamilySchedulerPlugins, "PodGroup.scheduling.x-k8s.io", schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}},
	{gang.FamilyVolcano, "PodGroup.scheduling.volcano.sh", schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}},
	{gang.FamilyUpstream, "PodGroup.scheduling.k8s.io", schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}},
}

var (
	musterQueues  = schema.GroupVersionResource{Group: "scheduling.muster.dev", Version: "v1alpha1", Resource: "queues"}
	volcanoQueues = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	// queueGVRs and queueKinds: the Queue APIs, Muster's first.
	queueGVRs  = []schema.GroupVersionResource{musterQueues, volcanoQueues}
	queueKinds = []string{musterQueueKind, volcanoQueueKind}
)

const (
	musterQueueKind  = "Queue.scheduling.muster.dev"
	volcanoQueueKind = "Queue.scheduling.volcano.sh"
)

// group is a gang as its PodGroup (of any kind) or its labels describe it.
type group struct {
	key          gang.Key
	kind         string
	minMember    int32
	queue        string
	phase        string
	minResources v1.ResourceList
	conditions   []string
	// topology is the group's topology constraint in words, "" for none.
	topology string
}

// getGroup reads the group object of the key; a label-only group (no
// object) is described by its members' labels.
func (c Clients) getGroup(ctx context.Context, key gang.Key) (*group, error) {
	family := key.Family
	if family == gang.FamilyLegacy || family == gang.FamilySolo {
		return &group{key: key, kind: "labels (" + string(family) + ")"}, nil
	}
	for _, k := range groupKinds {
		if k.family != family {
			continue
		}
		obj, err := c.Dynamic.Resource(k.gvr).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && family == gang.FamilyMuster {
			return &group{key: key, kind: "labels (muster)"}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s/%s: %w", k.kind, key.Namespace, key.Name, err)
		}
		return groupOf(k, obj), nil
	}
	return nil, fmt.Errorf("unknown gang family %q", family)
}

// findGroup looks the name up in every PodGroup kind, in groupKinds' order.
func (c Clients) findGroup(ctx context.Context, namespace, name string) (*group, error) {
	for _, k := range groupKinds {
		obj, err := c.Dynamic.Resource(k.gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return groupOf(k, obj), nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading %s %s/%s: %w", k.kind, namespace, name, err)
		}
	}
	// A label-only group has no object: its members say it exists.
	return &group{key: gang.Key{Family: gang.FamilyMuster, Namespace: namespace, Name: name}, kind: "labels (muster)"}, nil
}

func groupOf(k groupKind, obj *unstructured.Unstructured) *group {
	g := &group{key: gang.Key{Family: k.family, Namespace: obj.GetNamespace(), Name: obj.GetName()}, kind: k.kind}
	path := []string{"spec", "minMember"}
	if k.family == gang.FamilyUpstream {
		path = []string{"spec", "schedulingPolicy", "gang", "minCount"}
	}
	if n, ok, _ := unstructured.NestedInt64(obj.Object, path...); ok {
		g.minMember = int32(n)
	}
	g.queue, _, _ = unstructured.NestedString(obj.Object, "spec", "queue")
	g.phase, _, _ = unstructured.NestedString(obj.Object, "status", "phase")
	if m, ok, _ := unstructured.NestedStringMap(obj.Object, "spec", "minResources"); ok {
		g.minResources = v1.ResourceList{}
		for name, s := range m {
			if q, err := resource.ParseQuantity(s); err == nil {
				g.minResources[v1.ResourceName(name)] = q
			}
		}
	}
	g.topology = topologyOf(k.family, obj)
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		msg, _ := m["message"].(string)
		status, _ := m["status"].(string)
		typ, _ := m["type"].(string)
		if msg != "" {
			g.conditions = append(g.conditions, fmt.Sprintf("%s=%s: %s", typ, status, msg))
		}
	}
	sort.Strings(g.conditions)
	return g
}

// keyOf is the gang of the pod, upstream's field included.
func keyOf(p *v1.Pod) (gang.Key, bool) {
	key, ok := gang.KeyOf(p)
	if sg := p.Spec.SchedulingGroup; (!ok || key.Family != gang.FamilyMuster) && sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return gang.Key{Family: gang.FamilyUpstream, Namespace: p.Namespace, Name: *sg.PodGroupName}, true
	}
	return key, ok
}

// topologyOf renders a PodGroup's topology constraint: "required=KEY
// preferred=KEY" (Muster's), "required=KEY" (upstream's), "networkTopology
// hard tier N" (Volcano's); "" for none.
func topologyOf(family gang.Family, obj *unstructured.Unstructured) string {
	switch family {
	case gang.FamilyMuster:
		req, _, _ := unstructured.NestedString(obj.Object, "spec", "topology", "required")
		pref, _, _ := unstructured.NestedString(obj.Object, "spec", "topology", "preferred")
		return topologyWords(req, pref)
	case gang.FamilyUpstream:
		list, _, _ := unstructured.NestedSlice(obj.Object, "spec", "schedulingConstraints", "topology")
		if len(list) > 0 {
			m, _ := list[0].(map[string]any)
			key, _ := m["key"].(string)
			return topologyWords(key, "")
		}
	case gang.FamilyVolcano:
		nt, ok, _ := unstructured.NestedMap(obj.Object, "spec", "networkTopology")
		if !ok {
			return ""
		}
		mode, _ := nt["mode"].(string)
		if mode == "" {
			mode = "hard"
		}
		tier, ok := nt["highestTierAllowed"].(int64)
		if !ok || tier < 1 {
			tier = 1
		}
		return fmt.Sprintf("networkTopology %s tier %d", mode, tier)
	}
	return ""
}

// annotatedTopology renders the topology annotations of a member of a
// gang with no PodGroup field for it.
func annotatedTopology(p *v1.Pod) string {
	return topologyWords(p.Annotations[v1alpha1.AnnotationTopologyRequired], p.Annotations[v1alpha1.AnnotationTopologyPreferred])
}

func topologyWords(required, preferred string) string {
	var parts []string
	if required != "" {
		parts = append(parts, "required="+required)
	}
	if preferred != "" {
		parts = append(parts, "preferred="+preferred)
	}
	return strings.Join(parts, " ")
}
