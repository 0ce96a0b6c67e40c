package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

func TestKeyOf(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		// group is the pod's spec.schedulingGroup.podGroupName; gangs the
		// scheduling.k8s.io PodGroups that make a gang (nil: Muster does
		// not schedule them).
		group  string
		gangs  map[string]bool
		want   Key
		wantOK bool
	}{
		{name: "upstream gang", group: "u", gangs: map[string]bool{"u": true}, want: Key{FamilyUpstream, "ns", "u"}, wantOK: true},
		{name: "upstream basic policy is no gang", group: "u", gangs: map[string]bool{"u": false}},
		{name: "upstream basic policy with a queue is a gang of one", group: "u", gangs: map[string]bool{"u": false},
			labels: map[string]string{v1alpha1.LabelQueue: "q"}, want: Key{FamilySolo, "ns", "p"}, wantOK: true},
		{name: "upstream field ignored where Muster does not schedule those PodGroups", group: "u"},
		{name: "muster wins over upstream", group: "u", gangs: map[string]bool{"u": true},
			labels: map[string]string{v1alpha1.LabelPodGroup: "m"}, want: Key{FamilyMuster, "ns", "m"}, wantOK: true},
		{name: "upstream wins over legacy and scheduler-plugins", group: "u", gangs: map[string]bool{"u": true},
			labels: map[string]string{v1alpha1.LegacyLabelPodGroup: "l", v1alpha1.SchedulerPluginsLabelPodGroup: "sp"}, want: Key{FamilyUpstream, "ns", "u"}, wantOK: true},
		{name: "no gang", labels: map[string]string{"app": "web"}},
		{name: "a queue alone makes a gang of one", labels: map[string]string{v1alpha1.LabelQueue: "q"}, want: Key{FamilySolo, "ns", "p"}, wantOK: true},
		{name: "muster", labels: map[string]string{v1alpha1.LabelPodGroup: "g"}, want: Key{FamilyMuster, "ns", "g"}, wantOK: true},
		{name: "legacy", labels: map[string]string{v1alpha1.LegacyLabelPodGroup: "g"}, want: Key{FamilyLegacy, "ns", "g"}, wantOK: true},
		{name: "scheduler-plugins", labels: map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "g"}, want: Key{FamilySchedulerPlugins, "ns", "g"}, wantOK: true},
		{name: "muster wins over the others", labels: map[string]string{
			v1alpha1.SchedulerPluginsLabelPodGroup: "sp", v1alpha1.LegacyLabelPodGroup: "legacy", v1alpha1.LabelPodGroup: "m",
		}, want: Key{FamilyMuster, "ns", "m"}, wantOK: true},
		{name: "legacy wins over scheduler-plugins", labels: map[string]string{
			v1alpha1.SchedulerPluginsLabelPodGroup: "sp", v1alpha1.LegacyLabelPodGroup: "legacy",
		}, want: Key{FamilyLegacy, "ns", "legacy"}, wantOK: true},
		{name: "empty name is no gang", labels: map[string]string{v1alpha1.LabelPodGroup: ""}},
		{name: "volcano", annotations: map[string]string{v1alpha1.VolcanoAnnotationGroupName: "v"}, want: Key{FamilyVolcano, "ns", "v"}, wantOK: true},
		{name: "volcano's own key", annotations: map[string]string{v1alpha1.VolcanoAnnotationGroupNameAlt: "v"}, want: Key{FamilyVolcano, "ns", "v"}, wantOK: true},
		{name: "volcano: the Kubernetes-style key wins", annotations: map[string]string{
			v1alpha1.VolcanoAnnotationGroupName: "v", v1alpha1.VolcanoAnnotationGroupNameAlt: "alt",
		}, want: Key{FamilyVolcano, "ns", "v"}, wantOK: true},
		{name: "scheduler-plugins wins over volcano", labels: map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "sp"},
			annotations: map[string]string{v1alpha1.VolcanoAnnotationGroupName: "v"}, want: Key{FamilySchedulerPlugins, "ns", "sp"}, wantOK: true},
		{name: "volcano's queue annotation alone makes a gang of one", annotations: map[string]string{v1alpha1.VolcanoAnnotationQueueName: "q"},
			want: Key{FamilySolo, "ns", "p"}, wantOK: true},
		{name: "volcano wins over a queue alone", labels: map[string]string{v1alpha1.LabelQueue: "q"},
			annotations: map[string]string{v1alpha1.VolcanoAnnotationGroupName: "v"}, want: Key{FamilyVolcano, "ns", "v"}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().Namespace("ns").Name("p").Labels(tt.labels).Annotations(tt.annotations).Obj()
			if tt.group != "" {
				pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(tt.group)}
			}
			var upstream UpstreamGang
			if tt.gangs != nil {
				upstream = func(ns, name string) bool { return ns == "ns" && tt.gangs[name] }
			}
			m, ok := membershipOf(pod, upstream)
			got := m.key
			if ok != tt.wantOK {
				t.Fatalf("KeyOf ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("KeyOf (-want,+got):\n%s", diff)
			}
		})
	}
}

