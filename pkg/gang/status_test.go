package gang

import (
	"fmt"
	"testing"

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
