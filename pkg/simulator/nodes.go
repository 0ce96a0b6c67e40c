// Package simulator plays the parts of a cluster that are not the control
// plane or the scheduler: nodes with no machines behind them, a kubelet that
// runs pods for a while and lets them finish, and an in-process scheduler.
package simulator

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// GPUResource is the extended resource simulated GPUs are counted in.
const GPUResource v1.ResourceName = "nvidia.com/gpu"

// NodeShape is the capacity and placement attributes of simulated nodes.
type NodeShape struct {
	CPU    string // e.g. "8"
	Memory string // e.g. "32Gi"
	Pods   int    // 110 when zero
	GPUs   int
	// Extended holds other extended resources, e.g. {"example.com/fpga": "2"}.
	Extended map[v1.ResourceName]string
	Labels   map[string]string
	Taints   []v1.Taint
}

// Node builds a Ready node of the shape: capacity equals allocatable.
func (s NodeShape) Node(name string) (*v1.Node, error) {
	pods := s.Pods
	if pods == 0 {
		pods = 110
	}
	capacity := v1.ResourceList{v1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	add := func(name v1.ResourceName, value string) error {
		if value == "" {
			return nil
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return fmt.Errorf("node %s: %s %q: %w", name, name, value, err)
		}
		capacity[name] = q
		return nil
	}
	if err := add(v1.ResourceCPU, s.CPU); err != nil {
		return nil, err
	}
	if err := add(v1.ResourceMemory, s.Memory); err != nil {
		return nil, err
	}
	if s.GPUs > 0 {
		capacity[GPUResource] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}
	for r, v := range s.Extended {
		if err := add(r, v); err != nil {
			return nil, err
		}
	}
	labels := map[string]string{v1.LabelHostname: name}
	for k, v := range s.Labels {
		labels[k] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: s.Taints},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       v1.NodeRunning,
			Conditions: []v1.NodeCondition{{
				Type:   v1.NodeReady,
				Status: v1.ConditionTrue,
				Reason: "SimulatedNode",
			}},
		},
	}, nil
}

// CreateNodes creates count nodes of a shape, named prefix-0, prefix-1, …
// Status is written through the status subresource, as a kubelet would.
func CreateNodes(ctx context.Context, client kubernetes.Interface, prefix string, count int, shape NodeShape) ([]*v1.Node, error) {
	var nodes []*v1.Node
	for i := range count {
		node, err := shape.Node(fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			return nil, err
		}
		created, err := CreateNode(ctx, client, node)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, created)
	}
	return nodes, nil
}

// CreateNode creates node and then writes its status through the status
// subresource, as a kubelet would. A node whose status has no Ready
// condition is made Ready.
func CreateNode(ctx context.Context, client kubernetes.Interface, node *v1.Node) (*v1.Node, error) {
	status := *node.Status.DeepCopy()
	if !hasCondition(status.Conditions, v1.NodeReady) {
		status.Conditions = append(status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "SimulatedNode"})
	}
	if status.Allocatable == nil {
		status.Allocatable = status.Capacity
	}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	created.Status = status
	return client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

func hasCondition(conditions []v1.NodeCondition, t v1.NodeConditionType) bool {
	for _, c := range conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// DeleteNodes deletes every node of the cluster.
func DeleteNodes(ctx context.Context, client kubernetes.Interface) error {
	return client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}
