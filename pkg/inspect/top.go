package inspect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TopQueue is one row of `muster top`: a queue at its place in the tree.
type TopQueue struct {
	Queue `json:",inline"`
	// Depth is the queue's distance from the root (0: no parent).
	Depth int `json:"depth"`
	// Share is the dominant share: the largest allocated/deserved over the
	// queue's resources.
	Share string `json:"share"`
}

// Top reads every Muster and Volcano Queue and returns them as a tree:
// each queue followed by its children, depth first, siblings by name.
func Top(ctx context.Context, c Clients) ([]TopQueue, error) {
	var queues []*Queue
	for i, gvr := range queueGVRs {
		list, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // that kind's CRD is not installed
		}
		if err != nil {
			return nil, err
		}
		for j := range list.Items {
			queues = append(queues, queueOf(queueKinds[i], &list.Items[j]))
		}
	}
	children := map[string][]*Queue{}
	known := map[string]bool{}
	for _, q := range queues {
		known[q.Name] = true
	}
	for _, q := range queues {
		parent := q.Parent
		if parent == "root" || !known[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], q)
	}
	var rows []TopQueue
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Name+kids[i].Kind < kids[j].Name+kids[j].Kind })
		for _, q := range kids {
			rows = append(rows, TopQueue{Queue: *q, Depth: depth, Share: dominantShare(q)})
			if depth < 16 { // a parent cycle is refused by the CRDs; stay finite anyway
				walk(q.Name, depth+1)
			}
		}
	}
	walk("", 0)
	return rows, nil
}

func dominantShare(q *Queue) string {
	best, ok := 0.0, false
	for name, d := range q.raw.deserved {
		if d.IsZero() || name == v1.ResourcePods {
			continue
		}
		a := q.raw.allocated[name]
		if s := a.AsApproximateFloat64() / d.AsApproximateFloat64(); !ok || s > best {
			best, ok = s, true
		}
	}
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", best)
}

// WriteTop prints the rows as a table: per resource (cpu, memory, then
// every extended resource any queue has) allocated/deserved/capability;
// wide adds the kind, weight and per-resource guarantee. A resource column
// reads allocated/deserved/capability, "-" where unset (unlimited).
func WriteTop(out io.Writer, rows []TopQueue, wide bool) {
	var lists []v1.ResourceList
	for _, r := range rows {
		lists = append(lists, r.raw.allocated, r.raw.deserved, r.raw.capability, r.raw.guarantee)
	}
	resources := names(append(lists, v1.ResourceList{v1.ResourceCPU: {}, v1.ResourceMemory: {}})...)
	head := []string{"QUEUE", "STATE"}
	if wide {
		head = append(head, "KIND", "WEIGHT")
	}
	for _, n := range resources {
		head = append(head, strings.ToUpper(string(n)))
		if wide {
			head = append(head, strings.ToUpper(string(n))+" GUARANTEE")
		}
	}
	head = append(head, "SHARE", "PENDING", "INQUEUE", "RUNNING")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, r := range rows {
		cells := []string{strings.Repeat("  ", r.Depth) + r.Name, r.State}
		if wide {
			cells = append(cells, r.Kind, fmt.Sprint(r.Weight))
		}
		for _, n := range resources {
			f := r.resource(n)
			cells = append(cells, f.Allocated+"/"+f.Deserved+"/"+f.Capability)
			if wide {
				cells = append(cells, f.Guarantee)
			}
		}
		cells = append(cells, r.Share, fmt.Sprint(r.Pending), fmt.Sprint(r.Inqueue), fmt.Sprint(r.Running))
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	w.Flush()
}
