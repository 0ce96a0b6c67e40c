package requests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

// TestOfChargesAsTheNode: what Of says a pod requests is what
// kube-scheduler charges the node it is placed on, for every way a pod can
// ask: containers, init containers (the largest counts), sidecars (added
// to both), pod overhead, and pod-level resources.
func TestOfChargesAsTheNode(t *testing.T) {
	req := func(pairs ...string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Requests: v1.ResourceList{}}
		for i := 0; i+1 < len(pairs); i += 2 {
			r.Requests[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
		return r
	}
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.ResourceList
	}{
		{name: "no requests", pod: st.MakePod().Name("p").Container("c").Obj(), want: v1.ResourceList{}},
		{name: "containers", pod: st.MakePod().Name("p").
			Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).
			Req(map[v1.ResourceName]string{"cpu": "500m", "example.com/gpu": "2"}).Obj(),
			want: v1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("2")}},
		{name: "an init container larger than the containers", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: req("cpu", "3", "memory", "2Gi")}}
			return p
		}(), want: v1.ResourceList{"cpu": resource.MustParse("3"), "memory": resource.MustParse("2Gi")}},
		{name: "a sidecar adds to the containers", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			p.Spec.InitContainers = []v1.Container{
				{Name: "sidecar", RestartPolicy: &always, Resources: req("cpu", "500m")},
				{Name: "init", Resources: req("cpu", "1")},
			}
			return p
		}(), want: v1.ResourceList{"cpu": resource.MustParse("1500m")}},
		{name: "pod overhead", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj()
			p.Spec.Overhead = v1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("128Mi")}
			return p
		}(), want: v1.ResourceList{"cpu": resource.MustParse("1250m"), "memory": resource.MustParse("1152Mi")}},
		{name: "pod-level resources", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			p.Spec.Resources = ptr.To(req("cpu", "4", "memory", "4Gi"))
			return p
		}(), want: v1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("4Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Of(tt.pod)
			if diff := cmp.Diff(framework.NewResource(tt.want), framework.NewResource(got)); diff != "" {
				t.Errorf("Of (-want,+got):\n%s", diff)
			}
			node := framework.NewNodeInfo()
			node.SetNode(st.MakeNode().Name("n").Obj())
			node.AddPod(tt.pod)
			charged := node.GetRequested()
			if diff := cmp.Diff(charged, fwk.Resource(framework.NewResource(got))); diff != "" {
				t.Errorf("the node is charged otherwise (-charged,+Of):\n%s", diff)
			}
		})
	}
}
