package gang

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// BenchmarkComputeStatus is the cost of one gang's status, recomputed on
// every change of one of its members: a gang of one (a queued pod of its
// own) and a gang of 16 with half its members placed.
func BenchmarkComputeStatus(b *testing.B) {
	for _, size := range []int{1, 16} {
		b.Run(fmt.Sprintf("members=%d", size), func(b *testing.B) {
			members := map[types.UID]*v1.Pod{}
			requests := map[types.UID]v1.ResourceList{}
			reserved := map[types.UID]string{}
			for i := range size {
				name := fmt.Sprintf("p-%d", i)
				p := st.MakePod().Namespace("ns").Name(name).UID(name).Labels(map[string]string{v1alpha1.LabelPodGroup: "g"}).
					Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Obj()
				members[p.UID] = p
				requests[p.UID] = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
				if i%2 == 1 {
					reserved[p.UID] = "n"
				}
			}
			spec := Spec{MinMember: int32(size)}
			key := Key{FamilyMuster, "ns", "g"}
			b.ReportAllocs()
			for b.Loop() {
				s := computeStatus(key, spec, nil, members, reserved, requests)
				if s.Invalid != "" || s.Ready() {
					b.Fatalf("status %+v", s)
				}
			}
		})
	}
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
