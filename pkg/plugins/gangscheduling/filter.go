package gangscheduling

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/requests"
)

// promisedKey holds, for one cycle, the room live plans promise on each
// node to gangs other than the pod's, and the room the pod takes.
const promisedKey fwk.StateKey = Name + "/promised"

type promisedState struct {
	room     gang.Room
	promised map[string]gang.Room
}

// Clone returns s: it is not changed after PreFilter.
func (s *promisedState) Clone() fwk.StateData { return s }

// readPromises writes into the cycle state, for Filter, the room that the
// plans of gangs other than key (the zero Key for a pod in no gang)
// promise. It returns what a PreFilter with nothing else to do returns:
// Skip when nothing is promised, so that Filter costs the pod nothing.
func (pl *Plugin) readPromises(state fwk.CycleState, pod *v1.Pod, key gang.Key, now time.Time) *fwk.Status {
	promised := pl.manager.Promised(key, now)
	if promised == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	room := gang.RoomOf(requests.Of(pod))
	state.Write(promisedKey, &promisedState{room: room, promised: promised})
	return nil
}

// Filter keeps a pod off the room that other gangs' live plans promise
// their members on the node: a plan is made for the whole gang before its
// members are scheduled one by one, and other pods may be scheduled in
// between.
func (pl *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, n fwk.NodeInfo) *fwk.Status {
	c, err := state.Read(promisedKey)
	if err != nil {
		return nil
	}
	s := c.(*promisedState)
	promised, ok := s.promised[n.Node().Name]
	if !ok || s.room.FitsBeside(promised, n) {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, "the node's free room is promised to a gang being placed")
}
