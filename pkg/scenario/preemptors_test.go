package scenario

import (
	"k8s.io/utils/ptr"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// victimEvent is an Event as a recorder writes it: regarding the victim,
// related to the preemptor ("" for no related object).
func victimEvent(reason, victim, preemptor string) *eventsv1.Event {
	e := &eventsv1.Event{Reason: reason, Regarding: podRef(victim)}
	if preemptor != "" {
		ref := podRef(preemptor)
		e.Related = &ref
	}
	return e
}

func podRef(key string) v1.ObjectReference {
	ns, name, _ := strings.Cut(key, "/")
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name}
}

func TestPreemptorSet(t *testing.T) {
	observed := func(nominated ...string) map[string]*podRecord {
		pods := map[string]*podRecord{}
		for _, key := range []string{"a/victim-0", "a/victim-1", "a/victim-2", "b/victim-0", "a/urgent-0", "a/urgent-1", "b/urgent-0"} {
			pods[key] = &podRecord{}
		}
		for _, key := range nominated {
			pods[key].nominated = true
		}
		return pods
	}
	onPodGroup := victimEvent("Reclaimed", "a/victim-0", "")
	onPodGroup.Regarding.Kind, onPodGroup.Regarding.APIVersion = "PodGroup", "scheduling.muster.dev/v1alpha1"
	relatedNode := victimEvent("Preempted", "a/victim-0", "")
	relatedNode.Related = &v1.ObjectReference{Kind: "Node", Name: "gpu-0"}

	tests := []struct {
		name   string
		pods   map[string]*podRecord
		events []*eventsv1.Event
		// evictions is the run's count; 1 unless a case says otherwise.
		evictions *int
		want      map[string]bool
	}{
		{
			name: "nothing happened",
			pods: observed(),
			want: map[string]bool{},
		},
		{
			name: "nominated without Events yet",
			pods: observed("a/urgent-0"),
			want: map[string]bool{"a/urgent-0": true},
		},
		{
			name:      "nominated in a run that evicted nothing: waiting at Permit or for its binding",
			pods:      observed("a/urgent-0"),
			evictions: ptr.To(0),
			want:      map[string]bool{},
		},
		{
			name: "kube-scheduler: nominated and related to its victims' Events, counted once",
			pods: observed("a/urgent-0"),
			events: []*eventsv1.Event{
				victimEvent("Preempted", "a/victim-0", "a/urgent-0"),
				victimEvent("Preempted", "a/victim-1", "a/urgent-0"),
			},
			want: map[string]bool{"a/urgent-0": true},
		},
		{
			name: "Muster reclaims without nominating",
			pods: observed(),
			events: []*eventsv1.Event{
				victimEvent("Reclaimed", "a/victim-0", "a/urgent-0"),
				victimEvent("Reclaimed", "a/victim-1", "a/urgent-0"),
				victimEvent("Preempted", "a/victim-2", "a/urgent-1"),
			},
			want: map[string]bool{"a/urgent-0": true, "a/urgent-1": true},
		},
		{
			name: "the same name in two namespaces is two preemptors",
			pods: observed(),
			events: []*eventsv1.Event{
				victimEvent("Reclaimed", "a/victim-0", "a/urgent-0"),
				victimEvent("Reclaimed", "b/victim-0", "b/urgent-0"),
			},
			want: map[string]bool{"a/urgent-0": true, "b/urgent-0": true},
		},
		{
			name: "Events that are not a victim's do not count",
			pods: observed(),
			events: []*eventsv1.Event{
				victimEvent("Scheduled", "a/victim-0", "a/urgent-0"),
				victimEvent("FailedScheduling", "a/urgent-0", "a/victim-0"),
				victimEvent("Reclaimed", "c/elsewhere", "a/urgent-0"),
				victimEvent("Preempted", "a/victim-1", ""),
				onPodGroup,
				relatedNode,
			},
			want: map[string]bool{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := preemptorSet(tc.pods, tc.events, ptr.Deref(tc.evictions, 1))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemptors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVictimsWithoutEvent(t *testing.T) {
	pods := func() map[string]*podRecord {
		return map[string]*podRecord{
			"a/victim-0": {evicted: true},
			"a/victim-1": {evicted: true},
			"a/finished": {},
			"a/urgent-0": {nominated: true},
		}
	}
	tests := []struct {
		name   string
		events []*eventsv1.Event
		want   int
	}{
		{"no Event yet", nil, 2},
		{"one of two", []*eventsv1.Event{victimEvent("Preempted", "a/victim-0", "a/urgent-0")}, 1},
		{"Reclaimed counts as Preempted", []*eventsv1.Event{
			victimEvent("Preempted", "a/victim-0", "a/urgent-0"),
			victimEvent("Reclaimed", "a/victim-1", "a/urgent-0"),
		}, 0},
		{"another reason is no victim Event", []*eventsv1.Event{
			victimEvent("Preempted", "a/victim-0", "a/urgent-0"),
			victimEvent("Killing", "a/victim-1", ""),
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := victimsWithoutEvent(pods(), tc.events); got != tc.want {
				t.Errorf("victimsWithoutEvent = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestReclaimedPods(t *testing.T) {
	bound := time.Unix(100, 0)
	pods := map[string]*podRecord{
		"a/job-0":   {gang: "job", bound: bound},
		"a/job-1":   {gang: "job", bound: bound},
		"a/job-2":   {gang: "job"}, // never bound
		"b/job-0":   {gang: "job", bound: bound},
		"a/solo":    {bound: bound},
		"a/other-0": {gang: "other", bound: bound},
	}
	tests := []struct {
		name       string
		preemptors map[string]bool
		want       int
	}{
		{"none", map[string]bool{}, 0},
		{"a pod in no gang", map[string]bool{"a/solo": true}, 1},
		{"one member stands for its gang's bound members, in its namespace only", map[string]bool{"a/job-0": true}, 2},
		{"two members of one gang count the gang once", map[string]bool{"a/job-0": true, "a/job-1": true}, 2},
		{"an unbound preemptor still counts", map[string]bool{"a/job-2": true}, 3},
		{"gangs of two namespaces", map[string]bool{"a/job-0": true, "b/job-0": true, "a/solo": true}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, reclaimedPods(pods, tc.preemptors)); diff != "" {
				t.Errorf("reclaimedPods (-want +got):\n%s", diff)
			}
		})
	}
}
