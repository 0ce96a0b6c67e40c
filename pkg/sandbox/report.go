package sandbox

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/inspect"
	"github.com/muster-sched/muster/pkg/requests"
	"github.com/muster-sched/muster/pkg/simulator"
)

// report is the state of the sandbox cluster at the end of a run.
type report struct {
	Elapsed   time.Duration
	Nodes     []nodeRow
	Pending   []*v1.Pod
	Finished  map[v1.PodPhase]int
	PodGroups []v1alpha1.PodGroup
	Queues    []v1alpha1.Queue
	total     int
}

type nodeRow struct {
	node *v1.Node
	used v1.ResourceList
	pods []string
}

func collect(ctx context.Context, cp *controlplane.ControlPlane) (*report, error) {
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	groups, err := cp.Muster.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	queues, err := cp.Muster.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	r := &report{Finished: map[v1.PodPhase]int{}, PodGroups: groups.Items, Queues: queues.Items, total: len(pods.Items)}
	rows := map[string]*nodeRow{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		rows[n.Name] = &nodeRow{node: n, used: v1.ResourceList{}}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
			r.Finished[p.Status.Phase]++
		case p.Spec.NodeName == "":
			r.Pending = append(r.Pending, p)
		default:
			row := rows[p.Spec.NodeName]
			if row == nil {
				continue
			}
			addTo(row.used, requests.Of(p))
			row.pods = append(row.pods, p.Namespace+"/"+p.Name)
		}
	}
	for _, row := range rows {
		sort.Strings(row.pods)
		r.Nodes = append(r.Nodes, *row)
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].node.Name < r.Nodes[j].node.Name })
	sort.Slice(r.Pending, func(i, j int) bool {
		return r.Pending[i].Namespace+"/"+r.Pending[i].Name < r.Pending[j].Namespace+"/"+r.Pending[j].Name
	})
	return r, nil
}

func addTo(sum, add v1.ResourceList) {
	for name, q := range add {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

func (r *report) write(out io.Writer) {
	bound := 0
	for _, n := range r.Nodes {
		bound += len(n.pods)
	}
	fmt.Fprintf(out, "Muster sandbox: %d nodes, %d pods — %d placed, %d pending, %d succeeded, %d failed (settled %.1fs after the manifests were applied)\n\n",
		len(r.Nodes), r.total, bound, len(r.Pending), r.Finished[v1.PodSucceeded], r.Finished[v1.PodFailed], r.Elapsed.Seconds())

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tCPU\tMEMORY\tGPU\tPODS")
	for _, n := range r.Nodes {
		alloc := n.node.Status.Allocatable
		gpu := "-"
		if q, ok := alloc[simulator.GPUResource]; ok && !q.IsZero() {
			gpu = fmt.Sprintf("%s/%s", inspect.Qty(n.used, simulator.GPUResource), q.String())
		}
		pods := "-"
		if len(n.pods) > 0 {
			pods = strings.Join(n.pods, " ")
		}
		fmt.Fprintf(w, "%s\t%s/%s\t%s/%s\t%s\t%s\n", n.node.Name,
			inspect.Qty(n.used, v1.ResourceCPU), inspect.Qty(alloc, v1.ResourceCPU),
			inspect.Qty(n.used, v1.ResourceMemory), inspect.Qty(alloc, v1.ResourceMemory), gpu, pods)
	}
	w.Flush()

	if len(r.PodGroups) > 0 {
		fmt.Fprintln(out, "\nPOD GROUPS")
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "GROUP\tQUEUE\tPHASE\tMIN\tSCHEDULED\tWHY")
		for _, g := range r.PodGroups {
			fmt.Fprintf(w, "%s/%s\t%s\t%s\t%d\t%d\t%s\n", g.Namespace, g.Name, orDash(g.Spec.Queue), orDash(string(g.Status.Phase)),
				g.Spec.MinMember, g.Status.Scheduled, conditionMessages(g.Status.Conditions))
		}
		w.Flush()
	}
	if len(r.Queues) > 0 {
		fmt.Fprintln(out, "\nQUEUES")
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "QUEUE\tWEIGHT\tSTATE\tALLOCATED\tDESERVED\tWHY")
		for _, q := range r.Queues {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", q.Name, q.Spec.Weight, orDash(string(q.Status.State)),
				inspect.List(q.Status.Allocated), inspect.List(q.Status.Deserved), conditionMessages(q.Status.Conditions))
		}
		w.Flush()
	}
	if len(r.Pending) > 0 {
		// The same line `muster explain` gives for each waiting member.
		fmt.Fprintln(out, "\nPENDING")
		for _, p := range r.Pending {
			fmt.Fprintf(out, "  %s\n", inspect.PendingLine(p))
		}
	}
}

func conditionMessages(conds []metav1.Condition) string {
	var msgs []string
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue && c.Message != "" {
			msgs = append(msgs, c.Message)
		}
	}
	if len(msgs) == 0 {
		return "-"
	}
	return strings.Join(msgs, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
