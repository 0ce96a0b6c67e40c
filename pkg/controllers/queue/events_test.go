package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/queue"
)

// drain returns the Events recorded since the last drain.
func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func testController(t *testing.T, queues ...string) (*Controller, *events.FakeRecorder) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range queues {
		if err := indexer.Add(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	r := events.NewFakeRecorder(100)
	c := New(nil, musterlisters.NewQueueLister(indexer), nil, nil, r)
	return c, r
}

// TestRecordRefusals: a gang's refusal is told once per reason while it
// waits, however its figures move, and again after it was ready or gone.
func TestRecordRefusals(t *testing.T) {
	c, r := testController(t, "small")
	a := gang.Key{Family: gang.FamilyMuster, Namespace: "ns", Name: "a"}
	alive := map[gang.Key]bool{a: true}
	over := func(why string) map[string][]refusal {
		return map[string][]refusal{"small": {{key: a, reason: queue.ReasonOverCeiling, why: why}}}
	}
	steps := []struct {
		name    string
		refused map[string][]refusal
		alive   map[gang.Key]bool
		want    []string
	}{{
		name:    "refused",
		refused: over("queue small: cpu 4 allocated+inqueue of 6 deserved, gang needs 8"),
		alive:   alive,
		want:    []string{"Warning AdmissionRefused gang ns/a not admitted: queue small: cpu 4 allocated+inqueue of 6 deserved, gang needs 8"},
	}, {
		name:    "refused again, other figures",
		refused: over("queue small: cpu 2 allocated+inqueue of 6 deserved, gang needs 8"),
		alive:   alive,
	}, {
		name:    "refused for another reason",
		refused: map[string][]refusal{"small": {{key: a, reason: queue.ReasonQueueClosed, why: "queue small is closed"}}},
		alive:   alive,
		want:    []string{"Warning AdmissionRefused gang ns/a not admitted: queue small is closed"},
	}, {
		name:  "ready",
		alive: map[gang.Key]bool{},
	}, {
		name:    "refused once more",
		refused: over("queue small: cpu 6 allocated+inqueue of 6 deserved, gang needs 8"),
		alive:   alive,
		want:    []string{"Warning AdmissionRefused gang ns/a not admitted: queue small: cpu 6 allocated+inqueue of 6 deserved, gang needs 8"},
	}, {
		name:    "its queue does not exist",
		refused: map[string][]refusal{"gone": {{key: a, reason: queue.ReasonQueueMissing, why: "queue gone does not exist"}}},
		alive:   alive,
	}}
	for _, s := range steps {
		c.recordRefusals(s.refused, s.alive)
		if diff := cmp.Diff(s.want, drain(r)); diff != "" {
			t.Errorf("%s: Events (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestRecordTransitions(t *testing.T) {
	valid := func(s metav1.ConditionStatus, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionValid, Status: s, Message: msg}}
	}
	cases := []struct {
		name          string
		before, after v1alpha1.QueueStatus
		want          []string
	}{{
		name:  "a new open queue",
		after: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Conditions: valid(metav1.ConditionTrue, "")},
	}, {
		name:   "figures only",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Running: 1},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Running: 2},
	}, {
		name:   "closing",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueClosing, Running: 2, Inqueue: 1},
		want:   []string{"Normal Closing the queue is closing: it admits no new gang; 2 running, 1 inqueue and 0 unknown gangs finish first"},
	}, {
		name:   "closed",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueClosing},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueClosed},
		want:   []string{"Normal Closed the queue is closed: no gang of it runs and it admits none; set spec.state to Open to admit again"},
	}, {
		name:   "opened",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueClosed},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueOpen},
		want:   []string{"Normal Opened the queue is open: it admits new gangs"},
	}, {
		name:  "a new queue closed and invalid",
		after: v1alpha1.QueueStatus{State: v1alpha1.QueueClosed, Conditions: valid(metav1.ConditionFalse, `parent queue "x" does not exist`)},
		want: []string{
			"Normal Closed the queue is closed: no gang of it runs and it admits none; set spec.state to Open to admit again",
			`Warning Invalid parent queue "x" does not exist: the queue admits no gang and deserves only what it holds until that is fixed`,
		},
	}, {
		name:   "still invalid, another message",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Conditions: valid(metav1.ConditionFalse, `parent queue "x" does not exist`)},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Conditions: valid(metav1.ConditionFalse, "parent chain loops: a -> b -> a")},
	}, {
		name:   "valid again",
		before: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Conditions: valid(metav1.ConditionFalse, `parent queue "x" does not exist`)},
		after:  v1alpha1.QueueStatus{State: v1alpha1.QueueOpen, Conditions: valid(metav1.ConditionTrue, "")},
		want:   []string{"Normal Valid the queue's place in the hierarchy is valid again"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, r := testController(t)
			c.recordTransitions(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q"}}, &tc.before, &tc.after)
			if diff := cmp.Diff(tc.want, drain(r)); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmitting(t *testing.T) {
	figures := func(name, parent string, closed bool, children ...string) *queue.Figures {
		return &queue.Figures{Spec: queue.Spec{Name: name, Parent: parent, Closed: closed}, Children: children}
	}
	snap := &queue.Snapshot{Queues: map[string]*queue.Figures{
		"org":     figures("org", "", false, "team", "other"),
		"team":    figures("team", "org", false),
		"other":   figures("other", "org", false),
		"shut":    figures("shut", "", true, "below"),
		"below":   figures("below", "shut", false),
		"closed":  figures("closed", "", true),
		"orphan":  {Spec: queue.Spec{Name: "orphan", Parent: "x"}, Invalid: `parent queue "x" does not exist`},
		"default": figures("default", "", false),
	}}
	a := gang.Key{Namespace: "ns", Name: "a"}
	b := gang.Key{Namespace: "ns", Name: "b"}
	cases := []struct {
		queue   string
		status  v1alpha1.QueueStatus
		refused []refusal
		want    metav1.Condition
	}{{
		queue: "default",
		want:  metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAdmitting, Message: "it admits new gangs"},
	}, {
		queue:   "default",
		refused: []refusal{{key: a, reason: queue.ReasonNamespaceDenied, why: "namespace ns may not use queue default"}},
		want:    metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAdmitting, Message: "it admits new gangs"},
	}, {
		queue:  "orphan",
		status: v1alpha1.QueueStatus{State: v1alpha1.QueueOpen},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonInvalid,
			Message: `parent queue "x" does not exist; it admits no gang until that is fixed`},
	}, {
		queue: "org",
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonNotLeaf,
			Message: "it has child queues (other, team); gangs belong in leaf queues"},
	}, {
		queue:  "closed",
		status: v1alpha1.QueueStatus{State: v1alpha1.QueueClosing, Running: 2},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonClosing,
			Message: "the queue is closed: it admits no new gang; 2 running, 0 inqueue and 0 unknown gangs finish first"},
	}, {
		queue:  "closed",
		status: v1alpha1.QueueStatus{State: v1alpha1.QueueClosed},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonClosed,
			Message: "the queue is closed: it admits no new gang; set spec.state to Open to admit again"},
	}, {
		queue: "below",
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonParentClosed,
			Message: "queue shut is closed: it admits no new gang below it"},
	}, {
		queue: "team",
		refused: []refusal{
			{key: a, reason: queue.ReasonOvercommit, why: "cluster: cpu would be committed beyond 1.20 × allocatable"},
			{key: b, reason: queue.ReasonOverCeiling, why: "queue org: cpu 8 allocated+inqueue of 8 deserved, gang needs 2"},
		},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonAtCeiling,
			Message: "1 gang waits for room; ns/b: queue org: cpu 8 allocated+inqueue of 8 deserved, gang needs 2"},
	}, {
		queue:   "team",
		refused: []refusal{{key: a, reason: queue.ReasonOvercommit, why: "cluster: cpu would be committed beyond 1.20 × allocatable"}},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonOvercommitted,
			Message: "1 gang waits for room; ns/a: cluster: cpu would be committed beyond 1.20 × allocatable"},
	}}
	for _, tc := range cases {
		t.Run(tc.queue+"/"+tc.want.Reason, func(t *testing.T) {
			q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: tc.queue, Generation: 3}}
			got := admitting(snap, q, snap.Queues[tc.queue], &tc.status, tc.refused)
			tc.want.Type, tc.want.ObservedGeneration = ConditionAdmitting, 3
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Admitting (-want +got):\n%s", diff)
			}
		})
	}
}
