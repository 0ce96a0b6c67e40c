package queue

import "github.com/muster-sched/muster/pkg/gang"

// Lending (Proportion; docs/design-notes.md, "Room no queue can claim is
// lent"): a reclaimable queue may place beyond its deserved share, up to
// its realCapability, on the room left once every other queue's claim is
// set aside. A queue's claim is min(deserved, request) − allocated −
// inqueue, counted while one of its gangs could use it: not blocked
// (State.Block) and needing no more than that (GangFigures.Next).

// lending is what a snapshot lends from: room not held or admitted, and
// each leaf queue's claim on it.
type lending struct {
	free   Vector
	claims map[string]Vector
}

// lendEntry is a lending with the State version it was computed at.
type lendEntry struct {
	version uint64
	l       *lending
}

// lend returns the snapshot's lending, computed once per State version:
// under contention most scheduling cycles refresh without a change, and
// computing it ranges over every gang.
func (snap *Snapshot) lend() *lending {
	snap.lendingOnce.Do(func() {
		cache := &snap.state.lendCache
		if e := cache.Load(); e != nil && e.version == snap.version {
			snap.lending = e.l
			return
		}
		snap.lending = snap.computeLending()
		cache.Store(&lendEntry{version: snap.version, l: snap.lending})
	})
	return snap.lending
}

func (snap *Snapshot) computeLending() *lending {
	l := &lending{free: snap.Total.Clone(), claims: map[string]Vector{}}
	rooms := map[string]Vector{}
	for name, f := range snap.Queues {
		if !f.IsLeaf() || f.Invalid != "" {
			continue
		}
		l.free.Sub(f.Allocated)
		l.free.Sub(f.Inqueue)
		if !snap.admits(name) {
			continue
		}
		want := Vector{}
		for k, d := range f.Deserved {
			want[k] = min(d, f.Request[k])
		}
		committed := f.Allocated.Clone()
		committed.Add(f.Inqueue)
		if room := positive(want, committed); room != nil {
			rooms[name] = room
		}
	}
	snap.RangeGangs(func(key gang.Key, g *GangFigures) bool {
		room, ok := rooms[g.Queue]
		if ok && !g.Blocked && g.Next != nil && fitsIn(g.Next, room) && snap.permits(key.Namespace, g.Queue) {
			l.claims[g.Queue] = room
			delete(rooms, g.Queue)
		}
		return len(rooms) > 0
	})
	return l
}

// admits reports whether the queue and every ancestor are open and valid.
func (snap *Snapshot) admits(name string) bool {
	chain := snap.ancestry(name)
	if len(chain) == 0 {
		return false
	}
	for _, f := range chain {
		if f.Closed || f.Invalid != "" {
			return false
		}
	}
	return true
}

// Unclaimed is the room that no queue holds, has admitted, or claims:
// what Lends lends, to whichever queue asks first.
func (snap *Snapshot) Unclaimed() Vector {
	l := snap.lend()
	out := l.free.Clone()
	for _, c := range l.claims {
		out.Sub(c)
	}
	return out
}

// Lends reports whether the queue may place need beyond its ceiling on
// lent room (Proportion only): the queue is an open, reclaimable leaf,
// need fits the realCapability of the queue and every ancestor over what
// each holds (base: Allocated, or for admission Allocated + Inqueue −
// Elastic), and need is at most the room left once every other queue's
// claim is set aside, plus held: the part of need already admitted to
// the gang (the rest of an admitted gang's minimum, in its queue's
// inqueue).
func (snap *Snapshot) Lends(queue string, need, held Vector, admission bool) bool {
	if snap.Policy != Proportion || !snap.admits(queue) {
		return false
	}
	chain := snap.ancestry(queue)
	if !chain[0].Reclaimable || !chain[0].IsLeaf() {
		return false // what it held above its share could not be taken back
	}
	for _, f := range chain {
		base := f.Allocated.Clone()
		if admission {
			base.Add(f.Inqueue)
			base.Sub(f.Elastic)
		}
		for k, n := range need {
			if n > 0 && base[k]+n > f.RealCapability[k] {
				return false // only the resources it asks for limit it
			}
		}
	}
	l := snap.lend()
	room := l.free.Clone()
	room.Add(held)
	for q, c := range l.claims {
		if q != queue {
			room.Sub(c)
		}
	}
	return fitsIn(need, room)
}

// FitsIn reports whether v ≤ limit in every dimension where v > 0, a
// dimension limit does not name having none (Vector.Fits: unlimited).
func FitsIn(v, limit Vector) bool { return fitsIn(v, limit) }

// fitsIn is FitsIn.
func fitsIn(v, limit Vector) bool {
	for k, n := range v {
		if n > 0 && n > limit[k] {
			return false
		}
	}
	return true
}

// nextNeed is the least a gang must be given to move on: before it is
// admitted, the rest of its minimum; after, its average pending member
// (the members of most gangs are alike). nil when nothing is pending, or
// the gang cannot be placed as it is.
func nextNeed(st *gang.Status, admitted bool) Vector {
	pending := int64(st.Live - st.Placed)
	if pending <= 0 || len(st.Pending) == 0 || st.Invalid != "" {
		return nil // an invalid gang (too few members, say) is not placed
	}
	if !admitted {
		if rest := positive(FromList(st.MinResources), FromList(st.Allocated)); rest != nil {
			return rest
		}
	}
	v := FromList(st.Pending)
	for k, n := range v {
		v[k] = (n + pending - 1) / pending
	}
	return v
}
