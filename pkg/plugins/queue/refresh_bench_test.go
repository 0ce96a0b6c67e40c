package queue

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// BenchmarkRefresh is the accounting's cost per scheduling cycle on a busy
// cluster: 100 nodes, three queues, 3000 gangs of one (half of them bound),
// and one gang changed since the last refresh, as a Reserve leaves it.
func BenchmarkRefresh(b *testing.B) {
	c := testCluster{queues: []*v1alpha1.Queue{
		capacityQueue("team-a", "800", ""), capacityQueue("team-b", "800", ""), capacityQueue("team-c", "1600", ""),
	}}
	for i := range 100 {
		c.nodes = append(c.nodes, node(fmt.Sprintf("node-%d", i), "32"))
	}
	var pending []*v1.Pod
	for i := range 3000 {
		g := testGang{name: fmt.Sprintf("g-%d", i), queue: []string{"team-a", "team-b", "team-c"}[i%3], minMember: 1, cpu: "1"}
		n := ""
		if i%2 == 0 {
			n = fmt.Sprintf("node-%d", i%100)
		}
		p := g.pods(n)[0]
		c.pods = append(c.pods, p)
		if n == "" {
			pending = append(pending, p)
		}
	}
	_, pl, _ := newTestPlugin(b, c, false)
	b.ReportAllocs()
	reserved := 0
	var snap *queue.Snapshot
	for i := 0; b.Loop(); i++ {
		p := pending[i%len(pending)]
		key, _ := gang.KeyOf(p)
		if i/len(pending)%2 == 0 {
			pl.gangs.Reserve(key, p.UID, "node-0")
			reserved++
		} else {
			pl.gangs.Unreserve(key, p.UID)
			reserved--
		}
		snap = pl.state.Refresh()
	}
	var allocated int64
	for _, f := range snap.Queues {
		if f.Parent == "" {
			allocated += f.Allocated[v1.ResourceCPU]
		}
	}
	if want := int64(1500+reserved) * 1000; allocated != want {
		b.Fatalf("the queues are allocated %d millicpu, want %d (1500 bound pods and %d reserved)", allocated, want, reserved)
	}
}
