package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// What the scheduling cycles record of a gang: reservations, its placement
// plan, its last failure and why a queue keeps it waiting.

// Reserve records that this scheduler reserved node for the member uid.
// Idempotent; Unreserve undoes it.
func (m *Manager) Reserve(key Key, uid types.UID, node string, now time.Time) {
	m.mu.Lock()
	g := m.groupLocked(key)
	g.changed()
	g.retally(uid, func() { g.reserved[uid] = node })
	if g.plan != nil {
		if _, planned := g.plan.Nodes[uid]; planned {
			g.plan.Progress = now
			m.keepLocked(key, g.plan, uid)
		}
	}
	ready := g.plan != nil && planUsedUp(g)
	if ready {
		m.replacePlanLocked(key, g, nil)
	}
	m.mu.Unlock()
	m.notify(key, usageChange)
	if ready {
		// Extras that arrived while the plan was carried out were parked
		// behind it; they schedule one by one now. Not on this goroutine:
		// Reserve runs in a scheduling cycle, and waking takes the
		// scheduling queue's lock.
		go m.wake(key)
	}
}

func planUsedUp(g *group) bool {
	if len(g.plan.Todo) > 0 {
		return false
	}
	for uid := range g.plan.Nodes {
		if _, ok := g.reserved[uid]; !ok {
			if p := g.members[uid]; p == nil || p.Spec.NodeName == "" {
				return false
			}
		}
	}
	return true
}

// Unreserve forgets the reservation of member uid and drops the gang's plan:
// the gang will be placed afresh.
func (m *Manager) Unreserve(key Key, uid types.UID) {
	m.mu.Lock()
	if g := m.groups[key]; g != nil {
		g.changed()
		g.retally(uid, func() { delete(g.reserved, uid) })
		m.replacePlanLocked(key, g, nil)
	}
	m.mu.Unlock()
	m.notify(key, releaseChange)
}

// PlannedNode returns the node the gang's plan gives member uid, if a live,
// finished plan does.
func (m *Manager) PlannedNode(key Key, uid types.UID, now time.Time) (node string, planned, hasPlan bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if !g.placing(now) || len(g.plan.Todo) > 0 {
		return "", false, false
	}
	node, planned = g.plan.Nodes[uid]
	return node, planned, true
}

// UnfinishedPlan returns, when the gang has a live plan with members still
// to be planned, those members, where the plan put the others and their
// PodInfos (read only: a plan is replaced, never changed).
func (m *Manager) UnfinishedPlan(key Key, now time.Time) (nodes map[types.UID]string, infos []fwk.PodInfo, todo []*v1.Pod, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if !g.placing(now) || len(g.plan.Todo) == 0 {
		return nil, nil, nil, false
	}
	return g.plan.Nodes, g.plan.Infos, g.plan.Todo, true
}

// Placing reports whether the gang is being placed: it has a live plan
// whose members are not all reserved yet.
func (m *Manager) Placing(key Key, now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.groups[key].placing(now)
}

// placing reports whether g (nil: a gang not known) has a placement plan
// that made progress within PlanTTL of now.
func (g *group) placing(now time.Time) bool {
	return g != nil && g.plan != nil && now.Sub(g.plan.Progress) <= PlanTTL
}

// SetPlan records where the gang's pending members go, and promises them
// their room there (see Promised); todo are the members still to be
// planned, and infos the PodInfos of those planned (see Plan). The gang's
// pending members are then activated: the ones rejected while the plan
// was made wait outside the active queue, and kube-scheduler activates
// the pods a cycle asks for only when the cycle succeeds.
func (m *Manager) SetPlan(key Key, nodes map[types.UID]string, infos []fwk.PodInfo, todo []*v1.Pod, now time.Time) {
	m.mu.Lock()
	g := m.groupLocked(key)
	g.changed()
	if len(todo) == 0 {
		infos = nil // only the next step reads them
	}
	m.replacePlanLocked(key, g, &Plan{Nodes: nodes, Infos: infos, Todo: todo, Progress: now})
	g.failure = failure{}
	g.note = ""
	m.mu.Unlock()
	m.notify(key, statusChange)
	go m.wake(key) // takes the scheduling queue's lock: not in the cycle
}

// DropPlan forgets the gang's plan and the room it promised.
func (m *Manager) DropPlan(key Key) {
	m.mu.Lock()
	if g := m.groups[key]; g != nil && g.plan != nil {
		g.changed()
		m.replacePlanLocked(key, g, nil)
	}
	m.mu.Unlock()
}

// RecordFailure records why the gang could not be placed on its last try.
func (m *Manager) RecordFailure(key Key, message string, now time.Time) {
	m.mu.Lock()
	g := m.groupLocked(key)
	changed := g.failure.message != message
	g.changed()
	g.failure = failure{message: message, at: now}
	m.replacePlanLocked(key, g, nil)
	m.mu.Unlock()
	if changed {
		m.notify(key, statusChange)
	}
}

// SetWaiting records why something other than placement keeps the gang
// waiting (its queue did not admit it); "" clears it.
func (m *Manager) SetWaiting(key Key, why string) {
	m.mu.Lock()
	g := m.groups[key]
	changed := g != nil && g.note != why
	if changed {
		g.changed()
		g.note = why
		if why != "" {
			g.failure = failure{}
		}
	}
	m.mu.Unlock()
	if changed {
		m.notify(key, statusChange)
	}
}
