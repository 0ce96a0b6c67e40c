package gang

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestLessUnmanagedIsPrioritySort checks that pods in no gang are ordered
// exactly as kube-scheduler's PrioritySort orders them.
func TestLessUnmanagedIsPrioritySort(t *testing.T) {
	now := time.Now()
	var infos []*framework.QueuedPodInfo
	for i := range 12 {
		p := st.MakePod().Name(fmt.Sprintf("p%d", i)).Priority(int32(i % 3)).Obj()
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, &framework.QueuedPodInfo{PodInfo: pi, Timestamp: now.Add(time.Duration(i%4) * time.Second)})
	}
	stock := &queuesort.PrioritySort{}
	pl := &Gang{}
	for _, a := range infos {
		for _, b := range infos {
			if got, want := pl.Less(a, b), stock.Less(a, b); got != want {
				t.Errorf("Less(%s, %s) = %v, PrioritySort says %v", a.Pod.Name, b.Pod.Name, got, want)
			}
		}
	}
}
