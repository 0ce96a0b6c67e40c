package integration

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// specRows: quantities out of range, timeouts below 1, priority classes
// and queues a namespace may not use.
func specRows() []badInput {
	inG := map[string]string{v1alpha1.LabelPodGroup: "g"}
	return []badInput{
		refusedQueue("negative quantity in a Queue's capability", v1alpha1.QueueSpec{Capability: res("cpu", "-1")},
			"spec.capability: Invalid value: quantities must not be negative"),
		refusedQueue("negative quantity in a Queue's guarantee", v1alpha1.QueueSpec{Guarantee: res("memory", "-1Gi")},
			"spec.guarantee: Invalid value: quantities must not be negative"),
		refusedQueue("quantity beyond int64 milli-units in a Queue's deserved", v1alpha1.QueueSpec{Deserved: res("cpu", "10000000000000000")},
			"spec.deserved: Invalid value: quantities must not exceed 9P (9T for cpu)"),
		refusedPodGroup("negative quantity in a PodGroup's minResources", v1alpha1.PodGroupSpec{MinMember: 1, MinResources: res("nvidia.com/gpu", "-2")},
			"spec.minResources: Invalid value: quantities must not be negative"),
		refusedPodGroup("quantity in exponent form beyond the bound in minResources", v1alpha1.PodGroupSpec{MinMember: 1, MinResources: res("memory", "1e30")},
			"spec.minResources: Invalid value: quantities must not exceed 9P (9T for cpu)"),
		refusedPodGroup("PodGroup scheduleTimeoutSeconds 0", v1alpha1.PodGroupSpec{MinMember: 1, ScheduleTimeoutSeconds: ptr.To[int32](0)},
			"spec.scheduleTimeoutSeconds: Invalid value: 0"),
		{
			name: "pod requests beyond int64 milli-units in a queue",
			give: func(r *badRow) {
				r.queue("bi-huge", v1alpha1.QueueSpec{Weight: 1})
				huge := r.member("huge", "1", map[string]string{v1alpha1.LabelQueue: "bi-huge"})
				huge.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("10000000000000000")
				r.create(huge)
				r.pods = r.gang("g", "bi-huge", 1, 1, "1", nil)
			},
			then: func(r *badRow) {
				// Counted as 2^53 millicores, not as a wrapped negative
				// amount: it fits no queue share, the small gang binds.
				r.bindsWithin(10*time.Second, r.pods...)
				r.staysUnbound(time.Second, "huge")
			},
		},
		spTimeout(0),
		spTimeout(-1),
		{
			// The events API folds Events of one object and reason into a
			// series with the first note: the second must still be told.
			name: "scheduler-plugins PodGroup created after its pods, with scheduleTimeoutSeconds 0",
			give: func(r *badRow) {
				r.pods = r.members("g", 2, "1", map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "g"})
			},
			then: func(r *badRow) {
				r.waitNote("GangInvalid", `^gang g: scheduler-plugins PodGroup \S+/g does not exist$`)
				createSPPodGroup(r, 0)
				r.waitNote("GangInvalid", `^gang g: scheduler-plugins PodGroup \S+/g has scheduleTimeoutSeconds 0; want >= 1 or unset$`)
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			name: "PodGroup naming a PriorityClass that does not exist, created later",
			give: func(r *badRow) {
				r.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 2, PriorityClassName: "bi-" + r.ns})
				r.pods = r.members("g", 2, "1", inG)
			},
			then: func(r *badRow) {
				r.waitCondition("g", "Invalid", `^PodGroup \S+/g names PriorityClass "bi-\S+", which does not exist$`)
				r.staysUnbound(time.Second, r.pods...)
				r.priorityClasses(map[string]int32{"bi-" + r.ns: 100})
				r.bindsWithin(10*time.Second, r.pods...)
			},
		},
		{
			name: "gang naming a queue its namespace may not use",
			give: func(r *badRow) {
				r.queue("bi-tenant", v1alpha1.QueueSpec{Weight: 1, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"muster.dev/test-team": "other"}}})
				r.pods = r.gang("g", "bi-tenant", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitCondition("g", "Unschedulable", `^namespace \S+ may not use queue bi-tenant: its namespaceSelector \(muster.dev/test-team=other\) does not match the namespace's labels$`)
				r.waitNote("Unschedulable", `may not use queue bi-tenant`)
				r.staysUnbound(time.Second, r.pods...)
			},
		},
		{
			name: "Queue namespaceSelector with an operator that does not exist",
			give: func(r *badRow) {
				r.queue("bi-badsel", v1alpha1.QueueSpec{Weight: 1, NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near", Values: []string{"a"}}},
				}})
				r.pods = r.gang("g", "bi-badsel", 2, 2, "1", nil)
			},
			then: func(r *badRow) {
				r.waitCondition("g", "Unschedulable", `^queue bi-badsel: namespaceSelector: "Near" is not a valid label selector operator$`)
				r.staysUnbound(time.Second, r.pods...)
			},
		},
	}
}

// refusedQueue is a row of a Queue the apiserver refuses with want.
func refusedQueue(name string, spec v1alpha1.QueueSpec, want string) badInput {
	return badInput{
		name: name,
		give: func(r *badRow) {
			_, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(r.ctx, &v1alpha1.Queue{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "bi-"}, Spec: spec,
			}, metav1.CreateOptions{})
			r.refused(err, want)
		},
		then: func(*badRow) {},
	}
}

// refusedPodGroup is a row of a PodGroup the apiserver refuses with want.
func refusedPodGroup(name string, spec v1alpha1.PodGroupSpec, want string) badInput {
	return badInput{
		name: name,
		give: func(r *badRow) {
			_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(r.ns).Create(r.ctx, &v1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: spec,
			}, metav1.CreateOptions{})
			r.refused(err, want)
		},
		then: func(*badRow) {},
	}
}

// spTimeout: a scheduler-plugins PodGroup (whose CRD has no minimum) with
// scheduleTimeoutSeconds below 1 would make Permit reject at once; Muster
// says so and schedules nothing of it.
func spTimeout(seconds int32) badInput {
	return badInput{
		name: "scheduler-plugins PodGroup scheduleTimeoutSeconds " + resource.NewQuantity(int64(seconds), resource.DecimalSI).String(),
		give: func(r *badRow) {
			createSPPodGroup(r, seconds)
			r.pods = r.members("g", 2, "1", map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "g"})
		},
		then: func(r *badRow) {
			r.waitNote("GangInvalid", `^gang g: scheduler-plugins PodGroup \S+/g has scheduleTimeoutSeconds -?\d+; want >= 1 or unset$`)
			r.staysUnbound(time.Second, r.pods...)
		},
	}
}

// createSPPodGroup creates the scheduler-plugins PodGroup g, of two
// members, with that scheduleTimeoutSeconds.
func createSPPodGroup(r *badRow, seconds int32) {
	sp, err := spclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = sp.SchedulingV1alpha1().PodGroups(r.ns).Create(context.Background(), &spv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: spv1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
}
