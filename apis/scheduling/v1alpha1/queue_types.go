package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultQueue is the queue of every group that names none. Muster recreates
// it when it is deleted.
const DefaultQueue = "default"

// RootQueue is the implicit top of the queue hierarchy: a queue whose parent
// is empty or "root" is a top-level queue. No Queue object may take the name.
const RootQueue = "root"

// QueueSpec describes a share of the cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.guarantee) || !has(self.deserved) || self.guarantee.all(r, !(r in self.deserved) || quantity(string(self.guarantee[r])).compareTo(quantity(string(self.deserved[r]))) <= 0)",message="guarantee must not exceed deserved for any resource",fieldPath=".guarantee"
// +kubebuilder:validation:XValidation:rule="!has(self.deserved) || !has(self.capability) || self.deserved.all(r, !(r in self.capability) || quantity(string(self.deserved[r])).compareTo(quantity(string(self.capability[r]))) <= 0)",message="deserved must not exceed capability for any resource",fieldPath=".deserved"
// +kubebuilder:validation:XValidation:rule="!has(self.guarantee) || !has(self.capability) || self.guarantee.all(r, !(r in self.capability) || quantity(string(self.guarantee[r])).compareTo(quantity(string(self.capability[r]))) <= 0)",message="guarantee must not exceed capability for any resource",fieldPath=".guarantee"
type QueueSpec struct {
	// Weight is the queue's share relative to its siblings under the
	// proportion policy.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Weight int32 `json:"weight,omitempty"`

	// Priority orders queues: pods of a higher-priority queue are tried first.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// Capability is the hard ceiling of what the queue may hold. A resource
	// it does not name is unlimited (or inherited from the parent queue).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, !quantity(string(self[r])).isLessThan(quantity('0')))",message="quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(r, quantity(string(self[r])).compareTo(quantity(r == 'cpu' ? '9T' : '9P')) <= 0)",message="quantities must not exceed 9P (9T for cpu)"
	Capability map[corev1.ResourceName]resource.Quantity `json:"capability,omitempty"`

	// Guarantee is reserved for this queue: others never reclaim below it and
	// it is kept out of what other queues divide.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, !quantity(string(self[r])).isLessThan(quantity('0')))",message="quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(r, quantity(string(self[r])).compareTo(quantity(r == 'cpu' ? '9T' : '9P')) <= 0)",message="quantities must not exceed 9P (9T for cpu)"
	Guarantee map[corev1.ResourceName]resource.Quantity `json:"guarantee,omitempty"`

	// Deserved is the queue's explicit share under the capacity policy: the
	// line reclaim works to.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, !quantity(string(self[r])).isLessThan(quantity('0')))",message="quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(r, quantity(string(self[r])).compareTo(quantity(r == 'cpu' ? '9T' : '9P')) <= 0)",message="quantities must not exceed 9P (9T for cpu)"
	Deserved map[corev1.ResourceName]resource.Quantity `json:"deserved,omitempty"`

	// Reclaimable lets other queues take back what this queue holds above
	// its deserved share.
	// +optional
	// +kubebuilder:default=true
	Reclaimable *bool `json:"reclaimable,omitempty"`

	// Parent is the queue this one shares out of; empty or "root" means the
	// top of the hierarchy.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Parent string `json:"parent,omitempty"`

	// NamespaceSelector says which namespaces may submit to the queue: a
	// gang or pod naming it from a namespace whose labels it does not match
	// is not admitted, and reclaims nothing. The selectors of the queue's
	// ancestors apply too. Empty means every namespace. Pair it with RBAC
	// that lets only cluster admins edit Queues and label namespaces.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// State Open admits new groups; Closed admits none while what already
	// runs continues.
	// +optional
	// +kubebuilder:default=Open
	// +kubebuilder:validation:Enum=Open;Closed
	State QueueState `json:"state,omitempty"`

	// Topology is the topology constraint of the queue's gangs that give
	// none of their own (their PodGroup, annotations, or upstream or
	// Volcano fields). Pods in no gang are not constrained.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`
}

// QueueState is whether a queue admits new groups.
type QueueState string

const (
	// QueueOpen admits new groups.
	QueueOpen QueueState = "Open"
	// QueueClosed admits no new groups.
	QueueClosed QueueState = "Closed"
	// QueueClosing is reported in status for a Closed queue that still has
	// running groups.
	QueueClosing QueueState = "Closing"
)

// QueueStatus is what the scheduler computed for the queue.
type QueueStatus struct {
	// State is Open, Closing (closed but groups still run) or Closed.
	// +optional
	State QueueState `json:"state,omitempty"`
	// Allocated is the sum of requests of the queue's placed and running
	// managed pods.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Deserved is the share the active policy computed for the queue.
	// +optional
	Deserved corev1.ResourceList `json:"deserved,omitempty"`
	// RealCapability is the ceiling after guarantees of other queues and the
	// parent's ceiling are taken into account.
	// +optional
	RealCapability corev1.ResourceList `json:"realCapability,omitempty"`
	// Pending counts the queue's groups in phase Pending.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Inqueue counts the queue's groups in phase Inqueue.
	// +optional
	Inqueue int32 `json:"inqueue,omitempty"`
	// Running counts the queue's groups in phase Running.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Completed counts the queue's groups in phase Completed.
	// +optional
	Completed int32 `json:"completed,omitempty"`
	// Unknown counts the queue's groups in phase Unknown.
	// +optional
	Unknown int32 `json:"unknown,omitempty"`
	// Failed counts the queue's groups in phase Failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Conditions say why the queue is where it is.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Queue is a share of the cluster that groups are admitted to and placed in.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mq,categories=muster
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'root'",message="root is the implicit top of the queue hierarchy and cannot be a Queue's name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",message="spec.parent must not name the queue itself"
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="CPU-Allocated",type=string,JSONPath=`.status.allocated.cpu`
// +kubebuilder:printcolumn:name="CPU-Deserved",type=string,JSONPath=`.status.deserved.cpu`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Memory-Allocated",type=string,JSONPath=`.status.allocated.memory`,priority=1
// +kubebuilder:printcolumn:name="Memory-Deserved",type=string,JSONPath=`.status.deserved.memory`,priority=1
// +kubebuilder:printcolumn:name="GPU-Allocated",type=string,JSONPath=`.status.allocated.nvidia\.com/gpu`,priority=1
// +kubebuilder:printcolumn:name="GPU-Deserved",type=string,JSONPath=`.status.deserved.nvidia\.com/gpu`,priority=1
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`,priority=1
// +kubebuilder:printcolumn:name="Inqueue",type=integer,JSONPath=`.status.inqueue`,priority=1
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec QueueSpec `json:"spec,omitempty"`
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueList is a list of Queues.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
