package queue

import "github.com/muster-sched/muster/pkg/gang"

// contribution is what one gang adds to its queue's usage.
type contribution struct {
	queue              string
	allocated, request Vector
	inqueue, elastic   Vector
	reserved           Vector // of inqueue
}

// contributionOf is what the gang adds to its queue q, given its figures.
func contributionOf(st *gang.Status, q string, g *GangFigures) contribution {
	c := contribution{queue: q, allocated: g.Allocated, request: g.Allocated}
	if len(st.Pending) > 0 {
		// Contributions are read only once made; Allocated is g's.
		c.request = g.Allocated.Clone()
		c.request.addList(st.Pending)
	}
	if g.Admitted && !st.Started() && st.Invalid == "" && st.Live > st.Placed {
		// The rest of its minimum, while it has members to place: a gang
		// with none (they were deleted) holds nothing for them.
		c.inqueue = positive(g.MinResources, g.Allocated)
	}
	if r := Reserved(st); r != nil {
		c.inqueue, c.reserved = r, r
	}
	if st.Started() {
		c.elastic = positive(g.Allocated, g.MinResources)
	}
	return c
}

// Reserved is what the queue of an enqueued gang (gang.Status.Enqueued)
// holds for the members still to come, as Volcano's enqueue reserves it:
// the minResources its PodGroup gives, less what it has placed, until
// minMember members exist. Then the gang is admitted as any other, for
// one placement attempt at a time, and holds nothing between them. nil
// when nothing is held.
func Reserved(st *gang.Status) Vector {
	if !st.Enqueued || st.Live >= st.Spec.MinMember || st.Started() {
		return nil
	}
	return positive(FromList(st.Spec.MinResources), FromList(st.Allocated))
}

func (c contribution) equal(o contribution) bool {
	return c.queue == o.queue && c.allocated.Equal(o.allocated) && c.request.Equal(o.request) &&
		c.inqueue.Equal(o.inqueue) && c.elastic.Equal(o.elastic) && c.reserved.Equal(o.reserved)
}

// apply adds (sign 1) or removes (sign −1) a contribution. s.mu held.
func (s *State) apply(c contribution, sign int64) {
	u := s.usage[c.queue]
	if u.Allocated == nil {
		u = Usage{Allocated: Vector{}, Request: Vector{}, Inqueue: Vector{}, Elastic: Vector{}, Reserved: Vector{}}
	}
	addScaled(u.Allocated, c.allocated, sign)
	addScaled(u.Request, c.request, sign)
	addScaled(u.Inqueue, c.inqueue, sign)
	addScaled(u.Elastic, c.elastic, sign)
	addScaled(u.Reserved, c.reserved, sign)
	s.usage[c.queue] = u
	s.moved[c.queue] = true
	s.version++
}

func addScaled(sum, v Vector, sign int64) {
	for k, n := range v {
		sum[k] += sign * n
	}
}

// positive returns max(0, a − b) per dimension of a; nil when that is 0
// in every one.
func positive(a, b Vector) Vector {
	var out Vector
	for k, n := range a {
		if d := n - b[k]; d > 0 {
			if out == nil {
				out = Vector{}
			}
			out[k] = d
		}
	}
	return out
}
