package queuepolicy

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// reclaimCase is a cluster for FuzzChooseVictims: two nodes, queue a
// (Capacity: deserved and guarantee) and queue b, running gangs in
// either, and the preemptor: gang p of queue b, priority 10, its members
// pending. Cpu is in cores for nodes and queues, half cores for pods.
// With rack, each node is a rack of its own and the preemptor requires
// one: its members and victims all on one node.
type reclaimCase struct {
	drf, withinQueue, notReclaimable, rack bool
	nodes                                  [2]int
	// guaranteeA and capabilityB: 0 for none.
	deservedA, guaranteeA, capabilityB int
	members, halfCores                 int
	gangs                              []reclaimGang
}

// reclaimGang is a running gang, v0, v1… by its place in the case.
type reclaimGang struct {
	queueB               bool
	priority             int32 // 0, 10 or 20
	minMember, halfCores int
	// nodes holds each member's node: 0 for n1, 1 for n2.
	nodes []int
}

var fuzzPriorities = []int32{0, 10, 20, 10}

// decodeReclaimCase reads any bytes as a case (zeros past the end).
func decodeReclaimCase(data []byte) reclaimCase {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	flags := next()
	c := reclaimCase{drf: flags&1 != 0, withinQueue: flags&2 != 0, notReclaimable: flags&4 != 0, rack: flags&8 != 0}
	c.nodes = [2]int{1 + next()%8, 1 + next()%8}
	c.deservedA, c.guaranteeA, c.capabilityB = next()%9, next()%9, next()%17
	c.members, c.halfCores = 1+next()%3, 1+next()%8
	for range next() % 5 {
		flags := next()
		g := reclaimGang{queueB: flags&1 != 0, priority: fuzzPriorities[flags>>1&3], minMember: 1 + next()%4, halfCores: 1 + next()%8}
		placed := next()
		for i := range placed%4 + 1 {
			g.nodes = append(g.nodes, placed>>(4+i)&1)
		}
		c.gangs = append(c.gangs, g)
	}
	return c
}

// encode writes what decodeReclaimCase reads back as c.
func (c reclaimCase) encode() []byte {
	bit := func(b bool, n int) byte {
		if b {
			return 1 << n
		}
		return 0
	}
	out := []byte{bit(c.drf, 0) | bit(c.withinQueue, 1) | bit(c.notReclaimable, 2) | bit(c.rack, 3),
		byte(c.nodes[0] - 1), byte(c.nodes[1] - 1), byte(c.deservedA), byte(c.guaranteeA), byte(c.capabilityB),
		byte(c.members - 1), byte(c.halfCores - 1), byte(len(c.gangs))}
	for _, g := range c.gangs {
		placed := byte(len(g.nodes) - 1)
		for i, n := range g.nodes {
			placed |= byte(n) << (4 + i)
		}
		priority := map[int32]byte{0: 0, 10: 1, 20: 2}[g.priority]
		out = append(out, bit(g.queueB, 0)|priority<<1, byte(g.minMember-1), byte(g.halfCores-1), placed)
	}
	return out
}

func halfCores(n int) string { return fmt.Sprintf("%dm", n*500) }

