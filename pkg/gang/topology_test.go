package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

const (
	host  = "kubernetes.io/hostname"
	rack  = v1alpha1.LabelRack
	block = v1alpha1.LabelBlock
	zone  = "topology.kubernetes.io/zone"
)

func TestTopologyLevels(t *testing.T) {
	levels := []string{host, rack, block, zone}
	tests := []struct {
		name     string
		topology Topology
		want     []string
		required string
	}{
		{name: "none"},
		{name: "required", topology: Topology{Required: rack}, want: []string{rack}, required: rack},
		{name: "required off the levels", topology: Topology{Required: "example.com/pod"}, want: []string{"example.com/pod"}, required: "example.com/pod"},
		{name: "preferred falls back to the top, then anywhere", topology: Topology{Preferred: rack}, want: []string{rack, block, zone}},
		{name: "preferred up to required", topology: Topology{Preferred: host, Required: block}, want: []string{host, rack, block}, required: block},
		{name: "preferred equal to required", topology: Topology{Preferred: rack, Required: rack}, want: []string{rack}, required: rack},
		{name: "preferred above required is implied", topology: Topology{Preferred: block, Required: rack}, want: []string{rack}, required: rack},
		{name: "preferred below a required key off the levels", topology: Topology{Preferred: rack, Required: "example.com/pod"}, want: []string{rack, "example.com/pod"}, required: "example.com/pod"},
		{name: "preferred off the levels", topology: Topology{Preferred: "example.com/pod", Required: zone}, want: []string{"example.com/pod", zone}, required: zone},
		{name: "volcano hard tier 1 is the rack", topology: Topology{VolcanoTier: 1}, want: []string{rack}, required: rack},
		{name: "volcano hard tier 2 is the block", topology: Topology{VolcanoTier: 2}, want: []string{block}, required: block},
		{name: "volcano hard above every level is no constraint", topology: Topology{VolcanoTier: 4}},
		{name: "volcano soft prefers the tightest tier", topology: Topology{VolcanoTier: 3, VolcanoSoft: true}, want: []string{rack, block, zone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, required := tt.topology.Levels(levels)
			if diff := cmp.Diff(tt.want, got); diff != "" || required != tt.required {
				t.Errorf("Levels (-want +got):\n%s\nrequired %q, want %q", diff, required, tt.required)
			}
		})
	}
}

// TestResolveTopology: every gang source gives its constraint.
func TestResolveTopology(t *testing.T) {
	annotated := func(name string, labels, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, Annotations: annotations}}
	}
	both := map[string]string{v1alpha1.AnnotationTopologyRequired: block, v1alpha1.AnnotationTopologyPreferred: rack}
	tests := []struct {
		name    string
		key     Key
		members []*v1.Pod
		src     sources
		want    Topology
		wantErr string
	}{
		{
			name: "muster PodGroup", key: Key{FamilyMuster, "ns", "g"},
			src: sources{muster: &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: 2,
				Topology: &v1alpha1.TopologySpec{Required: rack}}}},
			want: Topology{Required: rack},
		},
		{
			name: "label-only gang", key: Key{FamilyMuster, "ns", "g"},
			members: []*v1.Pod{
				annotated("a", map[string]string{v1alpha1.LabelMinAvailable: "2"}, both),
				annotated("b", map[string]string{v1alpha1.LabelMinAvailable: "2"}, both),
			},
			want: Topology{Required: block, Preferred: rack},
		},
		{
			name: "legacy labels", key: Key{FamilyLegacy, "ns", "g"},
			members: []*v1.Pod{annotated("a", map[string]string{v1alpha1.LegacyLabelMinAvailable: "1"}, map[string]string{v1alpha1.AnnotationTopologyPreferred: rack})},
			want:    Topology{Preferred: rack},
		},
		{
			name: "members disagree", key: Key{FamilyMuster, "ns", "g"},
			members: []*v1.Pod{
				annotated("a", map[string]string{v1alpha1.LabelMinAvailable: "2"}, both),
				annotated("b", map[string]string{v1alpha1.LabelMinAvailable: "2"}, nil),
			},
			wantErr: `members disagree on annotation muster.dev/topology-required: a has "topology.muster.dev/block", b has ""`,
		},
		{
			name: "not a label key", key: Key{FamilyMuster, "ns", "g"},
			members: []*v1.Pod{annotated("a", map[string]string{v1alpha1.LabelMinAvailable: "1"}, map[string]string{v1alpha1.AnnotationTopologyRequired: "a rack"})},
			want:    Topology{Required: "a rack"},
			wantErr: `topology key "a rack" is not a node label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
		{
			name: "scheduler-plugins PodGroup takes the annotations", key: Key{FamilySchedulerPlugins, "ns", "g"},
			members: []*v1.Pod{annotated("a", nil, map[string]string{v1alpha1.AnnotationTopologyRequired: rack})},
			src:     sources{spInstalled: true, schedulerPlugins: &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: 1}}},
			want:    Topology{Required: rack},
		},
		{
			name: "upstream PodGroup", key: Key{FamilyUpstream, "ns", "g"},
			src: sources{upstream: &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
				SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: rack}}},
			}}},
			want: Topology{Required: rack},
		},
		{
			name: "volcano networkTopology defaults to hard, tier 1", key: Key{FamilyVolcano, "ns", "g"},
			src:  sources{vcInstalled: true, volcano: &vcv1beta1.PodGroup{Spec: vcv1beta1.PodGroupSpec{MinMember: 2, NetworkTopology: &vcv1beta1.NetworkTopologySpec{}}}},
			want: Topology{VolcanoTier: 1},
		},
		{
			name: "volcano soft", key: Key{FamilyVolcano, "ns", "g"},
			src: sources{vcInstalled: true, volcano: &vcv1beta1.PodGroup{Spec: vcv1beta1.PodGroupSpec{MinMember: 2, NetworkTopology: &vcv1beta1.NetworkTopologySpec{
				Mode: vcv1beta1.SoftNetworkTopologyMode, HighestTierAllowed: ptr.To(2)}}}},
			want: Topology{VolcanoTier: 2, VolcanoSoft: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := resolveSpec(tt.key, tt.members, tt.src)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, spec.Topology); diff != "" {
				t.Errorf("Topology (-want +got):\n%s", diff)
			}
		})
	}
}
