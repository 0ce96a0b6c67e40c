package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(pairs ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func waitingPod(name string, req v1.ResourceList) *v1.Pod {
	p := &v1.Pod{}
	p.Name = name
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}
	return p
}

func TestAdmit(t *testing.T) {
	queue := func(allocated, deserved, capability v1.ResourceList) *Queue {
		q := &Queue{Name: "q", raw: queueLists{allocated: allocated, deserved: deserved, capability: capability}}
		return q
	}
	two := []*v1.Pod{waitingPod("p-0", list("cpu", "2")), waitingPod("p-1", list("cpu", "2"))}
	tests := []struct {
		name        string
		group       *group
		queue       *Queue
		placed      int
		waiting     []*v1.Pod
		wantVerdict string
		wantToStart []string
	}{{
		name:        "fits under deserved and capability",
		group:       &group{minMember: 2},
		queue:       queue(list("cpu", "2"), list("cpu", "8"), list("cpu", "10")),
		waiting:     two,
		wantVerdict: "fits",
	}, {
		name:        "over deserved only",
		group:       &group{minMember: 2},
		queue:       queue(list("cpu", "6"), list("cpu", "8"), list("cpu", "12")),
		waiting:     two,
		wantVerdict: "over deserved by 2",
		wantToStart: []string{"queue q: 2 cpu must free, or its deserved grow (proportion places up to deserved)"},
	}, {
		name:        "over capability",
		group:       &group{minMember: 2},
		queue:       queue(list("cpu", "5"), list("cpu", "8"), list("cpu", "8")),
		waiting:     two,
		wantVerdict: "over capability by 1",
		wantToStart: []string{"queue q: 1 cpu must free under its capability"},
	}, {
		name:        "more than the capability itself",
		group:       &group{minMember: 2},
		queue:       queue(list("cpu", "1"), list("cpu", "3"), list("cpu", "3")),
		waiting:     two,
		wantVerdict: "more than the capability by 1",
		wantToStart: []string{"queue q: the gang needs 4 cpu, more than its capability 3: it starts only if the capability grows"},
	}, {
		name:        "minResources stand for the members while none is placed",
		group:       &group{minMember: 2, minResources: list("cpu", "10")},
		queue:       queue(nil, list("cpu", "8"), nil),
		waiting:     two,
		wantVerdict: "over deserved by 2",
		wantToStart: []string{"queue q: 2 cpu must free, or its deserved grow (proportion places up to deserved)"},
	}, {
		name:        "only the members the minimum still lacks count",
		group:       &group{minMember: 2},
		queue:       queue(list("cpu", "6"), list("cpu", "8"), nil),
		placed:      1,
		waiting:     two,
		wantVerdict: "fits",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, toStart := admit(tc.group, tc.queue, tc.placed, tc.waiting)
			if len(lines) != 1 || lines[0].Verdict != tc.wantVerdict {
				t.Errorf("admission = %+v, want one cpu line with verdict %q", lines, tc.wantVerdict)
			}
			if diff := cmp.Diff(tc.wantToStart, toStart); diff != "" {
				t.Errorf("to start (-want +got):\n%s", diff)
			}
		})
	}
	if lines, toStart := admit(&group{minMember: 2}, queue(nil, nil, nil), 2, nil); lines != nil || toStart != nil {
		t.Errorf("a gang at its minimum: admission %v, to start %v; want none", lines, toStart)
	}
}
