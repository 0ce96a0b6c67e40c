package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupSpec describes a gang: the pods labelled muster.dev/pod-group=<name>
// in the PodGroup's namespace are scheduled all together or not at all.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minTaskMember) || self.minTaskMember.map(r, self.minTaskMember[r]).sum() <= self.minMember",message="the sum of minTaskMember must not exceed minMember",fieldPath=".minTaskMember"
type PodGroupSpec struct {
	// MinMember is how many members must be placed together before any of
	// them binds. Members beyond it (an elastic gang) schedule one by one
	// once the group is ready.
	// +kubebuilder:validation:Minimum=1
	MinMember int32 `json:"minMember"`

	// MinTaskMember is the minimum per role (pod label muster.dev/role, or
	// the annotation volcano.sh/task-spec). Its sum must not exceed minMember.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(r, self[r] >= 0)",message="every role minimum must be >= 0"
	MinTaskMember map[string]int32 `json:"minTaskMember,omitempty"`

	// MinResources is what the gang needs to start; queue admission checks
	// it. When empty it is derived from the requests of minMember members.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, !quantity(string(self[r])).isLessThan(quantity('0')))",message="quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(r, quantity(string(self[r])).compareTo(quantity(r == 'cpu' ? '9T' : '9P')) <= 0)",message="quantities must not exceed 9P (9T for cpu)"
	MinResources map[corev1.ResourceName]resource.Quantity `json:"minResources,omitempty"`

	// Queue is the leaf Queue the gang belongs to; empty means "default".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Queue string `json:"queue,omitempty"`

	// PriorityClassName gives the gang's priority for ordering and preemption
	// between gangs; empty means the priority of its pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ScheduleTimeoutSeconds bounds how long placed members wait at Permit
	// for the rest of the gang before the gang is released and backs off.
	// Empty means the scheduler's default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`

	// Topology keeps the gang within one topology domain (a rack, a
	// block); empty means the queue's default, else none.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`
}

// TopologySpec constrains where a gang's members go, by node label keys.
// +kubebuilder:validation:XValidation:rule="has(self.required) || has(self.preferred)",message="set required, preferred or both"
type TopologySpec struct {
	// Required is a node label key: every member (at least minMember of
	// them) is placed on nodes that share one value of it, or the gang
	// waits, holding nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a node label key, such as topology.muster.dev/rack"
	Required string `json:"required,omitempty"`
	// Preferred is a node label key: the gang is placed in one domain of
	// the tightest level, from this one up along the scheduler's topology
	// levels (up to Required, if set), where it fits.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a node label key, such as topology.muster.dev/rack"
	Preferred string `json:"preferred,omitempty"`
}

// PodGroupPhase is where a gang is in its life.
// +kubebuilder:validation:Enum=Pending;Inqueue;Running;Completed;Unknown;Failed
type PodGroupPhase string

const (
	// PodGroupPending: not valid yet, not admitted by its queue, or
	// admitted but it could not be placed, even by reclaim (admission is
	// then given back until the gang is tried again).
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupInqueue: admitted by its queue; its members are being placed.
	PodGroupInqueue PodGroupPhase = "Inqueue"
	// PodGroupRunning: at least minMember members are scheduled.
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupCompleted: at least minMember members succeeded and none is
	// left running or pending.
	PodGroupCompleted PodGroupPhase = "Completed"
	// PodGroupUnknown: it was Running and now fewer than minMember members
	// are scheduled (evictions, failures).
	PodGroupUnknown PodGroupPhase = "Unknown"
	// PodGroupFailed: so many members failed that minMember can no longer
	// succeed.
	PodGroupFailed PodGroupPhase = "Failed"
)

// PodGroupStatus is what the scheduler observed of the gang.
type PodGroupStatus struct {
	// Phase of the gang.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// Scheduled counts members bound to a node (running and finished included).
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`
	// Running counts members in phase Running.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts members in phase Succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed counts members in phase Failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Conditions say why the gang is where it is, in words a user can act on.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ScheduleStartTime is when the scheduler first tried to place the gang.
	// +optional
	ScheduleStartTime *metav1.Time `json:"scheduleStartTime,omitempty"`
}

// PodGroup is one gang of pods that are scheduled all or nothing.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=mpg,categories=muster
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="MinMember",type=integer,JSONPath=`.spec.minMember`
// +kubebuilder:printcolumn:name="Scheduled",type=integer,JSONPath=`.status.scheduled`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`,priority=1
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`,priority=1
// +kubebuilder:printcolumn:name="Min-CPU",type=string,JSONPath=`.spec.minResources.cpu`,priority=1
// +kubebuilder:printcolumn:name="Min-Memory",type=string,JSONPath=`.spec.minResources.memory`,priority=1
// +kubebuilder:printcolumn:name="Min-GPU",type=string,JSONPath=`.spec.minResources.nvidia\.com/gpu`,priority=1
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PodGroupSpec `json:"spec"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupList is a list of PodGroups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
