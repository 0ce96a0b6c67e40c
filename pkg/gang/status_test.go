package gang

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// BenchmarkStatus is the cost of a gang's status read after each change
// of one member, in a gang of 1, 16 and 5,000 members with half of them
// reserved. A reservation changes the running sums alone; a label change
// moves the gang's shape, which is resolved again from every member: the
// difference is what keeping the shape saves each scheduling cycle of a
// member.
func BenchmarkStatus(b *testing.B) {
	for _, size := range []int{1, 16, 5000} {
		m, key, pods := benchGang(b, size)
		b.Run(fmt.Sprintf("members=%d/after-reserve", size), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				uid := pods[i%size].UID
				if i++; i%2 == 1 {
					m.Reserve(key, uid, "n", time.Time{})
				} else {
					m.Unreserve(key, uid)
				}
				if s := m.Status(key); s.Invalid != "" {
					b.Fatalf("status %+v", s)
				}
			}
		})
		b.Run(fmt.Sprintf("members=%d/after-label", size), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := pods[i%size].DeepCopy()
				p.Labels["bench"] = fmt.Sprint(i)
				i++
				m.Observe(p)
				if s := m.Status(key); s.Invalid != "" {
					b.Fatalf("status %+v", s)
				}
			}
		})
	}
}

// benchGang is a Manager holding one gang of size members of 1 cpu and
// 2Gi, every other one reserved.
func benchGang(tb testing.TB, size int) (*Manager, Key, []*v1.Pod) {
	m := newTestManager(tb)
	key := Key{FamilyMuster, "ns", "g"}
	var pods []*v1.Pod
	for i := range size {
		name := fmt.Sprintf("p-%d", i)
		p := st.MakePod().Namespace("ns").Name(name).UID(name).
			Labels(map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: fmt.Sprint(size)}).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Obj()
		m.Observe(p)
		if i%2 == 1 {
			m.Reserve(key, p.UID, "n", time.Time{})
		}
		pods = append(pods, p)
	}
	return m, key, pods
}

// TestStatusAgreesWithRecount: after every change of a member (its pod,
// its reservation, its leaving), a gang's status, kept as running sums,
// equals its status counted afresh from its members.
func TestStatusAgreesWithRecount(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 0))
		m := newTestManager(t)
		key := Key{FamilyMuster, "ns", "g"}
		if seed%2 == 1 {
			// A PodGroup with a role's minimum: statuses count by role.
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
				Spec: v1alpha1.PodGroupSpec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 1}}}
			if err := m.pgStore.Add(pg); err != nil {
				t.Fatal(err)
			}
		}
		pick := func(values ...string) string { return values[rng.IntN(len(values))] }
		var prev, prevCopy Status // the status read at the step before
		for step := range 200 {
			name := pick("a", "b", "c", "d", "e", "f")
			uid := types.UID(name)
			var what string
			switch r := rng.IntN(10); {
			case r < 6:
				p := st.MakePod().Namespace("ns").Name(name).UID(name).
					Label(v1alpha1.LabelMinAvailable, pick("2", "3")).
					Priority(int32(rng.IntN(2) * 5)).
					Req(map[v1.ResourceName]string{v1.ResourceCPU: pick("0", "500m", "1", "1.0000000001")}).Obj()
				if pick("in", "in", "in", "in", "out") == "in" {
					p.Labels[v1alpha1.LabelPodGroup] = "g"
				}
				if role := pick("", "ps", "worker"); role != "" {
					p.Labels[v1alpha1.LabelRole] = role
				}
				p.Spec.NodeName = pick("", "", "n")
				p.Status.Phase = v1.PodPhase(pick("Pending", "Running", "Succeeded", "Failed"))
				if pick("", "", "", "deleting") != "" {
					p.DeletionTimestamp = &metav1.Time{}
				}
				m.Observe(p)
				what = fmt.Sprintf("observe %s %v on %q %s deleting=%v", name, p.Labels, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
			case r < 7:
				m.deletePod(member(name, nil))
				what = "delete " + name
			case r < 9:
				m.Reserve(key, uid, "n", time.Time{})
				what = "reserve " + name
			default:
				m.Unreserve(key, uid)
				what = "unreserve " + name
			}
			if diff := cmp.Diff(prevCopy, prev, statusCompare...); diff != "" {
				t.Fatalf("seed %d step %d, after %s: the status handed out before changed (-then +now):\n%s", seed, step, what, diff)
			}
			m.mu.RLock()
			got, want := m.statusLocked(key, m.groups[key]), recount(m, key)
			m.mu.RUnlock()
			if diff := cmp.Diff(want, got, statusCompare...); diff != "" {
				t.Fatalf("seed %d step %d, after %s: status (-recount +kept):\n%s", seed, step, what, diff)
			}
			prev, prevCopy = got, deepCopyStatus(got)
		}
	}
}

