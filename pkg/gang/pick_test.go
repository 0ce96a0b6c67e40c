package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

func TestPickMembers(t *testing.T) {
	pod := func(name, role string) *v1.Pod {
		return st.MakePod().Name(name).UID(name).Labels(map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelRole: role}).Obj()
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		pending []*v1.Pod
		status  Status
		want    []string
	}{
		{
			name:    "the pod first, then the oldest, up to minMember",
			pod:     pod("c", ""),
			pending: []*v1.Pod{pod("a", ""), pod("b", ""), pod("c", ""), pod("d", "")},
			status:  Status{Spec: Spec{MinMember: 3}},
			want:    []string{"c", "a", "b"},
		},
		{
			name:    "placed members reduce the need",
			pod:     pod("c", ""),
			pending: []*v1.Pod{pod("c", ""), pod("d", "")},
			status:  Status{Spec: Spec{MinMember: 3}, Placed: 2},
			want:    []string{"c"},
		},
		{
			name:    "short roles first",
			pod:     pod("w1", "worker"),
			pending: []*v1.Pod{pod("w1", "worker"), pod("w2", "worker"), pod("w3", "worker"), pod("ps", "ps")},
			status:  Status{Spec: Spec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1, "worker": 2}}},
			want:    []string{"w1", "w2", "ps"},
		},
		{
			name:    "a role already placed is not needed again",
			pod:     pod("w2", "worker"),
			pending: []*v1.Pod{pod("w2", "worker"), pod("ps2", "ps")},
			status: Status{Spec: Spec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1}},
				Placed: 2, PlacedByRole: map[string]int32{"ps": 1, "worker": 1}},
			want: []string{"w2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range PickMembers(tt.pod, tt.pending, &tt.status) {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("picked (-want,+got):\n%s", diff)
			}
		})
	}
}
