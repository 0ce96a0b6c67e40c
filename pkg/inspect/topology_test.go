package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-sched/muster/pkg/gang"
)

// TestTopologyOf: each PodGroup kind's topology fields, in words.
func TestTopologyOf(t *testing.T) {
	tests := []struct {
		name   string
		family gang.Family
		spec   map[string]any
		want   string
	}{
		{name: "muster", family: gang.FamilyMuster,
			spec: map[string]any{"topology": map[string]any{"required": "topology.muster.dev/block", "preferred": "topology.muster.dev/rack"}},
			want: "required=topology.muster.dev/block preferred=topology.muster.dev/rack"},
		{name: "muster without", family: gang.FamilyMuster, spec: map[string]any{"minMember": int64(2)}},
		{name: "upstream", family: gang.FamilyUpstream,
			spec: map[string]any{"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "topology.muster.dev/rack"}}}},
			want: "required=topology.muster.dev/rack"},
		{name: "volcano defaults", family: gang.FamilyVolcano, spec: map[string]any{"networkTopology": map[string]any{}},
			want: "networkTopology hard tier 1"},
		{name: "volcano soft", family: gang.FamilyVolcano,
			spec: map[string]any{"networkTopology": map[string]any{"mode": "soft", "highestTierAllowed": int64(2)}},
			want: "networkTopology soft tier 2"},
		{name: "scheduler-plugins has no field", family: gang.FamilySchedulerPlugins, spec: map[string]any{"minMember": int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": tt.spec}}
			if diff := cmp.Diff(tt.want, topologyOf(tt.family, obj)); diff != "" {
				t.Errorf("topologyOf (-want +got):\n%s", diff)
			}
		})
	}
}
