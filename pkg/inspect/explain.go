package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/requests"
)

// Explanation is why a pod, gang or queue stands where it does.
type Explanation struct {
	Target    string         `json:"target"`
	Gang      *Gang          `json:"gang,omitempty"`
	Queue     *Queue         `json:"queue,omitempty"`
	Admission []Admission    `json:"admission,omitempty"`
	Nodes     []string       `json:"nodes,omitempty"`
	ToStart   []string       `json:"toStart,omitempty"`
	Evictions []Eviction     `json:"evictions,omitempty"`
	Groups    []GroupSummary `json:"groups,omitempty"`
}

// Gang is a gang and where each member stands.
type Gang struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase,omitempty"`
	MinMember int32  `json:"minMember"`
	// Topology is the gang's own topology constraint, as its source says
	// it; empty when it gives none (its queue's may apply).
	Topology   string   `json:"topology,omitempty"`
	Placed     int      `json:"placed"`
	Members    []Member `json:"members"`
	Conditions []string `json:"conditions,omitempty"`
}

// Member is one pod of a gang.
type Member struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Why      string `json:"why,omitempty"`
	Requests string `json:"requests"`
}

// Admission is the queue arithmetic of one resource the gang needs.
type Admission struct {
	Resource   string `json:"resource"`
	Needs      string `json:"needs"`
	Allocated  string `json:"allocated"`
	Deserved   string `json:"deserved"`
	Capability string `json:"capability"`
	Verdict    string `json:"verdict"`
}

