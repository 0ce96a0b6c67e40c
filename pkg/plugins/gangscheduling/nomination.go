package gangscheduling

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// reject rejects a member waiting at Permit and makes sure the nominated
// node the scheduler wrote for the wait does not outlive it.
//
// The scheduler writes the pod's status.nominatedNodeName before the wait
// and, on a rejection, clears it from its informer's copy of the pod. A
// member rejected moments after the write (its gang turned invalid as it
// arrived) may have a copy without it: the nomination then stays, and once
// the informer has it, the scheduler counts the member on that node for
// every pod of equal or lower priority, for as long as the member waits
// (for good, if its gang stays invalid). So where the informer's copy has
// no nomination yet, the nomination is removed here, if it is still the
// node's; a patch that finds otherwise changes nothing.
func (pl *Plugin) reject(logger klog.Logger, wp fwk.WaitingPod, msg string) {
	pod := wp.GetPod()
	node := pod.Spec.NodeName
	wp.Reject(Name, msg)
	seen, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(pod.Namespace).Get(pod.Name)
	if err != nil || seen.UID != pod.UID || seen.Status.NominatedNodeName != "" || node == "" {
		return
	}
	go pl.clearNomination(logger, pod.Namespace, pod.Name, pod.UID, node)
}

// clearNomination removes the pod's nominated node if it is node, as a
// JSON patch whose test fails when it is not (or the pod is another).
func (pl *Plugin) clearNomination(logger klog.Logger, namespace, name string, uid types.UID, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/uid","value":%q},`+
		`{"op":"test","path":"/status/nominatedNodeName","value":%q},`+
		`{"op":"remove","path":"/status/nominatedNodeName"}]`, uid, node)
	_, err := pl.handle.ClientSet().CoreV1().Pods(namespace).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err == nil {
		logger.V(3).Info("Cleared the nominated node of a member rejected at Permit", "pod", klog.KRef(namespace, name), "node", node)
	}
}
