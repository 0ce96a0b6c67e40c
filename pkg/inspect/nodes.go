package inspect

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/pkg/requests"
)

// nodeRoom compares, per resource, the largest request of a waiting member
// with the most any node has free (allocatable less its pods' requests),
// and says what must free on one node before that member fits. Taints,
// affinity and the like are not weighed here: the scheduler's verdicts
// (NODES) say those.
func (c Clients) nodeRoom(ctx context.Context, waiting []*v1.Pod) ([]string, error) {
	if len(waiting) == 0 {
		return nil, nil
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, err
	}
	used := map[string]v1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if used[p.Spec.NodeName] == nil {
			used[p.Spec.NodeName] = v1.ResourceList{}
		}
		add(used[p.Spec.NodeName], requests.Of(p))
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	need := v1.ResourceList{}
	for _, p := range waiting {
		for name, q := range requests.Of(p) {
			if cur, ok := need[name]; !ok || q.Cmp(cur) > 0 {
				need[name] = q
			}
		}
	}
	var out []string
	for _, name := range names(need) {
		best, bestNode := resource.Quantity{}, ""
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if n.Spec.Unschedulable {
				continue
			}
			free := n.Status.Allocatable[name].DeepCopy()
			free.Sub(used[n.Name][name])
			if bestNode == "" || free.Cmp(best) > 0 {
				best, bestNode = free, n.Name
			}
		}
		want := need[name]
		if bestNode == "" || want.Cmp(best) <= 0 {
			continue
		}
		if best.Sign() <= 0 {
			out = append(out, fmt.Sprintf("nodes: a member needs %s %s on one node; no node has any free", qtyOf(name, want), name))
			continue
		}
		short := want.DeepCopy()
		short.Sub(best)
		out = append(out, fmt.Sprintf("nodes: a member needs %s %s on one node; the most free on any node is %s %s (%s): %s %s must free there, or a larger node join",
			qtyOf(name, want), name, qtyOf(name, best), name, bestNode, qtyOf(name, short), name))
	}
	return out, nil
}
