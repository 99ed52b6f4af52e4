package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Etcd is an etcd cluster managed by etcd-conductor.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcd
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Quorate",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="All-Updated",type=string,JSONPath=`.status.conditions[?(@.type=="AllMembersUpdated")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Etcd struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdSpec   `json:"spec"`
	Status EtcdStatus `json:"status,omitempty"`
}

// EtcdList is a list of Etcd resources.
//
// +kubebuilder:object:root=true
type EtcdList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Etcd `json:"items"`
}

// MaxReplicas is the largest spec.replicas accepted (the CRD's Maximum marker above must match;
// a unit test checks the generated CRD). etcd advises at most 7 voting members: every write waits
// for a majority, so more members mean more replication and slower elections, not more
// throughput. The bound is 9, not 7, so it stays odd and leaves headroom above the advised size:
// a 5→7 scale-out, with a member added or replaced while it runs, stays inside it. It also bounds
// everything the operator sizes by replicas or by a pod's ordinal, so one Etcd cannot make the
// manager allocate without limit.
const MaxReplicas = 9

// EtcdSpec is the desired state of an etcd cluster.
//
// +kubebuilder:validation:XValidation:rule="has(oldSelf.memberNamePrefix) == has(self.memberNamePrefix)",message="etcd.spec.memberNamePrefix is an immutable field."
type EtcdSpec struct {
	// Replicas is the number of members. etcd needs a majority to make progress, so only 0
	// (stopped) and odd sizes up to 9 are accepted.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1 || self == 0",message="replicas must be 0 or an odd number (1, 3, 5, 7, ...): an even-sized etcd cluster tolerates no more failures than the odd size below it"
	Replicas int32 `json:"replicas"`

	// Labels are added to every object created for this cluster, and select its pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to every object created for this cluster.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Etcd configures the etcd container.
	Etcd EtcdConfig `json:"etcd"`

	// PriorityClassName is set on the member pods.
	// +optional
	PriorityClassName *string `json:"priorityClassName,omitempty"`

	// StorageClass is the storage class of each member's data volume.
	// +optional
	StorageClass *string `json:"storageClass,omitempty"`

	// StorageCapacity is the size of each member's data volume (default 16Gi).
	// +optional
	StorageCapacity *resource.Quantity `json:"storageCapacity,omitempty"`

	// The fields below complete etcd-druid's spec (druid_fields.go holds their types); the
	// compatibility table (docs/etcd.md, docs/druid-compatibility.md) says which ones act and
	// which are accepted but ignored.

	// Selector is etcd-druid's deprecated pod selector. Ignored: the member pods are selected by
	// the operator's own labels, which never change for the life of the Etcd.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Backup configures the snapshots the leading member's agent takes to an object store.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// SharedConfig holds the auto-compaction settings of the members.
	// +optional
	SharedConfig *SharedConfig `json:"sharedConfig,omitempty"`

	// SchedulingConstraints are copied onto the member pods.
	// +optional
	SchedulingConstraints *SchedulingConstraints `json:"schedulingConstraints,omitempty"`

	// VolumeClaimTemplate is etcd-druid's name for the data volume claim. Accepted and ignored.
	// +optional
	VolumeClaimTemplate *string `json:"volumeClaimTemplate,omitempty"`

	// RunAsRoot is accepted and ignored: members never run as root.
	// +optional
	RunAsRoot *bool `json:"runAsRoot,omitempty"`

	// MemberNamePrefix is etcd-druid's prefix of member names: each etcd member and its member
	// Lease are named <prefix>-<pod>, the pods (and the StatefulSet) keep their names. Unset or
	// empty: members are named after their pods. Immutable, as in etcd-druid: it can be neither
	// changed nor added or removed after creation (the rule on EtcdSpec).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="etcd.spec.memberNamePrefix is an immutable field"
	MemberNamePrefix *string `json:"memberNamePrefix,omitempty"`
}

