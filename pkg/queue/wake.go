package queue

import "github.com/muster-sched/muster/pkg/gang"

// Freed receives when the accounting may have room for a gang it refused:
// a member of some gang stopped counting, a reservation was undone, a
// PodGroup or Queue changed, a node was added or changed, a bound pod left,
// or an admission was given back. Signals are coalesced: one receive may
// stand for many. The gang state and the cluster sums have taken the change
// in when it is sent, so a gang tried after the receive sees it; the
// scheduling queue's own events may come before Muster's informers have,
// and a gang retried on them may have been refused on stale figures.
func (s *State) Freed() <-chan struct{} { return s.freed }

// QueuesChanged tells the accounting that a Queue was added, deleted or
// had its spec changed.
func (s *State) QueuesChanged() { signal(s.queuesChanged) }

// QueueChanges receives, coalesced, when a Queue was added, deleted or
// had its spec changed: any waiting gang may now be admitted, or reclaim
// (a weight raised), whatever refused it.
func (s *State) QueueChanges() <-chan struct{} { return s.queuesChanged }

// Changed receives, coalesced, when some gang's usage changed: a member
// placed, bound, finished or gone. Room no queue can claim may have
// appeared (see Snapshot.Unclaimed).
func (s *State) Changed() <-chan struct{} { return s.changed }

// Release gives back the admission of a gang that has not started: a
// placement attempt showed that it cannot fit, even by reclaim, and its
// minimum must not hold its queue's ceiling and the overcommit limit while
// it waits. It is admitted again, if its queue still can, the next time it
// is tried.
func (s *State) Release(key gang.Key) {
	s.mu.Lock()
	// A gang with a member placed (reserved or bound) has started: it
	// stays admitted by that member.
	released := s.admitted[key] && s.gangs.Status(key).Placed == 0
	if released {
		delete(s.admitted, key)
		s.dirty[key] = true
		s.updateFigures(key, func(g *GangFigures) { g.Admitted = false })
	}
	s.mu.Unlock()
	if released {
		signal(s.freed)
	}
}

// Block records that a placement attempt showed the gang cannot use the
// room that is free: it did not fit, even by reclaim, although the
// cluster's free room covers what it needs (a selector, fragmentation).
// Until it is tried again and admitted (Retry) it claims no room under
// its queue's share, so other queues may borrow that room (see Lends). A
// gang that failed for want of room keeps its claim: the room it waits
// for is its share, held by others.
func (s *State) Block(key gang.Key) {
	s.mu.Lock()
	blocked := !s.blocked[key]
	if blocked {
		s.blocked[key] = true
		s.updateFigures(key, func(g *GangFigures) { g.Blocked = true })
	}
	s.mu.Unlock()
	if blocked {
		signal(s.freed)
	}
}

// updateFigures publishes a copy of the gang's figures changed by f.
// s.mu held.
func (s *State) updateFigures(key gang.Key, f func(*GangFigures)) {
	if v, ok := s.figures.Load(key); ok {
		g := *v.(*GangFigures)
		f(&g)
		s.figures.Store(key, &g)
		s.version++
	}
}

// NoVictims records that reclaim found no victims for the gang on snap's
// deserved shares. Shares move with what every queue asks for, which no
// event the gang's members wait on reports: until it is tried again, the
// gang is retried whenever they move (Redivided), and at once if they
// moved since snap.
func (s *State) NoVictims(key gang.Key, snap *Snapshot) {
	s.mu.Lock()
	s.unhelped[key] = snap.divided
	moved := s.divided != snap.divided
	s.mu.Unlock()
	if moved {
		signal(s.redivided)
	}
}

// Redivided receives, coalesced, when the deserved shares moved since
// reclaim found no victims for some gang (NoVictims): TakeRedivided
// returns those gangs.
func (s *State) Redivided() <-chan struct{} { return s.redivided }

// TakeRedivided returns the gangs reclaim found no victims for on shares
// that have moved since, and forgets them.
func (s *State) TakeRedivided() []gang.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gang.Key
	for key, divided := range s.unhelped {
		if divided != s.divided {
			out = append(out, key)
			delete(s.unhelped, key)
		}
	}
	return out
}

// Retry records that the gang is being tried again and its queue admits
// it: it claims its room under its queue's share again, and what reclaim
// found for it last (NoVictims) is forgotten.
func (s *State) Retry(key gang.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unhelped, key)
	if !s.blocked[key] {
		return
	}
	delete(s.blocked, key)
	s.updateFigures(key, func(g *GangFigures) { g.Blocked = false })
}

// signal sends on a channel of capacity 1 without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Restore admits a gang again that a previous leader admitted: one whose
// victims are terminating. It does not start until they are gone, and its
// queue must not admit another gang into the room meanwhile.
func (s *State) Restore(key gang.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.admitted[key] {
		s.admitted[key] = true
		s.dirty[key] = true
	}
}
