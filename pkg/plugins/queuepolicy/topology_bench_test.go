package queuepolicy

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// BenchmarkVictimsByDomain is the cost of choosing victims for a gang that
// needs a whole rack, on 16 racks of four 8-cpu nodes that queue a fills
// with 256 gangs of one 2-cpu pod: every rack can take the gang once its
// 16 pods go, so every rack is tried. "anywhere" is the same gang with no
// topology constraint, for comparison. Racks of queue c's pods, which
// reclaim may not take, are pruned before any trial: "half pruned".
func BenchmarkVictimsByDomain(b *testing.B) {
	for _, bc := range []struct {
		name     string
		required bool
		// guardedRacks are the racks whose pods are queue c's.
		guardedRacks int
	}{
		{name: "required rack", required: true},
		{name: "required rack, half pruned", required: true, guardedRacks: 8},
		{name: "anywhere"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := testCluster{queues: []*v1alpha1.Queue{
				capacityQueue("a", "0", ""), capacityQueue("b", "", ""), notReclaimable(capacityQueue("c", "0", "")),
			}}
			for r := range 16 {
				for n := range 4 {
					name := fmt.Sprintf("r%d-%d", r, n)
					c.nodes = append(c.nodes, inRack(node(name, "8"), fmt.Sprintf("r%d", r)))
					q := "a"
					if r < bc.guardedRacks {
						q = "c"
					}
					for i := range 4 {
						c.pods = append(c.pods, testGang{name: fmt.Sprintf("%s-%d", name, i), queue: q, minMember: 1, cpu: "2"}.pods(name)...)
					}
				}
			}
			p := testGang{name: "p", queue: "b", minMember: 4, cpu: "8", required: v1alpha1.LabelRack}
			members := p.pods("", "", "", "")
			c.pods = append(c.pods, members...)
			ctx, pl, snap := newTestPlugin(b, c, false)
			if !bc.required {
				pl.topology = func(*gang.Status) ([]string, string) { return nil, "" }
			}
			st := pl.gangs.Status(p.key())
			need := requestsOf(members)
			b.ResetTimer()
			for range b.N {
				units := pl.candidates(snap, st.Key, queue.QueueOf(&st), 0, need, false, true)
				victims, _, err := pl.victimsFor(ctx, snap, pl.records.inFlight(), members, units, &st, need, nil)
				if err != nil {
					b.Fatal(err)
				}
				if pods := podsIn(victims); len(pods) != 16 {
					b.Fatalf("%d victims, want a rack's 16 pods", len(pods))
				}
			}
		})
	}
}

// podsIn lists the units' pods.
func podsIn(us []unit) []*v1.Pod {
	var out []*v1.Pod
	for _, u := range us {
		out = append(out, u.pods...)
	}
	return out
}
