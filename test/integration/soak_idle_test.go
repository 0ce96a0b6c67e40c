package integration

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// checkIdle fails the run when a pod waits, past idleGrace, while room it
// fits is idle (see TestSoak).
func (s *soak) checkIdle() {
	s.t.Helper()
	flagged := s.idle()
	if len(flagged) == 0 {
		return
	}
	start := time.Now()
	for time.Since(start) < idleGrace {
		time.Sleep(200 * time.Millisecond)
		now := s.idle()
		for pod := range flagged {
			if _, ok := now[pod]; !ok {
				delete(flagged, pod)
			}
		}
		if len(flagged) == 0 {
			s.resolved++
			return
		}
	}
	why := make([]string, 0, len(flagged))
	for _, w := range flagged {
		why = append(why, w)
	}
	sort.Strings(why)
	s.fatalf("room idle while pods that fit it wait, for %v:\n  %s\n%s", idleGrace, strings.Join(why, "\n  "), s.describe())
}

// idle returns the pods waiting that fit idle room, with why, by name.
func (s *soak) idle() map[string]string {
	s.t.Helper()
	pods, nodes := s.pods(), s.nodes()
	free := map[string]queue.Vector{}
	for _, n := range nodes {
		if usable(n) {
			free[n.Name] = queue.FromList(n.Status.Allocatable)
		}
	}
	nominated := map[string]string{}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "" && !finished(p):
			if room, ok := free[p.Spec.NodeName]; ok {
				room.Sub(requests(p))
			}
		case p.Spec.NodeName == "" && p.Status.NominatedNodeName != "":
			if room, ok := free[p.Status.NominatedNodeName]; ok {
				room.Sub(requests(p))
				nominated[p.Name] = p.Status.NominatedNodeName
			}
		}
	}
	snap := s.sched.Queues().Refresh()
	out := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		req := requests(p)
		node := fittingNode(free, req, nominated[p.Name], p)
		if node == "" {
			continue
		}
		_, inGang := p.Labels[v1alpha1.LabelPodGroup]
		q, inQueue := p.Labels[v1alpha1.LabelQueue]
		switch {
		case !inGang && !inQueue:
			out[p.Name] = fmt.Sprintf("pod %s (no gang, no queue, %v) fits node %s (free %v)", p.Name, req, node, free[node])
		case !inGang:
			if why := s.queueMayPlace(snap, q, req, pods, free); why != "" {
				out[p.Name] = fmt.Sprintf("pod %s (queue %s, %v) fits node %s (free %v): %s", p.Name, q, req, node, free[node], why)
			}
		}
	}
	return out
}

// fittingNode returns a node whose free room takes req, counting back the
// pod's own nomination; "" when none does.
func fittingNode(free map[string]queue.Vector, req queue.Vector, own string, p *v1.Pod) string {
	names := make([]string, 0, len(free))
	for n := range free {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		room := free[n].Clone()
		if n == own {
			room.Add(requests(p))
		}
		if ok, _ := req.Fits(room); ok {
			return n
		}
	}
	return ""
}

// queueMayPlace says why queue q should place a gang of one of req now
// (see TestSoak), or "" when it may legitimately wait.
func (s *soak) queueMayPlace(snap *queue.Snapshot, q string, req queue.Vector, pods []*v1.Pod, free map[string]queue.Vector) string {
	f := snap.Queues[q]
	if f == nil || f.Closed || f.Invalid != "" || !f.IsLeaf() {
		return ""
	}
	// As admission counts it (queue.State.Admit): what the queue holds,
	// the rest of its admitted gangs' minimums, less what its started
	// gangs hold above theirs.
	held := f.Allocated.Clone()
	held.Add(f.Inqueue)
	held.Sub(f.Elastic)
	held.Add(req)
	if ok, _ := held.Fits(f.RealCapability); !ok {
		return ""
	}
	// Σ inqueue + req ≤ overcommit · allocatable − used.
	limit := queue.Vector{}
	for r, a := range snap.Allocatable {
		limit[r] = int64(queue.DefaultOvercommitFactor*float64(a)) - snap.Used[r]
	}
	for _, g := range snap.Queues {
		if g.IsLeaf() {
			limit.Sub(g.Inqueue)
		}
	}
	if ok, _ := req.Fits(limit); !ok {
		return ""
	}
	figures := fmt.Sprintf("allocated %v inqueue %v elastic %v deserved %v realCapability %v, off nodes %v, unclaimed %v",
		f.Allocated, f.Inqueue, f.Elastic, f.Deserved, f.RealCapability, snap.OffNodes, snap.Unclaimed())
	withinShare, _ := snap.FitsCeiling(q, req)
	committed := f.Allocated.Clone()
	committed.Add(f.Inqueue)
	committed.Sub(f.Elastic)
	committed.Add(req)
	if ok, _ := committed.Fits(f.Deserved); ok && withinShare {
		return "within its deserved share: " + figures
	}
	if withinShare && positiveSome(f.Inqueue) {
		// An admission lasts one placement attempt: inqueue that outlives
		// the grace is held by no gang being placed.
		return "within its share but for its inqueue, held by admitted gangs " + fmt.Sprint(admittedGangs(snap, q)) + ": " + figures
	}
	if !f.Reclaimable {
		return "" // lent nothing: what it held above its share could not be taken back
	}
	if s.claimant(snap, q, pods, free) != "" {
		return ""
	}
	lent := snap.Lends(q, req, nil, true) && snap.Lends(q, req, nil, false)
	return fmt.Sprintf("above its share, and no other queue has a pending gang that could use the room (the accounting lends it: %v): %s", lent, figures)
}