func member(name string, labels map[string]string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Labels(labels).Obj()
}

// upstreamPodGroup is a scheduling.k8s.io PodGroup ns/g with the gang
// policy.
func upstreamPodGroup(minCount int32, labels map[string]string) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Labels: labels},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
}

func TestResolveSpec(t *testing.T) {
	muster := Key{FamilyMuster, "ns", "g"}
	upstream := Key{FamilyUpstream, "ns", "g"}
	volcano := Key{FamilyVolcano, "ns", "g"}
	min := func(v string) map[string]string {
		return map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: v}
	}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{
		MinMember: 3, Queue: "team", MinTaskMember: map[string]int32{"ps": 1}, ScheduleTimeoutSeconds: ptr.To[int32](30),
	}}
	tests := []struct {
		name        string
		key         Key
		members     []*v1.Pod
		pg          *v1alpha1.PodGroup
		sp          *spv1alpha1.PodGroup
		up          *schedulingv1beta1.PodGroup
		vc          *vcv1beta1.PodGroup
		class       *schedulingv1.PriorityClass
		spInstalled bool
		vcInstalled bool
		want        Spec
		wantErr     string
	}{
		{name: "PodGroup wins over labels", key: muster, members: []*v1.Pod{member("a", min("9"))}, pg: pg,
			want: Spec{MinMember: 3, Queue: "team", MinTaskMember: map[string]int32{"ps": 1}, Timeout: 30 * time.Second, PodGroup: pg}},
		{name: "PodGroup priority class", key: muster, members: []*v1.Pod{member("a", nil)}, pg: withClass(pg, "high"),
			class: &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
			want:  Spec{MinMember: 3, Queue: "team", MinTaskMember: map[string]int32{"ps": 1}, Timeout: 30 * time.Second, PodGroup: withClass(pg, "high"), Priority: ptr.To[int32](1000)}},
		{name: "PodGroup priority class missing: the error, and how many members it needs", key: muster, members: []*v1.Pod{member("a", nil)}, pg: withClass(pg, "high"),
			want:    Spec{MinMember: 3, Queue: "team", MinTaskMember: map[string]int32{"ps": 1}, Timeout: 30 * time.Second, PodGroup: withClass(pg, "high")},
			wantErr: `PodGroup ns/g names PriorityClass "high", which does not exist`},
		{name: "label group", key: muster, members: []*v1.Pod{member("a", min("2")), member("b", min("2"))}, want: Spec{MinMember: 2}},
		{name: "label group with a queue", key: muster,
			members: []*v1.Pod{member("a", map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "1", v1alpha1.LabelQueue: "q"})},
			want:    Spec{MinMember: 1, Queue: "q"}},
		{name: "not a number", key: muster, members: []*v1.Pod{member("a", min("abc"))},
			wantErr: `PodGroup ns/g does not exist and label muster.dev/min-available="abc" is not a whole number >= 1`},
		{name: "zero", key: muster, members: []*v1.Pod{member("a", min("0"))},
			wantErr: `PodGroup ns/g does not exist and label muster.dev/min-available="0" is not a whole number >= 1`},
		{name: "members disagree", key: muster, members: []*v1.Pod{member("a", min("2")), member("b", min("3"))},
			wantErr: `PodGroup ns/g does not exist and members disagree on muster.dev/min-available: "2" (a), "3" (b)`},
		{name: "no PodGroup and no label", key: muster, members: []*v1.Pod{member("a", map[string]string{v1alpha1.LabelPodGroup: "g"})},
			wantErr: "PodGroup ns/g does not exist and pod a has no muster.dev/min-available label"},
		{name: "members disagree on queue", key: muster, members: []*v1.Pod{
			member("a", map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "2", v1alpha1.LabelQueue: "x"}),
			member("b", map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "2", v1alpha1.LabelQueue: "y"}),
		}, wantErr: `members disagree on muster.dev/queue: "x" (a), "y" (b)`},
		{name: "a gang of one in volcano's queue annotation", key: Key{FamilySolo, "ns", "a"},
			members: []*v1.Pod{withAnnotations(member("a", nil), map[string]string{v1alpha1.VolcanoAnnotationQueueName: "team"})},
			want:    Spec{MinMember: 1, Queue: "team"}},
		{name: "a gang of one: the queue label wins over volcano's annotation", key: Key{FamilySolo, "ns", "a"},
			members: []*v1.Pod{withAnnotations(member("a", map[string]string{v1alpha1.LabelQueue: "q"}), map[string]string{v1alpha1.VolcanoAnnotationQueueName: "team"})},
			want:    Spec{MinMember: 1, Queue: "q"}},
		{name: "legacy", key: Key{FamilyLegacy, "ns", "g"},
			members: []*v1.Pod{member("a", map[string]string{v1alpha1.LegacyLabelPodGroup: "g", v1alpha1.LegacyLabelMinAvailable: "4"})},
			want:    Spec{MinMember: 4}},
		{name: "legacy without min-available", key: Key{FamilyLegacy, "ns", "g"},
			members: []*v1.Pod{member("a", map[string]string{v1alpha1.LegacyLabelPodGroup: "g"})},
			wantErr: "pod a has no pod-group.scheduling.sigs.k8s.io/min-available label"},
		{name: "scheduler-plugins", key: Key{FamilySchedulerPlugins, "ns", "g"}, spInstalled: true,
			sp:   &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: 5, ScheduleTimeoutSeconds: ptr.To[int32](10)}},
			want: Spec{MinMember: 5, Timeout: 10 * time.Second}},
		{name: "scheduler-plugins timeout 0", key: Key{FamilySchedulerPlugins, "ns", "g"}, spInstalled: true,
			sp:      &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: 5, ScheduleTimeoutSeconds: ptr.To[int32](0)}},
			wantErr: "scheduler-plugins PodGroup ns/g has scheduleTimeoutSeconds 0; want >= 1 or unset"},
		{name: "scheduler-plugins negative timeout", key: Key{FamilySchedulerPlugins, "ns", "g"}, spInstalled: true,
			sp:      &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: 5, ScheduleTimeoutSeconds: ptr.To[int32](-1)}},
			wantErr: "scheduler-plugins PodGroup ns/g has scheduleTimeoutSeconds -1; want >= 1 or unset"},
		{name: "scheduler-plugins PodGroup missing", key: Key{FamilySchedulerPlugins, "ns", "g"}, spInstalled: true,
			wantErr: "scheduler-plugins PodGroup ns/g does not exist"},
		{name: "scheduler-plugins CRD absent", key: Key{FamilySchedulerPlugins, "ns", "g"},
			wantErr: "pods name scheduler-plugins PodGroup ns/g but its CRD (scheduling.x-k8s.io) was not installed when the scheduler started"},
		{name: "upstream gang", key: upstream, members: []*v1.Pod{member("a", nil)}, up: upstreamPodGroup(4, nil),
			want: Spec{MinMember: 4}},
		{name: "upstream queue from the PodGroup's label", key: upstream, members: []*v1.Pod{member("a", nil)},
			up: upstreamPodGroup(2, map[string]string{v1alpha1.LabelQueue: "team"}), want: Spec{MinMember: 2, Queue: "team"}},
		{name: "upstream queue from the members", key: upstream, members: []*v1.Pod{member("a", map[string]string{v1alpha1.LabelQueue: "team"})},
			up: upstreamPodGroup(2, nil), want: Spec{MinMember: 2, Queue: "team"}},
		{name: "upstream PodGroup and members name other queues", key: upstream,
			members: []*v1.Pod{member("a", map[string]string{v1alpha1.LabelQueue: "x"})},
			up:      upstreamPodGroup(2, map[string]string{v1alpha1.LabelQueue: "y"}),
			wantErr: `PodGroup ns/g names queue "y" and its members "x"`},
		{name: "upstream PodGroup missing", key: upstream, members: []*v1.Pod{member("a", nil)},
			wantErr: "PodGroup ns/g (scheduling.k8s.io) does not exist"},
		{name: "upstream basic policy", key: upstream, members: []*v1.Pod{member("a", nil)},
			up:      &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}},
			wantErr: "PodGroup ns/g (scheduling.k8s.io) has no gang policy with minCount >= 1"},
		{name: "volcano", key: volcano, vcInstalled: true, vc: vcPodGroup(3, map[string]int32{"ps": 1, "worker": 2}, "team", ""),
			want: Spec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1, "worker": 2}, Queue: "team", MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}},
		{name: "volcano minResources in ResourceQuota's terms, as its Job controller writes them", key: volcano, vcInstalled: true, vc: func() *vcv1beta1.PodGroup {
			pg := vcPodGroup(4, nil, "", "")
			pg.Spec.MinResources = &v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("2"),
				v1.ResourcePods: resource.MustParse("4"), "count/pods": resource.MustParse("4"),
				v1.ResourceRequestsCPU: resource.MustParse("4"), v1.ResourceRequestsMemory: resource.MustParse("1Gi"), v1.ResourceLimitsCPU: resource.MustParse("4"),
			}
			return pg
		}(),
			want: Spec{MinMember: 4, MinResources: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("2"),
			}}},
		{name: "volcano minMember 0 is a gang of one", key: volcano, vcInstalled: true, vc: vcPodGroup(0, nil, "default", ""),
			want: Spec{MinMember: 1, Queue: "default", MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}},
		{name: "volcano roles needing more than minMember are not checked, as in Volcano", key: volcano, vcInstalled: true, vc: vcPodGroup(2, map[string]int32{"ps": 1, "worker": 3}, "", ""),
			want: Spec{MinMember: 2, MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}},
		{name: "volcano negative minMember", key: volcano, vcInstalled: true, vc: vcPodGroup(-1, nil, "", ""),
			want:    Spec{MinMember: 1, MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}},
			wantErr: "Volcano PodGroup ns/g has minMember -1; want >= 0"},
		{name: "volcano negative role minimum", key: volcano, vcInstalled: true, vc: vcPodGroup(2, map[string]int32{"ps": -1}, "", ""),
			want:    Spec{MinMember: 2, MinTaskMember: map[string]int32{"ps": -1}, MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}},
			wantErr: "Volcano PodGroup ns/g has minTaskMember[ps] -1; want >= 0"},
		{name: "volcano priority class", key: volcano, vcInstalled: true, vc: vcPodGroup(2, nil, "", "high"),
			class: &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
			want:  Spec{MinMember: 2, MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}, Priority: ptr.To[int32](1000)}},
		{name: "volcano priority class missing", key: volcano, vcInstalled: true, vc: vcPodGroup(2, nil, "", "high"),
			want:    Spec{MinMember: 2, MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}},
			wantErr: `Volcano PodGroup ns/g names PriorityClass "high", which does not exist`},
		{name: "volcano PodGroup missing", key: volcano, vcInstalled: true,
			wantErr: "Volcano PodGroup ns/g does not exist"},
		{name: "volcano CRD absent", key: volcano,
			wantErr: "pods name Volcano PodGroup ns/g but its CRD (scheduling.volcano.sh) was not installed when the scheduler started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveSpec(tt.key, tt.members, sources{
				muster: tt.pg, schedulerPlugins: tt.sp, upstream: tt.up, volcano: tt.vc,
				priorityClass: tt.class, spInstalled: tt.spInstalled, vcInstalled: tt.vcInstalled,
			})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("spec beside the error (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spec (-want,+got):\n%s", diff)
			}
		})
	}
}

