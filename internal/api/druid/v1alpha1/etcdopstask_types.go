package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdOpsTask is etcd-druid's (v0.34+) order for one operation on an Etcd of its namespace. The
// operator carries out on-demand snapshots (spec.config.onDemandSnapshot); a task finished
// (Succeeded, Failed or Rejected) is deleted spec.ttlSecondsAfterFinished later.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=eot,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Etcd",type=string,JSONPath=`.spec.etcdName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterFinished`,priority=1
type EtcdOpsTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec EtcdOpsTaskSpec `json:"spec"`
	// +optional
	Status EtcdOpsTaskStatus `json:"status,omitempty"`
}

// EtcdOpsTaskList is a list of EtcdOpsTasks.
//
// +kubebuilder:object:root=true
type EtcdOpsTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdOpsTask `json:"items"`
}

// DefaultOpsTaskTTLSeconds is how long a finished task is kept when the spec does not say (the
// apiserver defaults the field to it; the controller assumes it for objects stored before).
const DefaultOpsTaskTTLSeconds = 3600

// EtcdOpsTaskSpec is what to do, on which Etcd. Every field is immutable.
type EtcdOpsTaskSpec struct {
	// Config is the operation: exactly one of its members is set.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable"
	Config EtcdOpsTaskConfig `json:"config"`
	// TTLSecondsAfterFinished is how long a finished task is kept before it is deleted.
	// +optional
	// +kubebuilder:default:=3600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ttlSecondsAfterFinished is immutable"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// EtcdName names the Etcd, in the task's namespace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="etcdName is immutable"
	EtcdName *string `json:"etcdName"`
}

// EtcdOpsTaskConfig holds the one operation a task carries out.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type EtcdOpsTaskConfig struct {
	// OnDemandSnapshot takes a full or delta snapshot now.
	// +optional
	OnDemandSnapshot *OnDemandSnapshotConfig `json:"onDemandSnapshot,omitempty"`
}

// OnDemandSnapshotType is a full or a delta snapshot.
//
// +kubebuilder:validation:Enum=full;delta
type OnDemandSnapshotType string

const (
	OnDemandSnapshotTypeFull  OnDemandSnapshotType = "full"
	OnDemandSnapshotTypeDelta OnDemandSnapshotType = "delta"
)

// Timeouts the apiserver defaults OnDemandSnapshotConfig to (etcd-druid's).
const (
	DefaultOnDemandTimeoutSecondsFull  = 480
	DefaultOnDemandTimeoutSecondsDelta = 60
)

// OnDemandSnapshotConfig is an on-demand snapshot.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'delta' ? !has(self.isFinal) || self.isFinal == false : true",message="isFinal must be false (or omitted) when type is 'delta'"
type OnDemandSnapshotConfig struct {
	// Type is full or delta.
	// +kubebuilder:validation:Required
	Type OnDemandSnapshotType `json:"type"`
	// IsFinal marks a full snapshot as the last before the cluster is scaled to zero; the
	// operator accepts it and takes a normal full snapshot.
	// +optional
	IsFinal *bool `json:"isFinal,omitempty"`
	// TimeoutSecondsDelta bounds a delta snapshot, from the task's start.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	TimeoutSecondsDelta *int32 `json:"timeoutSecondsDelta,omitempty"`
	// TimeoutSecondsFull bounds a full snapshot, from the task's start.
	// +optional
	// +kubebuilder:default=480
	// +kubebuilder:validation:Minimum=1
	TimeoutSecondsFull *int32 `json:"timeoutSecondsFull,omitempty"`
}

// TaskState is where a task is: Pending → InProgress → Succeeded or Failed; Pending → Rejected.
//
// +kubebuilder:validation:Enum=Pending;InProgress;Succeeded;Failed;Rejected
type TaskState string

const (
	TaskStatePending    TaskState = "Pending"
	TaskStateInProgress TaskState = "InProgress"
	TaskStateSucceeded  TaskState = "Succeeded"
	TaskStateFailed     TaskState = "Failed"
	TaskStateRejected   TaskState = "Rejected"
)

// Finished says whether s is a final state.
func (s TaskState) Finished() bool {
	return s == TaskStateSucceeded || s == TaskStateFailed || s == TaskStateRejected
}

// OperationPhase is the part of a task's life its lastOperation is about.
//
// +kubebuilder:validation:Enum=Admit;Running;Cleanup
type OperationPhase string

const (
	OperationPhaseAdmit   OperationPhase = "Admit"
	OperationPhaseRunning OperationPhase = "Running"
	OperationPhaseCleanup OperationPhase = "Cleanup"
)

// EtcdOpsTaskStatus is what the operator observed of a task.
type EtcdOpsTaskStatus struct {
	// State is the task's state.
	// +optional
	State *TaskState `json:"state,omitempty"`
	// LastTransitionTime is when State last changed; the TTL counts from it once finished.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// StartedAt is when the task went InProgress; its timeout counts from it.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Phase is Admit, Running or Cleanup.
	// +optional
	Phase *OperationPhase `json:"phase,omitempty"`
	// LastErrors are the latest errors, at most 10.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	LastErrors []LastError `json:"lastErrors,omitempty"`
	// LastOperation is the latest step: its type is the phase, its state InProgress, Completed
	// or Failed.
	// +optional
	LastOperation *LastOperation `json:"lastOperation,omitempty"`
}