// FuzzChooseVictims lists the candidates of a starving gang and chooses
// victims among them, as PostFilter does, on the plugin of
// newTestPlugin, and checks the choice against the rules reclaim.go
// documents: the members fit once the victims are gone (the plan is
// feasible) and not once any one victim is spared; no pod is chosen twice;
// a victim gang keeps its minMember members or loses them all; other
// queues give only when reclaimable and outside withinQueue, and never
// below their guarantee; the preemptor's queue gives only lower-priority
// gangs, or (DRF) gangs of its priority whose dominant share stays at or
// above the preemptor's.
//
// Members of one gang are identical and need cpu only, so whether they
// fit is a sum: how many fit on each node's free room.
func FuzzChooseVictims(f *testing.F) {
	// Cases of TestChooseVictims: 4-core nodes; x fills both.
	x := reclaimGang{minMember: 2, halfCores: 4, nodes: []int{0, 0, 1, 1}}
	for _, c := range []reclaimCase{
		{nodes: [2]int{4, 4}, deservedA: 4, members: 1, halfCores: 4, gangs: []reclaimGang{x}},
		{nodes: [2]int{4, 4}, deservedA: 0, members: 2, halfCores: 8, gangs: []reclaimGang{x}},
		{nodes: [2]int{4, 4}, deservedA: 4, members: 2, halfCores: 8, gangs: []reclaimGang{x}},
		{nodes: [2]int{4, 4}, deservedA: 0, members: 1, halfCores: 8, gangs: []reclaimGang{
			{minMember: 1, halfCores: 2, nodes: []int{0, 0}}, {minMember: 1, halfCores: 8, nodes: []int{1}}}},
		{nodes: [2]int{4, 4}, deservedA: 7, guaranteeA: 6, members: 1, halfCores: 4, gangs: []reclaimGang{
			{minMember: 4, halfCores: 4, nodes: []int{0, 0, 1, 1}}}},
		{nodes: [2]int{4, 4}, deservedA: 3, guaranteeA: 3, members: 1, halfCores: 8, gangs: []reclaimGang{
			{minMember: 2, halfCores: 2, nodes: []int{0, 0, 0, 0}}, {minMember: 1, halfCores: 8, nodes: []int{1}}}},
		{nodes: [2]int{4, 4}, deservedA: 2, members: 2, halfCores: 8, gangs: []reclaimGang{
			{minMember: 1, halfCores: 4, nodes: []int{0, 0}}, {minMember: 3, halfCores: 2, nodes: []int{1, 1, 1}}}},
		{nodes: [2]int{4, 4}, withinQueue: true, members: 1, halfCores: 4, gangs: []reclaimGang{
			{queueB: true, minMember: 2, halfCores: 4, nodes: []int{0, 0, 1, 1}}}},
		{nodes: [2]int{4, 4}, withinQueue: true, capabilityB: 4, members: 1, halfCores: 8, gangs: []reclaimGang{
			{queueB: true, minMember: 1, halfCores: 4, nodes: []int{0}}}},
		{nodes: [2]int{4, 4}, drf: true, withinQueue: true, members: 1, halfCores: 4, gangs: []reclaimGang{
			{queueB: true, priority: 10, minMember: 1, halfCores: 4, nodes: []int{0, 0, 1, 1}}}},
		{nodes: [2]int{4, 4}, drf: true, withinQueue: true, members: 1, halfCores: 8, gangs: []reclaimGang{
			{queueB: true, priority: 10, minMember: 1, halfCores: 4, nodes: []int{0, 1, 1}}}},
		// From TestCandidates: a higher-priority gang of the preemptor's
		// queue gives nothing, DRF or not.
		{nodes: [2]int{4, 4}, drf: true, withinQueue: true, members: 1, halfCores: 4, gangs: []reclaimGang{
			{queueB: true, priority: 20, minMember: 1, halfCores: 4, nodes: []int{0, 0, 1, 1}}}},
		// Both queues, every priority, a queue that is not reclaimable.
		{nodes: [2]int{8, 6}, drf: true, notReclaimable: true, deservedA: 2, members: 3, halfCores: 3, gangs: []reclaimGang{
			{minMember: 2, halfCores: 3, nodes: []int{0, 1, 0}}, {queueB: true, priority: 0, minMember: 1, halfCores: 5, nodes: []int{1, 0}},
			{queueB: true, priority: 10, minMember: 2, halfCores: 2, nodes: []int{0, 0, 1, 1}}, {queueB: true, priority: 20, minMember: 1, halfCores: 4, nodes: []int{1}}}},
	} {
		f.Add(c.encode())
		c.rack = true // the same, with a rack per node
		f.Add(c.encode())
	}
	// Found by the fuzzer: members that fit with no victim took one.
	f.Add([]byte("017770000"))
	// A rack each: two members fit on n2 once its gang goes, not on n1.
	f.Add(reclaimCase{rack: true, nodes: [2]int{2, 4}, members: 2, halfCores: 4, gangs: []reclaimGang{
		{minMember: 1, halfCores: 2, nodes: []int{0}}, {minMember: 1, halfCores: 8, nodes: []int{1}}}}.encode())

	f.Fuzz(func(t *testing.T, data []byte) {
		c := decodeReclaimCase(data)
		cl, minMember := c.cluster()
		preemptor := testGang{name: "p", queue: "b", minMember: c.members, cpu: halfCores(c.halfCores), priority: 10}
		if c.rack {
			preemptor.required = v1alpha1.LabelRack
		}
		members := preemptor.pods(make([]string, c.members)...)
		cl.pods = append(cl.pods, members...)
		ctx, pl, snap := newTestPlugin(t, cl, c.drf)

		st := pl.gangs.Status(preemptor.key())
		need := requestsOf(members)
		units := pl.candidates(snap, st.Key, queue.QueueOf(&st), preemptor.priority, need, c.withinQueue, true)
		victims, plan, err := pl.victimsFor(ctx, snap, pl.records.inFlight(), members, units, &st, need, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %+v: victims %v, plan %v", c, describeUnits(victims), plan)
		if (victims == nil) != (plan == nil) {
			t.Fatalf("victims %v with plan %v", describeUnits(victims), plan)
		}
		if victims == nil {
			return
		}
		v := reclaimCheck{t: t, c: c, cl: cl, snap: snap, need: need, minMember: minMember}
		v.checkPlan(victims, members, plan)
		v.checkRules(victims)
		if c.rack {
			v.checkOneRack(victims, plan)
		}
		if !v.fits(victims) {
			t.Fatalf("the members do not fit once victims %v are gone", describeUnits(victims))
		}
		if v.fits(nil) {
			t.Fatalf("victims %v chosen for members that fit without any", describeUnits(victims))
		}
		for i := range victims {
			without := append(append([]unit{}, victims[:i]...), victims[i+1:]...)
			if v.fits(without) {
				t.Fatalf("victims %v: the members fit without %v", describeUnits(victims), describeUnits(victims[i:i+1]))
			}
		}
	})
}

// cluster builds c's nodes, queues and running gangs, each member on its
// node or, when that is full, the other (or nowhere); it returns each
// gang's minMember by name.
func (c reclaimCase) cluster() (testCluster, map[string]int) {
	a := capacityQueue("a", fmt.Sprint(c.deservedA), "")
	if c.guaranteeA > 0 {
		a = capacityQueue("a", fmt.Sprint(c.deservedA), fmt.Sprint(c.guaranteeA))
	}
	if c.notReclaimable {
		a = notReclaimable(a)
	}
	b := capacityQueue("b", "", "")
	if c.capabilityB > 0 {
		b = withCapability(b, fmt.Sprint(c.capabilityB))
	}
	cl := testCluster{nodes: []*v1.Node{node("n1", fmt.Sprint(c.nodes[0])), node("n2", fmt.Sprint(c.nodes[1]))}, queues: []*v1alpha1.Queue{a, b}}
	if c.rack {
		inRack(cl.nodes[0], "r1")
		inRack(cl.nodes[1], "r2")
	}
	free := []int{2 * c.nodes[0], 2 * c.nodes[1]}
	minMember := map[string]int{}
	for i, g := range c.gangs {
		tg := testGang{name: fmt.Sprintf("v%d", i), queue: "a", minMember: g.minMember, cpu: halfCores(g.halfCores), priority: g.priority}
		if g.queueB {
			tg.queue = "b"
		}
		var on []string
		for _, n := range g.nodes {
			for _, n := range []int{n, 1 - n} {
				if free[n] >= g.halfCores {
					free[n] -= g.halfCores
					on = append(on, fmt.Sprintf("n%d", n+1))
					break
				}
			}
		}
		cl.pods = append(cl.pods, tg.pods(on...)...)
		minMember[tg.name] = g.minMember
	}
	return cl, minMember
}

// reclaimCheck checks a choice of victims in one case.
type reclaimCheck struct {
	t         *testing.T
	c         reclaimCase
	cl        testCluster
	snap      *queue.Snapshot
	need      queue.Vector
	minMember map[string]int
}

// free is each node's free cpu (millicores) once the victims are gone.
func (v reclaimCheck) free(victims []unit) map[string]int64 {
	gone := map[types.UID]bool{}
	for _, u := range victims {
		for _, p := range u.pods {
			gone[p.UID] = true
		}
	}
	free := map[string]int64{}
	for _, n := range v.cl.nodes {
		free[n.Name] = n.Status.Allocatable.Cpu().MilliValue()
	}
	for _, p := range v.cl.pods {
		if p.Spec.NodeName != "" && !gone[p.UID] {
			free[p.Spec.NodeName] -= p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
	}
	return free
}

// fits reports whether the preemptor fits once victims are gone: its
// queue within its ceiling (less its own victims), and as many members
// on the nodes' free room as it has (with rack, on one node's).
func (v reclaimCheck) fits(victims []unit) bool {
	after := v.need.Clone()
	for _, u := range victims {
		if u.queue == "b" {
			after.Sub(u.usage)
		}
	}
	if ok, _ := v.snap.FitsCeiling("b", after); !ok {
		return false
	}
	each := int64(v.c.halfCores) * 500
	room := int64(0)
	for _, f := range v.free(victims) {
		if v.c.rack {
			room = max(room, max(0, f)/each)
		} else {
			room += max(0, f) / each
		}
	}
	return room >= int64(v.c.members)
}

// checkOneRack checks that the plan is on one node, the rack the members
// need, and that every victim has a pod there: a gang spread over both
// racks goes whole, but nothing is taken only from the other rack.
func (v reclaimCheck) checkOneRack(victims []unit, plan map[types.UID]string) {
	nodes := map[string]bool{}
	for _, n := range plan {
		nodes[n] = true
	}
	if len(nodes) != 1 {
		v.t.Fatalf("plan %v spans nodes %v, want one rack", plan, nodes)
	}
	for _, u := range victims {
		if !slices.ContainsFunc(u.pods, func(p *v1.Pod) bool { return nodes[p.Spec.NodeName] }) {
			v.t.Fatalf("victim %v has no pod in the plan's rack %v", describeUnits([]unit{u}), nodes)
		}
	}
}

// checkPlan checks that the plan places every member on a node with room
// once the victims are gone.
func (v reclaimCheck) checkPlan(victims []unit, members []*v1.Pod, plan map[types.UID]string) {
	free := v.free(victims)
	for _, m := range members {
		n, ok := plan[m.UID]
		if !ok {
			v.t.Fatalf("plan %v does not place %s", plan, m.Name)
		}
		free[n] -= int64(v.c.halfCores) * 500
		if free[n] < 0 {
			v.t.Fatalf("plan %v: node %s has no room for %s once victims %v are gone", plan, n, m.Name, describeUnits(victims))
		}
	}
}

// checkRules checks which pods the victims are and where they come from.
func (v reclaimCheck) checkRules(victims []unit) {
	t := v.t
	taken := map[string]int{}         // pods per gang
	takenA := int64(0)                // millicores from queue a
	left := map[string]queue.Vector{} // allocated per gang, less its victims
	seen := map[types.UID]bool{}
	for _, p := range v.cl.pods {
		if p.Spec.NodeName != "" {
			vectorAt(left, p.Labels[v1alpha1.LabelPodGroup]).Add(queue.FromList(podRequests(p)))
		}
	}
	for _, u := range victims {
		for _, p := range u.pods {
			if seen[p.UID] || p.Spec.NodeName == "" || u.gang.Name == "p" {
				t.Fatalf("victims %v: %s chosen twice, not bound, or the preemptor's", describeUnits(victims), p.Name)
			}
			seen[p.UID] = true
			taken[u.gang.Name]++
			left[u.gang.Name].Sub(queue.FromList(podRequests(p)))
			if u.queue == "a" {
				takenA += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			}
		}
		g := v.c.gangs[gangIndex(u.gang)]
		switch {
		case u.queue == "a" && (v.c.withinQueue || v.c.notReclaimable):
			t.Fatalf("victim %v of queue a: within the queue %v, not reclaimable %v", describeUnits([]unit{u}), v.c.withinQueue, v.c.notReclaimable)
		case u.queue == "b" && (g.priority > 10 || g.priority == 10 && !v.c.drf):
			t.Fatalf("victim %v of priority %d, DRF %v: the preemptor has 10", describeUnits([]unit{u}), g.priority, v.c.drf)
		}
	}
	bound := map[string]int{}
	for _, p := range v.cl.pods {
		if p.Spec.NodeName != "" {
			bound[p.Labels[v1alpha1.LabelPodGroup]]++
		}
	}
	for name, n := range taken {
		if n != bound[name] && bound[name]-n < v.minMember[name] {
			t.Fatalf("victims %v: gang %s loses %d of %d members, below its minMember %d", describeUnits(victims), name, n, bound[name], v.minMember[name])
		}
	}
	if takenA > 0 && v.c.guaranteeA > 0 {
		if held := v.snap.Queues["a"].Allocated[v1.ResourceCPU] - takenA; held < int64(v.c.guaranteeA)*1000 {
			t.Fatalf("victims %v leave queue a %dm, below its guarantee of %d cores", describeUnits(victims), held, v.c.guaranteeA)
		}
	}
	// DRF: a gang of the preemptor's priority keeps a dominant share no
	// lower than the preemptor's once placed.
	shareAfter := v.snap.DominantShare(v.need)
	for name := range taken {
		if g := v.c.gangs[gangIndex(gang.Key{Name: name})]; g.queueB && g.priority == 10 {
			if s := v.snap.DominantShare(left[name]); shareAfter > s+shareEpsilon {
				t.Fatalf("victims %v leave gang %s a dominant share of %v, below the preemptor's %v", describeUnits(victims), name, s, shareAfter)
			}
		}
	}
}

// gangIndex is i for gang v<i>.
func gangIndex(key gang.Key) int {
	var i int
	fmt.Sscanf(key.Name, "v%d", &i)
	return i
}