// admittedGangs describes queue q's admitted gangs, by key.
func admittedGangs(snap *queue.Snapshot, q string) []string {
	var out []string
	snap.RangeGangs(func(k gang.Key, g *queue.GangFigures) bool {
		if g.Queue == q && g.Admitted {
			out = append(out, fmt.Sprintf("%s (min %v allocated %v next %v blocked %v)", k, g.MinResources, g.Allocated, g.Next, g.Blocked))
		}
		return true
	})
	sort.Strings(out)
	return out
}

// claimant names another open queue that claims room under its share for
// a pending gang that could use it: valid (its PodGroup, if it names one,
// exists; at least its minimum of members live, finished ones not
// counted) and its pending members fitting the free room, placed
// first-fit; "" when none does. A gang that is not valid cannot start and
// claims nothing.
func (s *soak) claimant(snap *queue.Snapshot, q string, pods []*v1.Pod, free map[string]queue.Vector) string {
	gangs := s.pendingGangs(pods)
	keys := make([]string, 0, len(gangs))
	for k := range gangs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := gangs[k]
		f := snap.Queues[g.queue]
		if g.queue == q || len(g.pendingPods) == 0 || f == nil || f.Closed || !f.IsLeaf() {
			continue
		}
		if g.noGroup || g.live < g.min {
			continue
		}
		want := queue.Vector{}
		for r, d := range f.Deserved {
			want[r] = min(d, f.Request[r])
		}
		want.Sub(f.Allocated)
		want.Sub(f.Inqueue)
		if positiveSome(want) && fitFirst(free, g.pendingPods) {
			return fmt.Sprintf("queue %s claims %v for %s", g.queue, want, k)
		}
	}
	return ""
}

// soakGang is a gang (or gang of one) with unfinished members, as the
// apiserver shows it.
type soakGang struct {
	queue       string
	min, live   int
	noGroup     bool
	pendingPods []*v1.Pod
}

// pendingGangs groups the unfinished pods of gangs and queues by gang:
// "gang NAME" for a PodGroup's or label gang's members, the pod's name for
// a gang of one.
func (s *soak) pendingGangs(pods []*v1.Pod) map[string]*soakGang {
	groups := map[string]*v1alpha1.PodGroup{}
	list, err := cluster.Muster.SchedulingV1alpha1().PodGroups(s.e.ns).List(s.e.ctx, metav1.ListOptions{})
	if err != nil {
		s.fatalf("listing PodGroups: %v", err)
	}
	for i := range list.Items {
		groups[list.Items[i].Name] = &list.Items[i]
	}
	gangs := map[string]*soakGang{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		key, g := p.Name, &soakGang{queue: p.Labels[v1alpha1.LabelQueue], min: 1}
		if name, ok := p.Labels[v1alpha1.LabelPodGroup]; ok {
			key = "gang " + name
			if min, ok := p.Labels[v1alpha1.LabelMinAvailable]; ok {
				fmt.Sscan(min, &g.min)
			} else if pg := groups[name]; pg != nil {
				g.min = int(pg.Spec.MinMember)
				if pg.Spec.Queue != "" {
					g.queue = pg.Spec.Queue
				}
			} else {
				g.noGroup = true
			}
		} else if g.queue == "" {
			continue // in no gang and no queue
		}
		if g.queue == "" {
			g.queue = v1alpha1.DefaultQueue
		}
		if have := gangs[key]; have != nil {
			g = have
		} else {
			gangs[key] = g
		}
		g.live++
		if p.Spec.NodeName == "" {
			g.pendingPods = append(g.pendingPods, p)
		}
	}
	return gangs
}

func positiveSome(v queue.Vector) bool {
	for _, n := range v {
		if n > 0 {
			return true
		}
	}
	return false
}

// fitFirst reports whether the pods fit the free room, each on the first
// node that has room left for it.
func fitFirst(free map[string]queue.Vector, pods []*v1.Pod) bool {
	room := map[string]queue.Vector{}
	for n, v := range free {
		room[n] = v.Clone()
	}
	for _, p := range pods {
		node := fittingNode(room, requests(p), "", p)
		if node == "" {
			return false
		}
		room[node].Sub(requests(p))
	}
	return true
}

func usable(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func finished(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// requests sums the pod's containers' requests.
func requests(p *v1.Pod) queue.Vector {
	out := queue.Vector{}
	for _, c := range p.Spec.Containers {
		out.Add(queue.FromList(c.Resources.Requests))
	}
	return out
}