// Eviction is an Event of a pod or gang taken back by reclaim or preemption.
type Eviction struct {
	Object  string `json:"object"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// GroupSummary is a gang of a queue.
type GroupSummary struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Phase     string `json:"phase"`
	MinMember int32  `json:"minMember"`
}

// evictionReasons are the reasons of the Events reclaim and preemption
// write on their victims.
var evictionReasons = map[string]bool{"Reclaimed": true, "Preempted": true}

// Explain explains the object of kind (pod, podgroup or queue, with their
// kubectl short names) named name.
func Explain(ctx context.Context, c Clients, kind, namespace, name string) (*Explanation, error) {
	switch kind {
	case "pod", "pods", "po":
		pod, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		key, ok := keyOf(pod)
		if !ok {
			state, why := Standing(pod)
			return &Explanation{Target: "pod " + namespace + "/" + name + " (not managed by Muster: no gang, no queue)",
				Gang: &Gang{Kind: "pod", Namespace: namespace, Name: name, MinMember: 1,
					Members: []Member{{Name: name, State: state, Why: why, Requests: List(requests.Of(pod))}}}}, nil
		}
		g, err := c.getGroup(ctx, key)
		if err != nil {
			return nil, err
		}
		return c.explainGroup(ctx, "pod "+namespace+"/"+name, g)
	case "podgroup", "podgroups", "mpg", "pg":
		g, err := c.findGroup(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		return c.explainGroup(ctx, "podgroup "+namespace+"/"+name, g)
	case "queue", "queues", "mq", "q":
		return c.explainQueue(ctx, name)
	}
	return nil, fmt.Errorf("cannot explain %q: the kinds are pod, podgroup (mpg) and queue (mq)", kind)
}

func (c Clients) explainGroup(ctx context.Context, target string, g *group) (*Explanation, error) {
	pods, err := c.Kube.CoreV1().Pods(g.key.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var members []*v1.Pod
	for i := range pods.Items {
		if k, ok := keyOf(&pods.Items[i]); ok && k == g.key {
			members = append(members, &pods.Items[i])
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	if g.minMember == 0 && len(members) > 0 {
		g.minMember = minFromLabels(members[0])
	}
	if g.topology == "" && len(members) > 0 {
		g.topology = annotatedTopology(members[0])
	}
	e := &Explanation{Target: target, Gang: &Gang{Kind: g.kind, Namespace: g.key.Namespace, Name: g.key.Name,
		Phase: g.phase, MinMember: g.minMember, Topology: g.topology, Conditions: g.conditions}}
	verdicts := map[string]bool{}
	var waiting []*v1.Pod
	for _, p := range members {
		state, why := Standing(p)
		e.Gang.Members = append(e.Gang.Members, Member{Name: p.Name, State: state, Why: why, Requests: List(requests.Of(p))})
		switch state {
		case "bound", "succeeded":
			e.Gang.Placed++
		case "waiting":
			waiting = append(waiting, p)
			verdicts[why] = true
		}
	}
	for v := range verdicts {
		e.Nodes = append(e.Nodes, v)
	}
	sort.Strings(e.Nodes)

	queueName := g.queue
	if queueName == "" && len(members) > 0 {
		queueName = queueOfPod(members[0])
	}
	if queueName == "" {
		queueName = "default"
	}
	switch e.Queue, err = c.getQueue(ctx, queueName); {
	case errors.Is(err, errNoQueue):
		// What the gang waits for: said, not failed on.
		e.ToStart = []string{fmt.Sprintf("queue %s does not exist: create it, or name an existing queue", queueName)}
	case err != nil:
		return nil, err
	default:
		e.Admission, e.ToStart = admit(g, e.Queue, e.Gang.Placed, waiting)
	}
	room, err := c.nodeRoom(ctx, waiting)
	if err != nil {
		return nil, err
	}
	e.ToStart = append(e.ToStart, room...)
	if short := int(g.minMember) - e.Gang.Placed; len(e.ToStart) == 0 && len(waiting) > 0 && short > 0 {
		where := "at once"
		if g.topology != "" {
			where = "at once, in one domain of its topology (" + g.topology + ")"
		}
		e.ToStart = []string{fmt.Sprintf("nodes: room for %d more member(s) of the gang %s (see NODES)", short, where)}
	}
	if e.Evictions, err = c.evictions(ctx, g.key.Namespace, g.key.Name, members); err != nil {
		return nil, err
	}
	return e, nil
}

func minFromLabels(p *v1.Pod) int32 {
	for _, l := range []string{v1alpha1.LabelMinAvailable, v1alpha1.LegacyLabelMinAvailable} {
		if q, err := resource.ParseQuantity(p.Labels[l]); err == nil {
			return int32(q.Value())
		}
	}
	return 1
}

func queueOfPod(p *v1.Pod) string {
	if q := p.Labels[v1alpha1.LabelQueue]; q != "" {
		return q
	}
	return p.Annotations[v1alpha1.VolcanoAnnotationQueueName]
}

// admit is the admission arithmetic: what the gang still needs to reach its
// minimum against what the queue has left, and what would have to free.
func admit(g *group, q *Queue, placed int, waiting []*v1.Pod) ([]Admission, []string) {
	short := int(g.minMember) - placed
	if short <= 0 || len(waiting) == 0 {
		return nil, nil
	}
	need := v1.ResourceList{}
	if placed == 0 && len(g.minResources) > 0 {
		need = g.minResources.DeepCopy()
	} else {
		for _, p := range waiting[:min(short, len(waiting))] {
			add(need, requests.Of(p))
		}
	}
	var lines []Admission
	var toStart []string
	for _, name := range names(need) {
		r := q.resource(name)
		a := Admission{Resource: string(name), Needs: qtyOf(name, need[name]), Allocated: r.Allocated,
			Deserved: r.Deserved, Capability: r.Capability, Verdict: "fits"}
		if over := overBy(nil, need, q.raw.capability, name); over != nil {
			// Freeing the whole queue would not be enough.
			a.Verdict = "more than the capability by " + qtyOf(name, *over)
			toStart = append(toStart, fmt.Sprintf("queue %s: the gang needs %s %s, more than its capability %s: it starts only if the capability grows",
				q.Name, a.Needs, name, a.Capability))
		} else if over := overBy(q.raw.allocated, need, q.raw.capability, name); over != nil {
			a.Verdict = "over capability by " + qtyOf(name, *over)
			toStart = append(toStart, fmt.Sprintf("queue %s: %s %s must free under its capability", q.Name, qtyOf(name, *over), name))
		} else if over := overBy(q.raw.allocated, need, q.raw.deserved, name); over != nil {
			a.Verdict = "over deserved by " + qtyOf(name, *over)
			toStart = append(toStart, fmt.Sprintf("queue %s: %s %s must free, or its deserved grow (proportion places up to deserved)", q.Name, qtyOf(name, *over), name))
		}
		lines = append(lines, a)
	}
	return lines, toStart
}

// overBy is how far allocated+need passes the ceiling in name, nil when it
// does not (or the ceiling does not bound name).
func overBy(allocated, need, ceiling v1.ResourceList, name v1.ResourceName) *resource.Quantity {
	c, ok := ceiling[name]
	if !ok {
		return nil
	}
	sum := allocated[name].DeepCopy()
	sum.Add(need[name])
	if sum.Cmp(c) <= 0 {
		return nil
	}
	sum.Sub(c)
	return &sum
}

func add(sum, l v1.ResourceList) {
	for n, q := range l {
		cur := sum[n]
		cur.Add(q)
		sum[n] = cur
	}
}

func (c Clients) evictions(ctx context.Context, namespace, groupName string, members []*v1.Pod) ([]Eviction, error) {
	events, err := c.Kube.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	touched := map[string]bool{groupName: true}
	for _, p := range members {
		touched[p.Name] = true
	}
	var out []Eviction
	for _, ev := range events.Items {
		// Queues' Events (Reclaimed, too) are about cluster-scoped objects
		// and stored in "default": a gang may share a queue's name.
		if evictionReasons[ev.Reason] && touched[ev.Regarding.Name] && ev.Regarding.Namespace == namespace {
			out = append(out, Eviction{Object: ev.Regarding.Kind + " " + ev.Regarding.Name, Reason: ev.Reason, Message: ev.Note})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object+out[i].Message < out[j].Object+out[j].Message })
	return out, nil
}

func (c Clients) explainQueue(ctx context.Context, name string) (*Explanation, error) {
	q, err := c.getQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	e := &Explanation{Target: "queue " + name, Queue: q}
	for _, k := range groupKinds {
		list, err := c.Dynamic.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			g := groupOf(k, &list.Items[i])
			if g.queue == name || (g.queue == "" && name == "default" && k.family != gang.FamilySchedulerPlugins && k.family != gang.FamilyUpstream) {
				e.Groups = append(e.Groups, GroupSummary{Name: g.key.Namespace + "/" + g.key.Name, Kind: k.kind, Phase: orDash(g.phase), MinMember: g.minMember})
			}
		}
	}
	sort.Slice(e.Groups, func(i, j int) bool { return e.Groups[i].Name+e.Groups[i].Kind < e.Groups[j].Name+e.Groups[j].Kind })
	return e, nil
}

// unstructuredList reads a resource map (spec.capability, …) of obj.
func resourceMap(obj *unstructured.Unstructured, path ...string) v1.ResourceList {
	m, ok, _ := unstructured.NestedStringMap(obj.Object, path...)
	if !ok {
		return nil
	}
	out := v1.ResourceList{}
	for n, s := range m {
		if q, err := resource.ParseQuantity(s); err == nil {
			out[v1.ResourceName(n)] = q
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
