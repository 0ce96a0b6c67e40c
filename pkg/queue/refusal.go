package queue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/muster-sched/muster/pkg/gang"
)

// Refusal says why the gang's queue would not admit it now, recording
// nothing: what Decide says of a gang not admitted yet, for the queue
// status controller (Decide records admissions: only a scheduling cycle
// may call it). why and reason are "" for a gang admitted, admissible, or
// not yet accounted.
func (s *State) Refusal(st *gang.Status, snap *Snapshot) (why, reason string) {
	g := snap.Gang(st.Key)
	if g == nil || g.Admitted {
		return "", ""
	}
	if ok, why, reason := s.admissible(snap, st.Key.Namespace, g.Queue, g.MinResources, false); !ok {
		return why, reason
	}
	return "", ""
}

// Shut says why the queue admits no gang, whatever the gangs ask for: it
// is Invalid (ReasonQueueInvalid), has child queues (ReasonNotLeaf), or it
// or a queue above it is closed (ReasonQueueClosed); "" when none of these
// holds, or the queue is not known.
func (snap *Snapshot) Shut(name string) (reason, why string) {
	chain := snap.ancestry(name)
	if len(chain) == 0 {
		return "", ""
	}
	leaf := chain[0]
	switch {
	case leaf.Invalid != "":
		return ReasonQueueInvalid, leaf.Invalid
	case !leaf.IsLeaf():
		children := slices.Sorted(slices.Values(leaf.Children))
		return ReasonNotLeaf, fmt.Sprintf("it has child queues (%s); gangs belong in leaf queues", strings.Join(children, ", "))
	}
	for _, f := range chain {
		if f.Closed {
			return ReasonQueueClosed, fmt.Sprintf("queue %s is closed", f.Name)
		}
	}
	return "", ""
}