// deepCopyStatus copies the resource lists a Status shares with the gang
// state.
func deepCopyStatus(s Status) Status {
	s.Allocated, s.Bound, s.Pending, s.MinResources = s.Allocated.DeepCopy(), s.Bound.DeepCopy(), s.Pending.DeepCopy(), s.MinResources.DeepCopy()
	return s
}

// statusCompare compares quantities by value and takes a resource of
// zero as absent.
var statusCompare = []cmp.Option{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmp.Transformer("nonzero", func(l v1.ResourceList) v1.ResourceList {
		out := v1.ResourceList{}
		for name, q := range l {
			if !q.IsZero() {
				out[name] = q
			}
		}
		return out
	}),
	cmpopts.EquateErrors(),
}

// recount counts the status of gang key afresh from its members, as the
// running sums must say it. m.mu held.
func recount(m *Manager, key Key) Status {
	g := m.groups[key]
	if g == nil {
		g = &group{}
	}
	var live []*v1.Pod
	for _, p := range g.members {
		if isLive(p) {
			live = append(live, p)
		}
	}
	sh := shapeOf(key, live, m.sourceObjects(key), g.requests)
	s := Status{Key: key, Spec: sh.spec, MinResources: sh.minResources, Waiting: g.failure.message, Tried: g.failure.message != "" || g.plan != nil}
	if s.Waiting == "" {
		s.Waiting = g.note
	}
	byRole := len(sh.spec.MinTaskMember) > 0
	if byRole {
		s.LiveByRole, s.PlacedByRole = map[string]int32{}, map[string]int32{}
	}
	var allocated, bound, pending resourceSum
	for uid, p := range g.members {
		_, reserved := g.reserved[uid]
		switch {
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil:
		case p.Spec.NodeName != "":
			bound.add(g.requests[uid])
			allocated.add(g.requests[uid])
		case reserved:
			allocated.add(g.requests[uid])
		default:
			pending.add(g.requests[uid])
		}
		s.Members++
		switch p.Status.Phase {
		case v1.PodFailed:
			s.Failed++
		case v1.PodSucceeded:
			s.Succeeded++
		case v1.PodRunning:
			s.Running++
		}
		if p.Spec.NodeName != "" {
			s.Scheduled++
		}
		if !isLive(p) {
			continue
		}
		if prio := corev1helpers.PodPriority(p); s.Live == 0 || prio > s.Priority {
			s.Priority = prio
		}
		s.Live++
		placed := p.Spec.NodeName != "" || reserved
		if placed {
			s.Placed++
		}
		if byRole {
			s.LiveByRole[RoleOf(p)]++
			if placed {
				s.PlacedByRole[RoleOf(p)]++
			}
		}
	}
	s.Allocated, s.Bound, s.Pending = allocated.list, bound.list, pending.list
	s.Invalid = invalid(sh, &tally{live: s.Live, liveByRole: s.LiveByRole})
	return s
}

// TestResourceSum checks that a sum is right and leaves the lists it adds
// unchanged, though a sum of one list is that list.
func TestResourceSum(t *testing.T) {
	list := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	for _, tc := range []struct {
		name string
		add  []v1.ResourceList
		want v1.ResourceList
	}{
		{name: "none"},
		{name: "empty lists", add: []v1.ResourceList{nil, {}}},
		{name: "one", add: []v1.ResourceList{list("1", "2Gi")}, want: list("1", "2Gi")},
		{name: "two", add: []v1.ResourceList{list("1", "2Gi"), list("500m", "")}, want: list("1500m", "2Gi")},
		{name: "three, a fraction", add: []v1.ResourceList{list("1", ""), list("1", "1Gi"), list("0.3", "1Gi")}, want: list("2300m", "2Gi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []v1.ResourceList
			for _, l := range tc.add {
				before = append(before, l.DeepCopy())
			}
			var s resourceSum
			for _, l := range tc.add {
				s.add(l)
			}
			if diff := cmp.Diff(tc.want, s.list, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("sum (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.add); diff != "" {
				t.Errorf("the lists added changed (-before +after):\n%s", diff)
			}
		})
	}
}
