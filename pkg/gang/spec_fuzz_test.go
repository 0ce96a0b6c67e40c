package gang

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// fuzzLabelKeys are the short names fuzz inputs use for the labels Muster
// reads; "sg" is spec.schedulingGroup.podGroupName and "ns" the namespace.
// Any other key is a label of that name.
var fuzzLabelKeys = map[string]string{
	"pg":   v1alpha1.LabelPodGroup,
	"min":  v1alpha1.LabelMinAvailable,
	"q":    v1alpha1.LabelQueue,
	"role": v1alpha1.LabelRole,
	"lpg":  v1alpha1.LegacyLabelPodGroup,
	"lmin": v1alpha1.LegacyLabelMinAvailable,
	"sp":   v1alpha1.SchedulerPluginsLabelPodGroup,
}

// fuzzPods reads pods from "k=v,k=v;k=v": one pod per ';', named p0, p1…
// in namespace "ns" unless an "ns" key says otherwise. At most 8 pods.
func fuzzPods(s string) []*v1.Pod {
	var pods []*v1.Pod
	for i, spec := range strings.SplitN(s, ";", 8) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), Labels: map[string]string{}}}
		for _, kv := range strings.Split(spec, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case k == "ns":
				p.Namespace = v
			case k == "sg":
				p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(v)}
			case fuzzLabelKeys[k] != "":
				p.Labels[fuzzLabelKeys[k]] = v
			case k != "":
				p.Labels[k] = v
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// FuzzResolveSpec puts arbitrary labels on a few pods, groups them by the
// gang their labels name and resolves each gang's spec from its members
// and the PodGroups the inputs define (minimums < 1 mean none: the CRDs
// reject them). It checks that a pod's family follows the documented
// precedence, that a resolved spec has MinMember >= 1 and the value its
// members agree on, that members who disagree get an error rather than a
// spec, and that the members' order changes nothing.
func FuzzResolveSpec(f *testing.F) {
	// From TestKeyOf and TestResolveSpec.
	f.Add("pg=g,min=2;pg=g,min=2", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=2,q=x;pg=g,min=2,q=y", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=2;pg=g,min=3", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=abc", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=0", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=9", int32(3), int32(0), "", int32(0), false)
	f.Add("lpg=g,lmin=4;lpg=g", int32(0), int32(0), "", int32(0), false)
	f.Add("sp=g,lpg=legacy,pg=m;sp=g,lpg=legacy", int32(0), int32(0), "", int32(5), true)
	f.Add("sp=g;sp=g", int32(0), int32(0), "", int32(5), false)
	f.Add("q=q;q=q", int32(0), int32(0), "", int32(0), false)
	f.Add("sg=g,q=team;sg=g", int32(0), int32(2), "team", int32(0), false)
	f.Add("sg=g,q=x;sg=g,q=x", int32(0), int32(2), "y", int32(0), false)
	f.Add("sg=g,lpg=l,sp=s", int32(0), int32(-1), "", int32(0), false)
	f.Add("sg=g,lpg=l,lmin=1;sg=g,q=q", int32(0), int32(4), "", int32(0), false)
	f.Add("pg=g,min=+2;pg=g,min=02", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=g,min=2147483648;ns=other,pg=g,min=1", int32(0), int32(0), "", int32(0), false)
	f.Add("pg=,app=web;lpg=g,lmin=1,role=ps;lpg=g,lmin=1,role=w", int32(0), int32(0), "", int32(0), false)

	f.Fuzz(func(t *testing.T, labels string, pgMin, upMin int32, upQueue string, spMin int32, spInstalled bool) {
		pods := fuzzPods(labels)
		// upMin: 0 for no scheduling.k8s.io PodGroup, < 0 for one with the
		// basic policy, > 0 for a gang of that minCount.
		var up *schedulingv1beta1.PodGroup
		if upMin != 0 {
			up = &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelQueue: upQueue}}}
			if upMin > 0 {
				up.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: upMin}
			} else {
				up.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
			}
		}
		upstreamGang := func(string, string) bool { return up == nil || up.Spec.SchedulingPolicy.Basic == nil }

		groups := map[Key][]*v1.Pod{}
		for _, p := range pods {
			m, ok := membershipOf(p, upstreamGang)
			checkMembership(t, p, m, ok, upstreamGang(p.Namespace, ""))
			if k, kok := KeyOf(p); m.key.Family != FamilyUpstream && (k != m.key || kok != ok) {
				t.Fatalf("pod %v: KeyOf = %v, %v; membershipOf = %v, %v", p.Labels, k, kok, m.key, ok)
			}
			if ok {
				groups[m.key] = append(groups[m.key], p)
			}
		}
		for key, members := range groups {
			src := sources{upstream: up, spInstalled: spInstalled}
			if pgMin >= 1 {
				src.muster = &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: pgMin, Queue: "team"}}
			}
			if spMin >= 1 {
				src.schedulerPlugins = &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: spMin}}
			}
			spec, err := resolveSpec(key, members, src)
			checkSpec(t, key, members, src, spec, err)
			// Reversed, and every rotation: the gang state lists members
			// from a map, in no order.
			for i := range members {
				order := slices.Concat(members[i:], members[:i])
				if i == 0 {
					slices.Reverse(order)
				}
				got, gotErr := resolveSpec(key, order, src)
				if (err == nil) != (gotErr == nil) {
					t.Fatalf("gang %v: error %v in one order, %v in another", key, err, gotErr)
				}
				if diff := cmp.Diff(spec, got); diff != "" {
					t.Fatalf("gang %v: spec depends on member order (-first,+reordered):\n%s", key, diff)
				}
			}
		}
	})
}

