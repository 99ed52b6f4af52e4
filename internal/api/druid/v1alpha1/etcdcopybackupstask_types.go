package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdCopyBackupsTask is etcd-druid's order to copy the backups of one store to another, for a
// control-plane migration: the Etcd that will use the target store then restores from them.
// etcd-druid runs a Job (etcd-backup-restore's copy command); etcd-conductor's manager copies
// the objects itself (internal/store/backupcopy), each one verified, and a run that stopped half-way
// finishes on the next without copying again what the target already holds.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCopyBackupsTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec EtcdCopyBackupsTaskSpec `json:"spec,omitempty"`
	// +optional
	Status EtcdCopyBackupsTaskStatus `json:"status,omitempty"`
}

// EtcdCopyBackupsTaskList is a list of EtcdCopyBackupsTasks.
//
// +kubebuilder:object:root=true
type EtcdCopyBackupsTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCopyBackupsTask `json:"items"`
}

// EtcdCopyBackupsTaskSpec is which backups to copy, from where to where.
type EtcdCopyBackupsTaskSpec struct {
	// PodLabels are the labels etcd-druid puts on its copy Job's pods. etcd-conductor runs no
	// pod for a copy: accepted and not acted on.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// SourceStore is the store the backups are read from.
	SourceStore StoreSpec `json:"sourceStore"`
	// TargetStore is the store the backups are written to.
	TargetStore StoreSpec `json:"targetStore"`
	// MaxBackupAge, in days, leaves out every backup (a full snapshot and the deltas that
	// continue it) whose full snapshot is older. Unset: no backup is too old.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxBackupAge *uint32 `json:"maxBackupAge,omitempty"`
	// MaxBackups is how many backups are copied at most, the newest first. Unset: all.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxBackups *uint32 `json:"maxBackups,omitempty"`
	// WaitForFinalSnapshot holds the copy until the source store holds a final full snapshot.
	// +optional
	WaitForFinalSnapshot *WaitForFinalSnapshotSpec `json:"waitForFinalSnapshot,omitempty"`
}

// WaitForFinalSnapshotSpec is the wait for the source's last full snapshot before the copy.
type WaitForFinalSnapshotSpec struct {
	// Enabled turns the wait on.
	Enabled bool `json:"enabled"`
	// Timeout bounds the wait; once it has passed the backups are copied anyway. Unset or 0:
	// wait as long as it takes.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^(0|([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// The condition types of an EtcdCopyBackupsTask, etcd-druid's (there the copy Job's Complete and
// Failed conditions). Each is True once and for good: a task that finished is not run again.
const (
	EtcdCopyBackupsTaskSucceeded ConditionType = "Succeeded"
	EtcdCopyBackupsTaskFailed    ConditionType = "Failed"
)

// EtcdCopyBackupsTaskStatus is what the operator observed of a task.
type EtcdCopyBackupsTaskStatus struct {
	// Conditions are Succeeded or Failed once the task finished.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// ObservedGeneration is the generation of the spec the status is about.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastError is the latest error of an unfinished task (the copy is retried); empty after a
	// run without one.
	// +optional
	LastError *string `json:"lastError,omitempty"`
}
