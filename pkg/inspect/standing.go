// Package inspect reads what the scheduler decided from the cluster's
// objects — pods, PodGroups of every kind, Queues, Events — and says it for
// people: `muster explain`, `muster top` and the sandbox's report. It only
// reads: the scheduler writes the reasons (the PodScheduled condition, the
// PodGroup's conditions, Events); nothing here schedules again.
package inspect

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Standing is where a pod stands: bound to a node, finished, gated, or
// waiting with the scheduler's reason.
func Standing(p *v1.Pod) (state, why string) {
	switch {
	case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		return strings.ToLower(string(p.Status.Phase)), ""
	case p.Spec.NodeName != "":
		return "bound", p.Spec.NodeName
	case len(p.Spec.SchedulingGates) > 0:
		var gates []string
		for _, g := range p.Spec.SchedulingGates {
			gates = append(gates, g.Name)
		}
		return "gated", strings.Join(gates, ",")
	}
	return "waiting", Waiting(p)
}

// Waiting is why the scheduler left the pod pending: the message of its
// PodScheduled condition, "0/N nodes are available: …" when no node
// would take it, or the gang's or queue's reason.
func Waiting(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return "not tried yet"
}

// PendingLine is the line the sandbox report and `muster explain` print
// for a pending pod.
func PendingLine(p *v1.Pod) string {
	return fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, Waiting(p))
}

// Qty formats a resource amount for people: cores, binary memory units.
func Qty(l v1.ResourceList, name v1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return "0"
	}
	return qtyOf(name, q)
}

func qtyOf(name v1.ResourceName, q resource.Quantity) string {
	switch name {
	case v1.ResourceCPU:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(q.MilliValue())/1000), "0"), ".")
	case v1.ResourceMemory:
		return resource.NewQuantity(q.Value(), resource.BinarySI).String()
	}
	return q.String()
}

// List formats a resource list as name=amount pairs, sorted.
func List(l v1.ResourceList) string {
	if len(l) == 0 {
		return "-"
	}
	var parts []string
	for _, name := range names(l) {
		parts = append(parts, string(name)+"="+Qty(l, name))
	}
	return strings.Join(parts, ",")
}

// names are the resources of the lists, sorted, without pods (not part of
// shares).
func names(lists ...v1.ResourceList) []v1.ResourceName {
	set := map[v1.ResourceName]bool{}
	for _, l := range lists {
		for n := range l {
			if n != v1.ResourcePods {
				set[n] = true
			}
		}
	}
	out := make([]v1.ResourceName, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return resourceLess(out[i], out[j]) })
	return out
}

// resourceLess orders cpu, memory, then the rest by name.
func resourceLess(a, b v1.ResourceName) bool {
	rank := func(n v1.ResourceName) int {
		switch n {
		case v1.ResourceCPU:
			return 0
		case v1.ResourceMemory:
			return 1
		}
		return 2
	}
	if rank(a) != rank(b) {
		return rank(a) < rank(b)
	}
	return a < b
}
