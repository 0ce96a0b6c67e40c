package queuepolicy

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// busyCluster is the benchmarks' cluster: 100 nodes of 32 cpu, three
// capacity queues, and 3000 gangs of one pod of one cpu spread over them,
// the even ones bound. It returns the plugin and the pending pods.
func busyCluster(b *testing.B) (*Plugin, []*v1.Pod) {
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
	return pl, pending
}

// checkAllocated fails b unless the top-level queues are allocated the
// 1500 bound pods plus the reserved ones, in millicpu: the benchmarks must
// measure an accounting that is right.
func checkAllocated(b *testing.B, snap *queue.Snapshot, reserved int) {
	b.Helper()
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

// BenchmarkRefresh is the accounting's cost per scheduling cycle on a busy
// cluster (busyCluster), with one gang changed since the last refresh, as
// a Reserve leaves it: the pending pods are reserved in turn, then
// unreserved.
func BenchmarkRefresh(b *testing.B) {
	pl, pending := busyCluster(b)
	b.ReportAllocs()
	reserved := 0
	var snap *queue.Snapshot
	for i := 0; b.Loop(); i++ {
		p := pending[i%len(pending)]
		key, _ := gang.KeyOf(p)
		if i/len(pending)%2 == 0 {
			pl.gangs.Reserve(key, p.UID, "node-0", time.Now())
			reserved++
		} else {
			pl.gangs.Unreserve(key, p.UID)
			reserved--
		}
		snap = pl.state.Refresh()
	}
	checkAllocated(b, snap, reserved)
}

// BenchmarkPreFilter is the queue plugin's share of one scheduling cycle on
// a busy cluster (busyCluster): PreFilter of a pending pod (the refresh,
// admission and the ceiling), then its Reserve, which the next cycle's
// refresh takes in. Once every pending pod is reserved, the reservations
// are undone with the timer stopped.
func BenchmarkPreFilter(b *testing.B) {
	pl, pending := busyCluster(b)
	ctx := b.Context()
	b.ReportAllocs()
	reserved := 0
	for i := 0; b.Loop(); i++ {
		if reserved == len(pending) {
			b.StopTimer()
			for _, p := range pending {
				key, _ := gang.KeyOf(p)
				pl.gangs.Unreserve(key, p.UID)
			}
			reserved = 0
			pl.state.Refresh()
			b.StartTimer()
		}
		p := pending[i%len(pending)]
		if _, s := pl.PreFilter(ctx, framework.NewCycleState(), p, nil); s.Code() != fwk.Skip {
			b.Fatalf("PreFilter(%s) = %v, want it admitted (Skip)", p.Name, s)
		}
		key, _ := gang.KeyOf(p)
		pl.gangs.Reserve(key, p.UID, "node-0", time.Now())
		reserved++
	}
	checkAllocated(b, pl.state.Refresh(), reserved)
}

// BenchmarkQueueOrder is what QueueSort does to compare two pending pods of
// different gangs on a busy cluster (busyCluster) when it keeps nothing
// between comparisons: read both gangs' positions, their queues and
// projected shares, and order them. The scheduling queue compares about 20
// times per pod it pops.
func BenchmarkQueueOrder(b *testing.B) {
	pl, pending := busyCluster(b)
	pl.state.Refresh()
	keys := make([]gang.Key, len(pending))
	for i, p := range pending {
		keys[i], _ = gang.KeyOf(p)
	}
	snap := pl.state.Last()
	b.ReportAllocs()
	less := 0
	for i := 0; b.Loop(); i++ {
		x, y := i%len(pending), (i*7+13)%len(pending)
		if x == y {
			continue
		}
		pa := pl.gangs.Position(keys[x], pending[x].UID, true)
		pb := pl.gangs.Position(keys[y], pending[y].UID, true)
		qa, qb := snap.Queues[queue.QueueOf(pa.Status)], snap.Queues[queue.QueueOf(pb.Status)]
		if l, _ := queue.Order(qa, qb, pl.state.Project(&pa), pl.state.Project(&pb)); l {
			less++
		}
	}
	if less == 0 {
		b.Fatal("no pod ordered before another: the comparisons did not look at the gangs")
	}
}
