package scenario

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestIdleWhileWaiting(t *testing.T) {
	at := time.Unix(1000, 0)
	refused, untried := at, time.Time{}
	running := func(node string, cpu float64) *podRecord {
		return &podRecord{node: node, requests: []float64{cpu}, created: at, bound: at}
	}
	pending := func(cpu float64, refused time.Time, gang string) *podRecord {
		return &podRecord{requests: []float64{cpu}, created: at, refused: refused, gang: gang}
	}
	inRack := func(pods map[string]*podRecord, gang string) map[string]*gangRecord {
		g := &gangRecord{name: gang, required: "rack"}
		for _, p := range pods {
			if p.gang == gang {
				g.members = append(g.members, p)
			}
		}
		return map[string]*gangRecord{"ns/" + gang: g}
	}
	spread := map[string]*podRecord{
		"ns/r0": running("n-0", 2), "ns/r1": running("n-1", 2),
		"ns/a": pending(2, refused, "g"), "ns/b": pending(2, refused, "g"),
	}
	oneRackFree := map[string]*podRecord{"ns/a": pending(2, refused, "g"), "ns/b": pending(2, refused, "g")}
	anchored := map[string]*podRecord{
		"ns/r0": running("n-0", 2), "ns/a": running("n-0", 2), "ns/b": pending(2, refused, "g"),
	}
	anchored["ns/a"].gang = "g"
	tests := []struct {
		name  string
		pods  map[string]*podRecord
		gangs map[string]*gangRecord
		want  []float64
	}{
		{
			name: "no pod waits",
			pods: map[string]*podRecord{"ns/r": running("n-0", 3)},
			want: []float64{0},
		},
		{
			name: "a pod that fits waits: the room it fits, up to its request",
			pods: map[string]*podRecord{"ns/r": running("n-0", 3), "ns/p": pending(1, refused, "")},
			want: []float64{1},
		},
		{
			name: "two pods that fit wait: each node's free room, up to their requests",
			pods: map[string]*podRecord{"ns/r": running("n-0", 3), "ns/p": pending(1, refused, ""), "ns/q": pending(4, refused, "")},
			want: []float64{5},
		},
		{
			name: "a pod not tried yet is not waiting",
			pods: map[string]*podRecord{"ns/p": pending(1, untried, "")},
			want: []float64{0},
		},
		{
			name: "a pod that fits no node's room",
			pods: map[string]*podRecord{"ns/r0": running("n-0", 3), "ns/r1": running("n-1", 3), "ns/p": pending(2, refused, "")},
			want: []float64{0},
		},
		{
			name: "a gang's member whose gang cannot fit the free room together",
			pods: map[string]*podRecord{
				"ns/r": running("n-0", 3),
				"ns/a": pending(2, refused, "g"), "ns/b": pending(2, refused, "g"), "ns/c": pending(2, refused, "g"),
			},
			want: []float64{0},
		},
		{
			name: "a gang that fits the cluster's free room, not requiring a rack",
			pods: spread,
			want: []float64{4},
		},
		{
			name:  "a gang that requires a rack, with its room spread over two",
			pods:  spread,
			gangs: inRack(spread, "g"),
			want:  []float64{0},
		},
		{
			name:  "a gang that requires a rack, with one rack free",
			pods:  oneRackFree,
			gangs: inRack(oneRackFree, "g"),
			want:  []float64{4},
		},
		{
			name:  "a gang's member whose running members' rack is full",
			pods:  anchored,
			gangs: inRack(anchored, "g"),
			want:  []float64{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &observer{
				dims:             []v1.ResourceName{v1.ResourceCPU},
				groups:           map[string]string{"n-0": "n", "n-1": "n"},
				groupAllocatable: map[string][]float64{"n": {4}},
				pods:             tt.pods,
				gangs:            tt.gangs,
				nodeLabels:       map[string]map[string]string{"n-0": {"rack": "a"}, "n-1": {"rack": "b"}},
			}
			if diff := cmp.Diff(tt.want, o.idleWhileWaiting()); diff != "" {
				t.Errorf("idle while waiting (-want +got):\n%s", diff)
			}
		})
	}
}
