package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// TestPromised checks the room plans promise, by node, through a plan's
// life: made, partly reserved, replaced, dropped, refused, used up,
// released, expired, and a planned member deleted.
func TestPromised(t *testing.T) {
	m := newTestManager(t)
	g, other := Key{FamilyMuster, "ns", "g"}, Key{FamilyMuster, "ns", "other"}
	var members []*v1.Pod
	for _, name := range []string{"a", "b", "c"} {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "2", "example.com/gpu": "1"}).
			Label(v1alpha1.LabelPodGroup, "g").Label(v1alpha1.LabelMinAvailable, "3").Obj()
		m.Observe(p)
		members = append(members, p)
	}
	m.Observe(st.MakePod().Namespace("ns").Name("x").UID("x").Req(map[v1.ResourceName]string{v1.ResourceMemory: "1Gi"}).
		Label(v1alpha1.LabelPodGroup, "other").Label(v1alpha1.LabelMinAvailable, "1").Obj())
	room := func(pods, cpu int64, gpu int64) Room {
		r := Room{Pods: pods, MilliCPU: cpu}
		if gpu > 0 {
			r.Scalar = map[v1.ResourceName]int64{"example.com/gpu": gpu}
		}
		return r
	}
	plan := map[types.UID]string{"a": "n1", "b": "n1", "c": "n2"}
	all := map[string]Room{"n1": room(2, 4000, 2), "n2": room(1, 2000, 1)}
	now := time.Now()
	for _, step := range []struct {
		name   string
		do     func()
		at     time.Duration
		except Key
		want   map[string]Room
	}{
		{name: "planned", do: func() { m.SetPlan(g, plan, nil, nil, now) }, want: all},
		{name: "the gang itself", except: g, want: nil},
		{name: "another gang", except: other, want: all},
		{name: "one reserved", do: func() { m.Reserve(g, "a", "n1", now) }, want: map[string]Room{"n1": room(1, 2000, 1), "n2": room(1, 2000, 1)}},
		{name: "replaced", do: func() { m.SetPlan(g, map[types.UID]string{"b": "n3"}, nil, nil, now) }, want: map[string]Room{"n3": room(1, 2000, 1)}},
		{name: "dropped", do: func() { m.DropPlan(g) }, want: nil},
		{name: "refused", do: func() { m.SetPlan(g, plan, nil, nil, now); m.RecordFailure(g, "no room", now) }, want: nil},
		{name: "used up", do: func() {
			m.Unreserve(g, "a")
			m.SetPlan(g, plan, nil, nil, now)
			for _, p := range members {
				m.Reserve(g, p.UID, plan[p.UID], now)
			}
		}, want: nil},
		{name: "released", do: func() {
			m.Unreserve(g, "a")
			m.Unreserve(g, "b")
			m.Unreserve(g, "c")
			m.SetPlan(g, plan, nil, nil, now)
			m.Reserve(g, "a", "n1", now)
			m.Unreserve(g, "a")
		}, want: nil},
		{name: "no progress for the TTL", do: func() { m.SetPlan(g, plan, nil, nil, now) }, at: PlanTTL + time.Second, want: nil},
		{name: "planned again, within the TTL", do: func() { m.SetPlan(g, plan, nil, nil, now) }, at: PlanTTL - time.Second, want: all},
		{name: "a planned member deleted", do: func() { m.unlistPod(members[2]) }, want: nil},
		{name: "a plan in the making", do: func() {
			m.Observe(members[2])
			m.SetPlan(g, map[types.UID]string{"a": "n1"}, nil, members[1:], now)
		}, want: map[string]Room{"n1": room(1, 2000, 1)}},
		{name: "a member still to be planned deleted", do: func() { m.unlistPod(members[2]) }, want: nil},
		{name: "a gated member", do: func() {
			gated := st.MakePod().Namespace("ns").Name("d").UID("d").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).
				Label(v1alpha1.LabelPodGroup, "g").Label(v1alpha1.LabelMinAvailable, "3").SchedulingGates([]string{"example.com/hold"}).Obj()
			m.Observe(gated)
			m.SetPlan(g, map[types.UID]string{"a": "n1", "d": "n4"}, nil, nil, now)
		}, want: map[string]Room{"n1": room(1, 2000, 1)}},
	} {
		if step.do != nil {
			step.do()
		}
		if diff := cmp.Diff(step.want, m.Promised(step.except, now.Add(step.at))); diff != "" {
			t.Errorf("%s: Promised (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestFitsBeside(t *testing.T) {
	node := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourcePods: "4", "example.com/gpu": "4"}).Obj()
	running := st.MakePod().Name("running").Node("n").Req(map[v1.ResourceName]string{v1.ResourceCPU: "3", "example.com/gpu": "1"}).Obj()
	gpus := func(n int64) map[v1.ResourceName]int64 { return map[v1.ResourceName]int64{"example.com/gpu": n} }
	for _, tc := range []struct {
		name     string
		pod      Room
		promised Room
		want     bool
	}{
		{"nothing promised", Room{Pods: 1, MilliCPU: 5000}, Room{}, true},
		{"fits beside the promise", Room{Pods: 1, MilliCPU: 2000}, Room{Pods: 1, MilliCPU: 3000}, true},
		{"cpu promised", Room{Pods: 1, MilliCPU: 2001}, Room{Pods: 1, MilliCPU: 3000}, false},
		{"a pod requesting no cpu", Room{Pods: 1}, Room{Pods: 1, MilliCPU: 5000}, true},
		{"pod count promised", Room{Pods: 1}, Room{Pods: 3}, false},
		{"gpus promised", Room{Pods: 1, Scalar: gpus(2)}, Room{Pods: 1, Scalar: gpus(2)}, false},
		{"gpus left", Room{Pods: 1, Scalar: gpus(1)}, Room{Pods: 1, Scalar: gpus(2)}, true},
		{"a resource nothing promises is left to NodeResourcesFit", Room{Pods: 1, Scalar: gpus(9)}, Room{Pods: 1, MilliCPU: 1000}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := framework.NewNodeInfo(running)
			n.SetNode(node)
			if got := tc.pod.FitsBeside(tc.promised, n); got != tc.want {
				t.Errorf("FitsBeside = %v, want %v", got, tc.want)
			}
		})
	}
}
