package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// A live plan promises each member it places, until the member reserves,
// the member's requests on its node. Gang's Filter keeps other pods off
// promised room, so that pods in no gang, and other gangs, may be
// scheduled between a big gang's members without spoiling its plan. The
// promises follow the plan: dropped, used up or expired, it takes them
// back. They live in this process only, as a plan does.

// Room is an amount of node resources: what a pod requests, or what plans
// promise on a node.
type Room struct {
	MilliCPU, Memory, EphemeralStorage int64
	Pods                               int64
	Scalar                             map[v1.ResourceName]int64
}

// RoomOf is the room a pod with these requests takes: one pod, and its
// requests.
func RoomOf(requests v1.ResourceList) Room {
	r := Room{Pods: 1}
	for name, q := range requests {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.Memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case v1.ResourcePods:
		default:
			if r.Scalar == nil {
				r.Scalar = map[v1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

// add adds sign × o to r.
func (r *Room) add(o Room, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	r.Pods += sign * o.Pods
	for name, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[name] += sign * v
	}
}

// FitsBeside reports whether a pod taking r fits on n beside the room
// promised there: for the pod count, and each resource the pod requests
// that is promised, as NodeResourcesFit counts. A resource nothing
// promises is left to NodeResourcesFit (which ignores some).
func (r Room) FitsBeside(promised Room, n fwk.NodeInfo) bool {
	alloc, used := n.GetAllocatable(), n.GetRequested()
	if int64(len(n.GetPods()))+promised.Pods+r.Pods > int64(alloc.GetAllowedPodNumber()) {
		return false
	}
	over := func(want, used, promised, alloc int64) bool {
		return want > 0 && promised > 0 && used+promised+want > alloc
	}
	if over(r.MilliCPU, used.GetMilliCPU(), promised.MilliCPU, alloc.GetMilliCPU()) ||
		over(r.Memory, used.GetMemory(), promised.Memory, alloc.GetMemory()) ||
		over(r.EphemeralStorage, used.GetEphemeralStorage(), promised.EphemeralStorage, alloc.GetEphemeralStorage()) {
		return false
	}
	for name, want := range r.Scalar {
		if over(want, used.GetScalarResources()[name], promised.Scalar[name], alloc.GetScalarResources()[name]) {
			return false
		}
	}
	return true
}

// promise is the room a plan promises one member.
type promise struct {
	node string
	room Room
}

// Promising reports whether a plan promises room on some node (perhaps
// an expired one); lock-free.
func (m *Manager) Promising() bool { return m.promising.Load() > 0 }

// Promised returns the room live plans (see Placing) promise on each node
// to the members of gangs other than except (the zero Key: every gang), or
// nil when there is none. The result is the caller's.
func (m *Manager) Promised(except Key, now time.Time) map[string]Room {
	if !m.Promising() {
		return nil // no plan: the path of every pod in no gang
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out map[string]Room
	for node, byGang := range m.promised {
		for key, room := range byGang {
			if key == except || !m.groups[key].placing(now) {
				continue // an expired plan promises nothing; the next one replaces it
			}
			if out == nil {
				out = map[string]Room{}
			}
			sum := out[node]
			sum.add(room, 1)
			out[node] = sum
		}
	}
	return out
}

// replacePlanLocked makes p (nil: none) gang key's plan: the room the old
// plan still promised is taken back, and the new plan promises its
// members theirs. m.mu held for writing.
func (m *Manager) replacePlanLocked(key Key, g *group, p *Plan) {
	old := g.plan
	g.plan = p
	if old == p {
		return
	}
	if old != nil {
		for uid := range old.promises {
			m.keepLocked(key, old, uid)
		}
	}
	if p == nil {
		return
	}
	p.promises = make(map[types.UID]promise, len(p.Nodes))
	for uid, node := range p.Nodes {
		// A member held by a scheduling gate cannot come for its room:
		// promising it would keep the room idle until the plan expires.
		if pod := g.members[uid]; pod != nil && pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) == 0 {
			pr := promise{node: node, room: RoomOf(g.requests[uid])}
			p.promises[uid] = pr
			m.changePromisedLocked(key, pr, 1)
		}
	}
}

// keepLocked takes back what plan p of gang key promised member uid: the
// member reserved, or the plan ends. m.mu held for writing.
func (m *Manager) keepLocked(key Key, p *Plan, uid types.UID) {
	if pr, ok := p.promises[uid]; ok {
		delete(p.promises, uid)
		m.changePromisedLocked(key, pr, -1)
	}
}

func (m *Manager) changePromisedLocked(key Key, pr promise, sign int64) {
	if m.promised == nil {
		m.promised = map[string]map[Key]Room{}
	}
	byGang := m.promised[pr.node]
	if byGang == nil {
		byGang = map[Key]Room{}
		m.promised[pr.node] = byGang
	}
	room := byGang[key]
	room.add(pr.room, sign)
	byGang[key] = room
	if room.Pods == 0 {
		delete(byGang, key)
		if len(byGang) == 0 {
			delete(m.promised, pr.node)
		}
	}
	m.promising.Store(int64(len(m.promised)))
}
