package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Reclaim for a gang whose members must share a rack: the victims are all
// in one rack, the one where the fewest pods go, and nothing is evicted
// in a rack the gang cannot use but the rest of a gang spread over two.

// podsOn creates n pods of one (a queue, no gang) named <prefix>-<i>,
// requesting cpu and kept where the node selector says.
func (e *env) podsOn(queue, prefix string, n int, cpu string, selector map[string]string) []string {
	e.t.Helper()
	names := names(prefix, n)
	for _, name := range names {
		p := e.member(name, cpu, map[string]string{v1alpha1.LabelQueue: queue})
		p.Spec.NodeSelector = selector
		e.create(p)
	}
	return names
}

// TestReclaimWithinOneRack: two racks, r1 and r2, of two 4-cpu nodes each,
// filled by queue qa above its deserved share; qb's gang needs a whole
// rack (two 4-cpu members, rack required). Reclaim evicts within the rack
// where the fewest pods go, then the one whose victims come first in
// reclaim's order (pods of one by name), and nothing in the other rack
// unless a gang spread over both must go whole to open one; the gang
// binds in the rack it emptied.
func TestReclaimWithinOneRack(t *testing.T) {
	rack := func(r string) map[string]string { return map[string]string{v1alpha1.LabelRack: r} }
	host := func(n string) map[string]string { return map[string]string{v1.LabelHostname: n} }
	tests := []struct {
		name string
		// fill creates qa's pods and returns those reclaim must evict and
		// those it must keep.
		fill func(e *env) (evicted, kept []string)
		// rack is where the gang binds.
		rack string
	}{
		{
			// r2's pods come first in reclaim's order: taken in order,
			// the victims would be r2's four.
			name: "r1's two pods, not r2's four",
			fill: func(e *env) ([]string, []string) {
				return e.podsOn("qa", "z", 2, "4", rack("r1")), e.podsOn("qa", "a", 4, "2", rack("r2"))
			},
			rack: "r1",
		},
		{
			// One pod on each node, in reclaim's order r1, r2, r1, r2:
			// taken in order, the first two would free a node in each
			// rack, which fits the gang in neither.
			name: "never one pod in each rack",
			fill: func(e *env) ([]string, []string) {
				var inR1, inR2 []string
				for i, n := range []string{"r1-0", "r2-0", "r1-1", "r2-1"} {
					p := e.podsOn("qa", fmt.Sprintf("a%d", i), 1, "4", host(n))
					if strings.HasPrefix(n, "r1") {
						inR1 = append(inR1, p...)
					} else {
						inR2 = append(inR2, p...)
					}
				}
				return inR1, inR2
			},
			rack: "r1",
		},
		{
			// Gang x holds r1-0 and r2-0, and z r1-1: no rack opens
			// without x, which goes whole; r2 then needs nothing else.
			name: "a gang spread over both racks, whole",
			fill: func(e *env) ([]string, []string) {
				x := names("x", 2)
				for i, n := range []string{"r1-0", "r2-0"} {
					p := e.member(x[i], "4", map[string]string{v1alpha1.LabelQueue: "qa", v1alpha1.LabelPodGroup: "x", v1alpha1.LabelMinAvailable: "2"})
					p.Spec.NodeSelector = host(n)
					e.create(p)
				}
				return x, e.podsOn("qa", "z", 1, "4", host("r1-1"))
			},
			rack: "r2",
		},
	}
	for _, kind := range queueKinds {
		for _, tc := range tests {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t)
				for _, r := range []string{"r1", "r2"} {
					e.nodes(r, 2, simulator.NodeShape{CPU: "4", Memory: "16Gi", Labels: rack(r)})
				}
				e.queueOf(kind, "qa", v1alpha1.QueueSpec{Weight: 1, Deserved: res("cpu", "2")})
				e.queueOf(kind, "qb", v1alpha1.QueueSpec{Weight: 1, Deserved: res("cpu", "8")})
				e.startScheduler(capacityConfigFor(t, kind))
				evicted, kept := tc.fill(e)
				e.waitBound(append(evicted, kept...)...)

				e.podGroup("b", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "qb",
					Topology: &v1alpha1.TopologySpec{Required: v1alpha1.LabelRack}})
				b := names("b", 2)
				for _, name := range b {
					e.create(e.member(name, "4", map[string]string{v1alpha1.LabelPodGroup: "b", v1alpha1.LabelQueue: "qb"}))
				}
				placed := e.waitBoundWithin(20*time.Second, b...)
				for _, name := range b {
					if !strings.HasPrefix(placed[name], tc.rack+"-") {
						t.Errorf("member %s bound to %s; want a node of rack %s", name, placed[name], tc.rack)
					}
				}
				e.waitSettled(time.Second)
				left := e.podNames()
				if n := missing(left, evicted); n != len(evicted) {
					t.Errorf("evicted %d of %v; want all %d", n, evicted, len(evicted))
				}
				if n := missing(left, kept); n != 0 {
					t.Errorf("evicted %d of %v; want none", n, kept)
				}
				e.waitEvent(evicted[0], "Reclaimed", fmt.Sprintf("to give queue qb its deserved share (gang %s/b)", e.ns))
			})
		}
	}
}