// checkMembership checks the pod's gang against the documented precedence:
// muster.dev/pod-group, spec.schedulingGroup (a gang PodGroup),
// the legacy label, scheduler-plugins' label, a queue alone.
func checkMembership(t *testing.T, p *v1.Pod, m membership, ok, upstreamIsGang bool) {
	t.Helper()
	l := p.Labels
	var want Key
	switch sg := p.Spec.SchedulingGroup; {
	case l[v1alpha1.LabelPodGroup] != "":
		want = Key{FamilyMuster, p.Namespace, l[v1alpha1.LabelPodGroup]}
	case sg != nil && *sg.PodGroupName != "" && upstreamIsGang:
		want = Key{FamilyUpstream, p.Namespace, *sg.PodGroupName}
	case l[v1alpha1.LegacyLabelPodGroup] != "":
		want = Key{FamilyLegacy, p.Namespace, l[v1alpha1.LegacyLabelPodGroup]}
	case l[v1alpha1.SchedulerPluginsLabelPodGroup] != "":
		want = Key{FamilySchedulerPlugins, p.Namespace, l[v1alpha1.SchedulerPluginsLabelPodGroup]}
	default:
		if _, q := l[v1alpha1.LabelQueue]; q {
			want = Key{FamilySolo, p.Namespace, p.Name}
		}
	}
	if ok != (want != Key{}) || m.key != want {
		t.Fatalf("pod %v: membership %v, %v; want %v", l, m.key, ok, want)
	}
	minLabel := map[Family]string{FamilyMuster: v1alpha1.LabelMinAvailable, FamilyLegacy: v1alpha1.LegacyLabelMinAvailable}[want.Family]
	if v, has := l[minLabel]; minLabel != "" && (m.hasMin != has || m.minAvailable != v) {
		t.Fatalf("pod %v: min-available %q, %v; want %q, %v", l, m.minAvailable, m.hasMin, v, has)
	}
}

// checkSpec checks one gang's resolved spec, or its error, against what
// its members' labels and its sources say.
func checkSpec(t *testing.T, key Key, members []*v1.Pod, src sources, spec Spec, err error) {
	t.Helper()
	if err != nil {
		// Only a PodGroup naming a missing PriorityClass says how many
		// members it needs beside its error.
		if src.muster == nil || src.muster.Spec.PriorityClassName == "" {
			if diff := cmp.Diff(Spec{}, spec); diff != "" {
				t.Fatalf("gang %v: error %v with a spec:\n%s", key, err, diff)
			}
		}
		return
	}
	if spec.MinMember < 1 {
		t.Fatalf("gang %v: spec %+v has MinMember < 1", key, spec)
	}
	if key.Family == FamilyMuster && src.muster != nil {
		// The PodGroup defines the gang, whatever the labels say.
		if spec.MinMember != src.muster.Spec.MinMember || spec.Queue != src.muster.Spec.Queue {
			t.Fatalf("gang %v: spec %+v, not its PodGroup's %+v", key, spec, src.muster.Spec)
		}
		return
	}
	// The members' values of a label; a missing min-available label is
	// "none", a missing queue "".
	values := func(label string) []string {
		var out []string
		for _, p := range members {
			v, ok := p.Labels[label]
			if !ok && label != v1alpha1.LabelQueue {
				v = "none"
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
	queues := values(v1alpha1.LabelQueue)
	if len(queues) != 1 {
		t.Fatalf("gang %v: members disagree on the queue %q, yet spec %+v", key, queues, spec)
	}
	wantQueue := queues[0]
	if key.Family == FamilyUpstream && src.upstream.Labels[v1alpha1.LabelQueue] != "" {
		q := src.upstream.Labels[v1alpha1.LabelQueue]
		if wantQueue != "" && wantQueue != q {
			t.Fatalf("gang %v: PodGroup names queue %q, members %q, yet spec %+v", key, q, wantQueue, spec)
		}
		wantQueue = q
	}
	if spec.Queue != wantQueue {
		t.Fatalf("gang %v: spec queue %q, want %q", key, spec.Queue, wantQueue)
	}
	minLabel := map[Family]string{FamilyMuster: v1alpha1.LabelMinAvailable, FamilyLegacy: v1alpha1.LegacyLabelMinAvailable}[key.Family]
	if minLabel == "" {
		return
	}
	mins := values(minLabel)
	if len(mins) != 1 {
		t.Fatalf("gang %v: members disagree on %s %q, yet spec %+v", key, minLabel, mins, spec)
	}
	if n, perr := strconv.ParseInt(mins[0], 10, 32); perr != nil || int32(n) != spec.MinMember {
		t.Fatalf("gang %v: %s=%q, yet MinMember %d", key, minLabel, mins[0], spec.MinMember)
	}
}
