package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// TestUsageMoved checks which member updates reach the queue accounting
// (OnUsageChange): those that can change what the gang holds or asks for,
// not a member that only started running.
func TestUsageMoved(t *testing.T) {
	// withCPU is the member requesting cpu; base requests 1.
	withCPU := func(cpu string) *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name("p").UID("p").
			Labels(map[string]string{v1alpha1.LabelPodGroup: "g"}).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Priority(10)
	}
	base := func() *st.PodWrapper { return withCPU("1") }
	old := base().Obj()
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "the same pod", pod: base().Obj()},
		{name: "running, with conditions and an IP", pod: func() *v1.Pod {
			p := base().Phase(v1.PodRunning).Obj()
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			p.Status.PodIP = "10.0.0.1"
			return p
		}()},
		{name: "an unrelated annotation", pod: base().Annotation("team", "x").Obj()},
		{name: "bound", pod: base().Node("n1").Obj(), want: true},
		{name: "deleted", pod: base().Terminating().Obj(), want: true},
		{name: "succeeded", pod: base().Phase(v1.PodSucceeded).Obj(), want: true},
		{name: "failed", pod: base().Phase(v1.PodFailed).Obj(), want: true},
		{name: "priority", pod: base().Priority(20).Obj(), want: true},
		{name: "requests", pod: withCPU("2").Obj(), want: true},
		{name: "the same requests written otherwise", pod: withCPU("1000m").Obj()},
		{name: "a label", pod: base().Label(v1alpha1.LabelMinAvailable, "2").Obj(), want: true},
		{name: "the Volcano role annotation", pod: base().Annotation(v1alpha1.VolcanoAnnotationTaskSpec, "worker").Obj(), want: true},
	}
	requests := func(p *v1.Pod) v1.ResourceList {
		return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := usageMoved(old, tt.pod, requests(old), requests(tt.pod)); got != tt.want {
				t.Errorf("usageMoved = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTrimTerminated checks what the Manager keeps of a terminated pod: its
// identity alone for a pod in no gang, the pod without managed fields for
// a member.
func TestTrimTerminated(t *testing.T) {
	managedFields := []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	plain := st.MakePod().Namespace("ns").Name("web").UID("web").Labels(map[string]string{"app": "web"}).
		Node("n1").Phase(v1.PodSucceeded).Obj()
	plain.ResourceVersion, plain.ManagedFields = "7", managedFields
	member := st.MakePod().Namespace("ns").Name("m").UID("m").Labels(map[string]string{v1alpha1.LabelQueue: "q"}).
		Node("n1").Phase(v1.PodFailed).Obj()
	member.ResourceVersion, member.ManagedFields = "8", managedFields
	wantMember := member.DeepCopy()
	wantMember.ManagedFields = nil
	tests := []struct {
		name string
		pod  *v1.Pod
		want *v1.Pod
	}{
		{name: "a pod in no gang", pod: plain, want: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "web", ResourceVersion: "7"}}},
		{name: "a member", pod: member, want: wantMember},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&Manager{}).trimTerminated(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("trimTerminated (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnqueueChange: a Volcano PodGroup's status write reaches the queue
// accounting only when it enters Inqueue (a reservation) or leaves it
// (given back).
func TestEnqueueChange(t *testing.T) {
	pg := func(phase vcv1beta1.PodGroupPhase) *vcv1beta1.PodGroup {
		return &vcv1beta1.PodGroup{Status: vcv1beta1.PodGroupStatus{Phase: phase}}
	}
	tests := []struct {
		name     string
		old, new any
		want     change
	}{
		{name: "enqueued", old: pg(vcv1beta1.PodGroupPending), new: pg(vcv1beta1.PodGroupInqueue), want: usageChange},
		{name: "enqueued from no phase", old: pg(""), new: pg(vcv1beta1.PodGroupInqueue), want: usageChange},
		{name: "running", old: pg(vcv1beta1.PodGroupInqueue), new: pg(vcv1beta1.PodGroupRunning), want: releaseChange},
		{name: "still Inqueue", old: pg(vcv1beta1.PodGroupInqueue), new: pg(vcv1beta1.PodGroupInqueue), want: unchanged},
		{name: "still Pending", old: pg(vcv1beta1.PodGroupPending), new: pg(vcv1beta1.PodGroupPending), want: unchanged},
		{name: "not Volcano's", old: &v1alpha1.PodGroup{}, new: &v1alpha1.PodGroup{}, want: unchanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := enqueueChange(tt.old, tt.new); got != tt.want {
				t.Errorf("enqueueChange = %v, want %v", got, tt.want)
			}
		})
	}
}
