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
func (s *State) QueuesChanged() { signal(s.freed) }

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
		if v, ok := s.figures.Load(key); ok {
			g := *v.(*GangFigures)
			g.Admitted = false
			s.figures.Store(key, &g)
		}
	}
	s.mu.Unlock()
	if released {
		signal(s.freed)
	}
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