// withAnnotations sets the pod's annotations.
func withAnnotations(p *v1.Pod, a map[string]string) *v1.Pod {
	p.Annotations = a
	return p
}

// vcPodGroup is a Volcano PodGroup ns/g asking for 3 cpu.
func vcPodGroup(min int32, roles map[string]int32, queue, class string) *vcv1beta1.PodGroup {
	return &vcv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec: vcv1beta1.PodGroupSpec{
			MinMember: min, MinTaskMember: roles, Queue: queue, PriorityClassName: class,
			MinResources: &v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")},
		},
	}
}

// withClass is a copy of pg naming priority class name.
func withClass(pg *v1alpha1.PodGroup, name string) *v1alpha1.PodGroup {
	pg = pg.DeepCopy()
	pg.Spec.PriorityClassName = name
	return pg
}

func TestStatus(t *testing.T) {
	role := func(p *v1.Pod, r string) *v1.Pod { p.Labels[v1alpha1.LabelRole] = r; return p }
	bound := func(p *v1.Pod, phase v1.PodPhase) *v1.Pod { p.Spec.NodeName, p.Status.Phase = "n", phase; return p }
	labels := func() map[string]string { return map[string]string{v1alpha1.LabelPodGroup: "g"} }
	tests := []struct {
		name        string
		spec        Spec
		members     []*v1.Pod
		reserved    []string
		wantInvalid string
		wantPlaced  int32
		wantReady   bool
	}{
		{name: "too few members", spec: Spec{MinMember: 3}, members: []*v1.Pod{member("a", labels()), member("b", labels())},
			wantInvalid: "2 members exist, minMember 3"},
		{name: "failed members do not count", spec: Spec{MinMember: 2},
			members:     []*v1.Pod{member("a", labels()), bound(member("b", labels()), v1.PodFailed)},
			wantInvalid: "1 members exist, minMember 2"},
		{name: "a role short", spec: Spec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 1}},
			members:     []*v1.Pod{role(member("a", labels()), "worker"), role(member("b", labels()), "worker")},
			wantInvalid: "role ps: 0 members exist, minTaskMember 1"},
		{name: "reserved and bound count as placed", spec: Spec{MinMember: 3},
			members:  []*v1.Pod{member("a", labels()), bound(member("b", labels()), v1.PodRunning), member("c", labels())},
			reserved: []string{"a", "b"}, wantPlaced: 2},
		{name: "ready", spec: Spec{MinMember: 2},
			members:  []*v1.Pod{member("a", labels()), bound(member("b", labels()), v1.PodRunning)},
			reserved: []string{"a"}, wantPlaced: 2, wantReady: true},
		{name: "placed but a role short is not ready", spec: Spec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 1}},
			members:  []*v1.Pod{role(member("a", labels()), "worker"), role(member("b", labels()), "worker"), role(member("c", labels()), "ps")},
			reserved: []string{"a", "b"}, wantPlaced: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &group{members: map[types.UID]*v1.Pod{}, reserved: map[types.UID]string{}}
			for _, r := range tt.reserved {
				g.reserved[types.UID(r)] = "n"
			}
			for _, p := range tt.members {
				g.retally(p.UID, func() { g.members[p.UID] = p })
			}
			g.shape.Store(&shape{spec: tt.spec})
			s := (&Manager{}).statusLocked(Key{FamilyMuster, "ns", "g"}, g)
			if s.Invalid != tt.wantInvalid || s.Placed != tt.wantPlaced || s.Ready() != tt.wantReady {
				t.Errorf("got invalid %q, placed %d, ready %v; want %q, %d, %v", s.Invalid, s.Placed, s.Ready(), tt.wantInvalid, tt.wantPlaced, tt.wantReady)
			}
		})
	}
}
