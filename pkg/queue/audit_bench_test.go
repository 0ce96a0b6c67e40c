package queue

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// BenchmarkAudit audits the accounting of a cluster of 5,000 nodes and
// 50,000 bound pods: 40,000 in 5,000 gangs of 8 over 10 queues, 10,000 in
// no gang and no queue. The audit runs every 30 s by default, holding the
// accounting's locks throughout: its time per op, over 30 s, is the share
// of a core it takes and the share of scheduling it stalls.
func BenchmarkAudit(b *testing.B) {
	const nodes, gangs, members, plain, queues = 5000, 5000, 8, 10000, 10
	var ns []*v1.Node
	for i := range nodes {
		ns = append(ns, readyNode(fmt.Sprintf("n%d", i), "32"))
	}
	var qs []*v1alpha1.Queue
	for i := range queues {
		name := fmt.Sprintf("q%d", i)
		qs = append(qs, &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: v1alpha1.QueueSpec{Weight: 1}})
	}
	var pods []*v1.Pod
	node := 0
	next := func() string { node = (node + 1) % nodes; return fmt.Sprintf("n%d", node) }
	for g := range gangs {
		for m := range members {
			p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("g%d-%d", g, m)).UID(fmt.Sprintf("g%d-%d", g, m)).
				Label(v1alpha1.LabelPodGroup, fmt.Sprintf("g%d", g)).
				Label(v1alpha1.LabelMinAvailable, fmt.Sprint(members)).
				Label(v1alpha1.LabelQueue, fmt.Sprintf("q%d", g%queues)).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Node(next()).Obj()
			p.Status.Phase = v1.PodRunning
			pods = append(pods, p)
		}
	}
	for i := range plain {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("p%d", i)).UID(fmt.Sprintf("p%d", i)).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "500m"}).Node(next()).Obj()
		p.Status.Phase = v1.PodRunning
		pods = append(pods, p)
	}
	f := newFixture(b, ns, qs, pods)
	logger := klog.Background()
	if d, err := f.state.Audit(logger); err != nil || !d.Empty() {
		b.Fatalf("first audit: %+v, %v", d, err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := f.state.Audit(logger); err != nil {
			b.Fatal(err)
		}
	}
}
