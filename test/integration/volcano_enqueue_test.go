package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestVolcanoEnqueueReserves: an enqueued PodGroup's queue holds its
// minResources for the pods to come, as Volcano's enqueue reserves them:
// PodGroups created together are enqueued only as far as the queue's
// realCapability takes their minimums, the reservation outlives a change
// of scheduler (it is the PodGroup's phase, in the apiserver), and it is
// given back when the PodGroup goes.
func TestVolcanoEnqueueReserves(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.queueOf(volcanoQueue, "team", v1alpha1.QueueSpec{Capability: res("cpu", "8")})
	s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(volcanoConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	// Six jobs of 4 cpu at once: two fit the queue's 8.
	groups := []string{"a", "b", "c", "d", "e", "f"}
	var created sync.WaitGroup
	for _, name := range groups {
		created.Go(func() { e.volcanoPodGroup(name, "team", 2, "4") })
	}
	created.Wait()
	var enqueued, pending []string
	e.waitVolcanoPhases(groups, "two Inqueue, four Pending", func(phases map[string]vcv1beta1.PodGroupPhase) bool {
		enqueued, pending = nil, nil
		for _, name := range groups {
			switch phases[name] {
			case vcv1beta1.PodGroupInqueue:
				enqueued = append(enqueued, name)
			case vcv1beta1.PodGroupPending:
				pending = append(pending, name)
			}
		}
		return len(enqueued) == 2 && len(pending) == 4
	})
	e.waitVolcanoQueue("team", "two PodGroups inqueue, four pending", func(st *vcv1beta1.QueueStatus) bool {
		return st.Inqueue == 2 && st.Pending == 4
	})
	// And it stays so: no third was enqueued on figures that missed the
	// first two.
	for _, name := range pending {
		e.staysVolcanoPhase(name, vcv1beta1.PodGroupPending, 200*time.Millisecond)
	}
	e.waitVolcanoPodGroup(pending[0], "refused for the reservations", func(st *vcv1beta1.PodGroupStatus) bool {
		for _, c := range st.Conditions {
			if c.Type == vcv1beta1.PodGroupUnschedulableType && strings.Contains(c.Message, "queue team: cpu 8 allocated+inqueue of 8 realCapability") {
				return true
			}
		}
		return false
	})

	// A successor reads the reservations from the PodGroups' phases.
	s.Stop()
	e.startScheduler(volcanoConfig(t))
	e.staysVolcanoPhase(pending[0], vcv1beta1.PodGroupPending, 2*time.Second)

	// The first job's pods come and run: its reservation becomes what
	// they hold, and the queue is still full.
	members := e.volcanoMembers(enqueued[0], 2, "2")
	e.waitBound(members...)
	e.waitVolcanoPodGroup(enqueued[0], "Running", func(st *vcv1beta1.PodGroupStatus) bool {
		return st.Phase == vcv1beta1.PodGroupRunning
	})
	e.staysVolcanoPhase(pending[0], vcv1beta1.PodGroupPending, time.Second)

	// The second enqueued job is deleted before its pods came: what it
	// reserved is given back, and one of the others is enqueued.
	if err := volcanoClient(t).SchedulingV1beta1().PodGroups(e.ns).Delete(e.ctx, enqueued[1], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVolcanoPhases(pending, "one Inqueue once the reservation is given back", func(phases map[string]vcv1beta1.PodGroupPhase) bool {
		n := 0
		for _, p := range phases {
			if p == vcv1beta1.PodGroupInqueue {
				n++
			}
		}
		return n == 1
	})
}

// waitVolcanoPhases waits until the phases of the Volcano PodGroups
// satisfy ok.
func (e *env) waitVolcanoPhases(names []string, what string, ok func(map[string]vcv1beta1.PodGroupPhase) bool) {
	e.t.Helper()
	phases := map[string]vcv1beta1.PodGroupPhase{}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range names {
			pg, err := volcanoClient(e.t).SchedulingV1beta1().PodGroups(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			phases[name] = pg.Status.Phase
		}
		if ok(phases) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("Volcano PodGroups: want %s; phases are %v", what, phases)
}

// staysVolcanoPhase fails the case if the Volcano PodGroup leaves phase
// within d.
func (e *env) staysVolcanoPhase(name string, phase vcv1beta1.PodGroupPhase, d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, d)
	defer cancel()
	for ctx.Err() == nil {
		pg, err := volcanoClient(e.t).SchedulingV1beta1().PodGroups(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if pg.Status.Phase != phase {
			e.t.Fatalf("Volcano PodGroup %s is %s, want it to stay %s: %s", name, pg.Status.Phase, phase, fmt.Sprint(pg.Status.Conditions))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