// EtcdConfig configures the etcd container of each member.
//
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrapWithExistingCluster) || has(oldSelf.bootstrapWithExistingCluster)",message="spec.etcd.bootstrapWithExistingCluster can only be set when the Etcd is created"
type EtcdConfig struct {
	// Image is the etcd container image.
	// +optional
	Image *string `json:"image,omitempty"`

	// ClientPort is the port serving clients (default 2379).
	// +optional
	ClientPort *int32 `json:"clientPort,omitempty"`

	// ServerPort is the port serving peers (default 2380).
	// +optional
	ServerPort *int32 `json:"serverPort,omitempty"`

	// ClientUrlTLS secures client traffic.
	// +optional
	ClientUrlTLS *TLSConfig `json:"clientUrlTls,omitempty"`

	// PeerUrlTLS secures peer traffic.
	// +optional
	PeerUrlTLS *PeerTLSConfig `json:"peerUrlTls,omitempty"`

	// Resources of the etcd container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// The fields below complete etcd-druid's etcd section.

	// Quota is the backend quota of each member (--quota-backend-bytes, default 8Gi).
	// +optional
	Quota *resource.Quantity `json:"quota,omitempty"`

	// SnapshotCount is the number of applied raft entries between snapshots (default 75000).
	// +optional
	// +kubebuilder:validation:Minimum=1
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`

	// DefragmentationSchedule is a standard 5-field cron schedule at which the operator
	// defragments the members one at a time, followers first.
	// +optional
	DefragmentationSchedule *string `json:"defragmentationSchedule,omitempty"`

	// WrapperPort is etcd-druid's etcd-wrapper port. Accepted and ignored.
	// +optional
	WrapperPort *int32 `json:"wrapperPort,omitempty"`

	// AuthSecretRef is etcd-druid's etcd auth Secret. Accepted and ignored (members use mTLS).
	// +optional
	AuthSecretRef *corev1.SecretReference `json:"authSecretRef,omitempty"`

	// Metrics is the member's metrics level (--metrics): basic or extensive.
	// +optional
	Metrics *MetricsLevel `json:"metrics,omitempty"`

	// EtcdDefragTimeout bounds one member's defragmentation (default 8m; etcd-druid's is 15m).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	EtcdDefragTimeout *metav1.Duration `json:"etcdDefragTimeout,omitempty"`

	// HeartbeatDuration is how often each member's agent renews its Lease.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	HeartbeatDuration *metav1.Duration `json:"heartbeatDuration,omitempty"`

	// ClientService adds annotations, labels and a traffic distribution to the client Service.
	// +optional
	ClientService *ClientService `json:"clientService,omitempty"`

	// The fields below came with etcd-druid v0.35 to v0.38 (druid_fields_newer.go holds their
	// types).

	// EnableGRPCGateway turns etcd's gRPC gateway (JSON over HTTP on the client port) on or off
	// (--enable-grpc-gateway). Unset: etcd's own default, on; etcd-druid turns it off.
	// +optional
	EnableGRPCGateway *bool `json:"enableGRPCGateway,omitempty"`

	// BackendBboltFreelistType is bbolt's freelist type, array or map
	// (--backend-bbolt-freelist-type). Unset: etcd's own default, map.
	// +optional
	BackendBboltFreelistType *BboltFreelistType `json:"backendBboltFreelistType,omitempty"`

	// AdditionalAdvertisePeerURLs are extra peer URLs a member advertises after its name under
	// the peer Service, by etcd member name (<prefix>-<pod> with spec.memberNamePrefix). A
	// learner is added with them; a change rolls the pods and each member's recorded peer URLs
	// then follow its pod's (MemberUpdate).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	AdditionalAdvertisePeerURLs []MemberPeerURLs `json:"additionalAdvertisePeerURLs,omitempty"`

	// BootstrapWithExistingCluster asks etcd-druid to form this cluster by joining an existing
	// one. Accepted, and not supported yet: no member is started (they would form a new, empty
	// cluster rather than join the source) and the condition BootstrappedWithExistingCluster says
	// so. As in etcd-druid it can only be set when the Etcd is created.
	// +optional
	BootstrapWithExistingCluster *BootstrapWithExistingCluster `json:"bootstrapWithExistingCluster,omitempty"`
}

// TLSConfig names the Secrets that hold a CA bundle and key pairs.
type TLSConfig struct {
	// TLSCASecretRef is the Secret holding the CA bundle.
	TLSCASecretRef SecretReference `json:"tlsCASecretRef"`

	// ServerTLSSecretRef is the Secret holding the server key pair (tls.crt, tls.key).
	ServerTLSSecretRef corev1.SecretReference `json:"serverTLSSecretRef"`

	// ClientTLSSecretRef is the Secret holding a client key pair (tls.crt, tls.key).
	// +optional
	ClientTLSSecretRef corev1.SecretReference `json:"clientTLSSecretRef,omitempty"`
}

// SecretReference names a Secret and the key inside it.
type SecretReference struct {
	corev1.SecretReference `json:",inline"`

	// DataKey is the key of the Secret's data that holds the value (default ca.crt).
	// +optional
	DataKey *string `json:"dataKey,omitempty"`
}

// EtcdStatus is the observed state of an etcd cluster.
type EtcdStatus struct {
	// ObservedGeneration is the generation of the spec the status was computed for.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (quorate), AllMembersReady, AllMembersUpdated.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`

	// Members is the state of each member.
	// +optional
	Members []EtcdMemberStatus `json:"members,omitempty"`

	// Replicas is the number of member pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of member pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// CurrentReplicas is the number of member pods at the StatefulSet's update revision, computed
	// from each pod's controller-revision-hash (the StatefulSet's own field lags under OnDelete).
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`

	// Ready is true when the cluster has quorum and all members are ready.
	// +optional
	Ready *bool `json:"ready,omitempty"`

	// Selector is the label selector of the member pods, for the scale subresource.
	// +optional
	Selector *string `json:"selector,omitempty"`

	// LastErrors are the errors of the last reconciliation.
	// +optional
	LastErrors []LastError `json:"lastErrors,omitempty"`

	// LastOperation is the last operation on the cluster.
	// +optional
	LastOperation *LastOperation `json:"lastOperation,omitempty"`

	// ClusterID is the etcd cluster ID (hex) the operator saw once the members formed the
	// cluster. It records that the cluster was bootstrapped: from then on a member without data
	// joins the existing cluster and never starts a new one. Not part of etcd-druid's API.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// Voters is the voting membership the operator last saw in the leader's member list while
	// the cluster recorded in ClusterID was quorate. Recovery reasons about these voters only:
	// nothing is restored from a backup unless a majority of them has proven that its data is
	// gone. Not part of etcd-druid's API.
	// +optional
	Voters []RecordedVoter `json:"voters,omitempty"`

	// Recovery is the restore from backup the operator has ordered (nil: none). It lives in the
	// status, which only the operator writes: a member's init step restores only when the
	// request here names its pod incarnation and carries the token it restores with. Not part of
	// etcd-druid's API.
	// +optional
	Recovery *RecoveryRequest `json:"recovery,omitempty"`

	// DataAside lists the data dirs the members' init steps keep aside next to their data dirs
	// (corrupt data, data of a removed member, the old data of a pod replaced after a restore, a
	// restore called off), as each member reports it on its Lease: at most the newest 10 per
	// member (the metrics etcd_conductor_member_data_aside_dirs and _bytes count them all).
	// Nothing deletes them: a person decides what to do with them. Not part of etcd-druid's API.
	// +optional
	DataAside []DataAside `json:"dataAside,omitempty"`

	// The fields below are etcd-druid's status fields the operator does not write; they are
	// declared so that status copied from an etcd-druid cluster is accepted.

	// +optional
	Etcd *CrossVersionObjectReference `json:"etcd,omitempty"`
	// LabelSelector is etcd-druid's deprecated structured selector.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	PeerUrlTLSEnabled *bool `json:"peerUrlTLSEnabled,omitempty"`
	// ServiceName is deprecated in etcd-druid.
	// +optional
	ServiceName *string `json:"serviceName,omitempty"`
	// LastError is etcd-druid's older single-error field; see LastErrors.
	// +optional
	LastError *string `json:"lastError,omitempty"`
	// ClusterSize is the number of voting members, as the Ready condition counts them (DEP-01;
	// removed from etcd-druid's API in v0.27).
	// +optional
	ClusterSize *int32 `json:"clusterSize,omitempty"`
	// UpdatedReplicas is deprecated in etcd-druid; see CurrentReplicas.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// BootstrapWithExistingCluster is etcd-druid's record of the source cluster joined.
	// +optional
	BootstrapWithExistingCluster *BootstrapWithExistingClusterStatus `json:"bootstrapWithExistingCluster,omitempty"`
}

// ConditionType names a condition.
type ConditionType string

// ConditionStatus is the status of a condition.
type ConditionStatus string

const (
	// ConditionTypeReady is True while the members form a quorum.
	ConditionTypeReady ConditionType = "Ready"
	// ConditionTypeAllMembersReady is True while every member is ready.
	ConditionTypeAllMembersReady ConditionType = "AllMembersReady"
	// ConditionTypeAllMembersUpdated is True while every member pod is at the update revision.
	ConditionTypeAllMembersUpdated ConditionType = "AllMembersUpdated"
	// ConditionTypeScaleOperationInProgress is True while the membership controller moves the
	// members towards spec.replicas (etcd-druid's name); its reason is the step it is on.
	ConditionTypeScaleOperationInProgress ConditionType = "ScaleOperationInProgress"
	// ConditionTypeBackupReady is True while both snapshot kinds below are (etcd-druid's name).
	ConditionTypeBackupReady ConditionType = "BackupReady"
	// ConditionTypeFullSnapshotBackupReady is True while the last full snapshot is on schedule.
	ConditionTypeFullSnapshotBackupReady ConditionType = "FullSnapshotBackupReady"
	// ConditionTypeDeltaSnapshotBackupReady is True while delta snapshots keep up with their period.
	ConditionTypeDeltaSnapshotBackupReady ConditionType = "DeltaSnapshotBackupReady"
	// RecoveryInProgress is True while the recovery controller restores a cluster that lost
	// quorum and a majority of its members' data from the backup (not an etcd-druid condition);
	// its reason is the step it is on.
	ConditionTypeRecoveryInProgress ConditionType = "RecoveryInProgress"
	// ConditionTypeDefragmentationInProgress is True while the defragmentation controller
	// defragments a member (not an etcd-druid condition); the message names the member.
	ConditionTypeDefragmentationInProgress ConditionType = "DefragmentationInProgress"
	// ConditionTypeUpdateStrategyHeld is True while the Etcd reconciler keeps the StatefulSet on
	// OnDelete against the QuorumAwareUpdatesWithOnDelete gate until the rollout step in flight
	// has finished, before handing it to RollingUpdate (not an etcd-druid condition).
	ConditionTypeUpdateStrategyHeld ConditionType = "UpdateStrategyHeld"
	// ConditionTypeTLSEnabled is True while the members serve clients and each other over TLS,
	// False while either runs on plain HTTP (an Etcd without clientUrlTls or peerUrlTls; not an
	// etcd-druid condition).
	ConditionTypeTLSEnabled ConditionType = "TLSEnabled"
	// ConditionTypeMemberRestart says what the membership controller last decided about members
	// NotReady longer than notReadyThreshold (DEP-01 operator scenario 9, internal/decide/memberhealth):
	// True while such a member exists (its pod deleted, or why not), False once none is left; its
	// reason is the rule. Absent on an Etcd none of whose members ever was (not an etcd-druid
	// condition).
	ConditionTypeMemberRestart ConditionType = "MemberRestart"
	// ConditionTypeBootstrappedWithExistingCluster is etcd-druid's condition for an Etcd that asks
	// to join an existing cluster (spec.etcd.bootstrapWithExistingCluster). Here it is False while
	// the members are held back, since joining is not supported yet.
	ConditionTypeBootstrappedWithExistingCluster ConditionType = "BootstrappedWithExistingCluster"
	// ConditionTypeVersionChange says what the Etcd reconciler decided about a change of the etcd
	// version (internal/decide/versionchange): True while a downgrade is prepared or under way, or a
	// change etcd cannot make is refused; False once the members run what the spec names. Its
	// reason is the rule, its message the members' versions. Absent on an Etcd whose version never
	// changed by a minor (not an etcd-druid condition).
	ConditionTypeVersionChange ConditionType = "VersionChange"
	// ConditionTypeRestoreIncomplete is True once a restore from the backup started the cluster
	// from fewer revisions than the backup recorded: a delta read whole was damaged (its checksum
	// or content wrong) or missing from the chain, and the revisions after it are lost. It stays
	// True until a person acknowledges the loss with the annotation
	// etcd-conductor.io/acknowledge-incomplete-restore set to the Etcd's status.clusterID; then
	// False, reason Acknowledged. Written by the recovery controller (not an etcd-druid condition).
	ConditionTypeRestoreIncomplete ConditionType = "RestoreIncomplete"
	// ConditionTypeVolumeChange says what the Etcd reconciler decided about a change of the data
	// volumes (spec.storageClass, spec.storageCapacity; internal/decide/volumechange): True while the
	// change is made or waits (the members moving to new claims, or the claims growing in place),
	// or is refused; False once done, its message naming the old claims kept with their data. Its
	// reason is the rule. Absent on an Etcd whose volumes never changed (not an etcd-druid
	// condition).
	ConditionTypeVolumeChange ConditionType = "VolumeChange"
	// ConditionTypeTrustChange says what the Etcd reconciler decided about a change of the TLS
	// material in the Etcd's Secrets (internal/decide/trustchange): True while a CA is added or dropped,
	// a renewed certificate waits or is held back (one the members do not trust, or one failing a
	// check: its key, valid now, the members' names, its key usages); False once the members mount
	// what the Secrets hold. Its reason is the rule, its message names the Secret and the check.
	// Absent on an Etcd whose TLS material never changed (not an etcd-druid condition).
	ConditionTypeTrustChange ConditionType = "TrustChange"

	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one aspect of the cluster's state.
type Condition struct {
	Type   ConditionType   `json:"type"`
	Status ConditionStatus `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// EtcdRole is a member's raft role.
type EtcdRole string

const (
	EtcdRoleLeader EtcdRole = "Leader"
	EtcdRoleMember EtcdRole = "Member"
	// EtcdRoleLearner is a member that does not vote yet (scale-out or replacement in progress).
	EtcdRoleLearner EtcdRole = "Learner"
)

// RecordedVoter is one voting member as the leader listed it.
type RecordedVoter struct {
	// Name is the member's etcd name (its pod's name, or <prefix>-<pod> with
	// spec.memberNamePrefix), as the leader's member list has it; also its Lease's name.
	Name string `json:"name"`
	// ID is the member ID in hex.
	ID string `json:"id"`
	// PeerURLs are the member's advertised peer URLs.
	// +optional
	PeerURLs []string `json:"peerURLs,omitempty"`
}

// DataAside is one data dir a member keeps aside. Not part of etcd-druid's API.
type DataAside struct {
	// Member is the member that keeps it, by its etcd member name (its Lease's name).
	Member string `json:"member"`
	// Path is where it is in the member's pod (on its data volume).
	Path string `json:"path"`
	// KeptSince is when it was set aside.
	KeptSince metav1.Time `json:"keptSince"`
	// Bytes is the size of its files.
	Bytes int64 `json:"bytes"`
}

// RecoveryRequest is the operator's order that one member restore the cluster from the backup as
// a new single-member cluster (DEP-01 operator scenario 10).
type RecoveryRequest struct {
	// Member is the member asked to restore, by its etcd member name (its pod's name, or
	// <prefix>-<pod> with spec.memberNamePrefix), the name its init step knows itself by.
	Member string `json:"member"`
	// PodUID is the incarnation of that pod the order is for: a pod recreated since then does
	// not act on it.
	PodUID string `json:"podUID"`
	// Token is the fencing token and the new cluster's initial-cluster-token: a new cluster ID,
	// so no member of the old cluster can ever talk to the new one.
	Token string `json:"token"`
	// OldClusterID is the cluster that lost quorum.
	// +optional
	OldClusterID string `json:"oldClusterID,omitempty"`
	// Reason is the operator's, with its numbers.
	// +optional
	Reason string `json:"reason,omitempty"`
	// QuorumLostAt is when quorum was lost; StartedAt when the restore was ordered.
	// +optional
	QuorumLostAt *metav1.Time `json:"quorumLostAt,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// For tells whether the order is for this incarnation (pod uid) of member name, with a token.
func (r *RecoveryRequest) For(name, uid string) bool {
	return r != nil && r.Member == name && r.PodUID != "" && r.PodUID == uid && r.Token != ""
}

// EtcdMemberConditionStatus is a member's health.
type EtcdMemberConditionStatus string

const (
	EtcdMemberStatusReady    EtcdMemberConditionStatus = "Ready"
	EtcdMemberStatusNotReady EtcdMemberConditionStatus = "NotReady"
	EtcdMemberStatusUnknown  EtcdMemberConditionStatus = "Unknown"
)

// EtcdMemberStatus is the state of one member.
type EtcdMemberStatus struct {
	// Name is the member's etcd name, which its Lease carries too: its pod's name, or
	// <prefix>-<pod> with spec.memberNamePrefix (as etcd-druid's).
	Name string `json:"name"`
	// ID is the member's ID in hex.
	// +optional
	ID *string `json:"id,omitempty"`
	// Role is Leader or Member.
	// +optional
	Role *EtcdRole `json:"role,omitempty"`
	// Status is Ready, NotReady or Unknown.
	Status EtcdMemberConditionStatus `json:"status"`
	// Reason says why the member has this status.
	Reason string `json:"reason"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// LastError is an error of the last reconciliation.
type LastError struct {
	Code        string      `json:"code"`
	Description string      `json:"description"`
	ObservedAt  metav1.Time `json:"observedAt"`
}

// LastOperation is the last operation on the cluster.
type LastOperation struct {
	Type           string      `json:"type"`
	State          string      `json:"state"`
	Description    string      `json:"description"`
	RunID          string      `json:"runID,omitempty"`
	LastUpdateTime metav1.Time `json:"lastUpdateTime"`
}
