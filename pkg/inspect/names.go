package inspect

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names lists what `muster explain kind` can be asked about in the
// namespace, sorted, for shell completion: pods; PodGroups of every kind
// and the label-only gangs of the namespace's pods; Muster and Volcano
// queues.
func Names(ctx context.Context, c Clients, kind, namespace string) ([]string, error) {
	set := map[string]bool{}
	switch kind {
	case "pod", "pods", "po", "podgroup", "podgroups", "mpg", "pg":
		pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if kind == "pod" || kind == "pods" || kind == "po" {
				set[p.Name] = true
			} else if key, ok := keyOf(p); ok {
				set[key.Name] = true
			}
		}
		if kind == "pod" || kind == "pods" || kind == "po" {
			break
		}
		for _, k := range groupKinds {
			if err := c.addNames(ctx, set, k.gvr, namespace); err != nil {
				return nil, err
			}
		}
	case "queue", "queues", "mq", "q":
		for _, gvr := range queueGVRs {
			if err := c.addNames(ctx, set, gvr, ""); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (c Clients) addNames(ctx context.Context, set map[string]bool, gvr schema.GroupVersionResource, namespace string) error {
	list, err := c.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil // that kind's CRD is not installed
	}
	if err != nil {
		return err
	}
	for _, o := range list.Items {
		set[o.GetName()] = true
	}
	return nil
}
