package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file declares the parts of etcd-druid's Etcd API that etcd-conductor accepts so that
// etcd-druid manifests apply unchanged under kubectl's strict field validation. The JSON names and
// types are etcd-druid's; whether a field acts is decided in internal/decide/compat and documented in the
// compatibility table in docs/etcd.md. Schema validation stays loose where etcd-druid's is loose: every
// manifest etcd-druid accepts must be accepted here, and the operator reports what it cannot use.

// MetricsLevel is the detail of a member's metrics: basic, or extensive (adds histograms).
// +kubebuilder:validation:Enum=basic;extensive
type MetricsLevel string

const (
	MetricsBasic     MetricsLevel = "basic"
	MetricsExtensive MetricsLevel = "extensive"
)

// CompactionMode is etcd's auto-compaction mode.
// +kubebuilder:validation:Enum=periodic;revision
type CompactionMode string

const (
	// CompactionPeriodic keeps the history of a duration (retention "30m", "1h", or hours as "5").
	CompactionPeriodic CompactionMode = "periodic"
	// CompactionRevision keeps a number of revisions (retention "1000").
	CompactionRevision CompactionMode = "revision"
)

// GarbageCollectionPolicy is etcd-druid's backup garbage collection policy.
// +kubebuilder:validation:Enum=Exponential;LimitBased
type GarbageCollectionPolicy string

// CompressionPolicy is etcd-druid's snapshot compression algorithm.
// +kubebuilder:validation:Enum=gzip;lzw;zlib
type CompressionPolicy string

// StorageProvider names an object store provider of etcd-druid's backups.
type StorageProvider string

// SharedConfig is etcd-druid's configuration shared by etcd and its backup sidecar.
type SharedConfig struct {
	// AutoCompactionMode is periodic or revision (--auto-compaction-mode).
	// +optional
	AutoCompactionMode *CompactionMode `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention is how much history auto-compaction keeps
	// (--auto-compaction-retention): a duration or hours for periodic, a revision count for
	// revision.
	// +optional
	AutoCompactionRetention *string `json:"autoCompactionRetention,omitempty"`
}

// SchedulingConstraints are copied onto the member pods.
type SchedulingConstraints struct {
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// ClientService customises the client Service.
type ClientService struct {
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// TrafficDistribution is the Service's spec.trafficDistribution.
	// +optional
	// +kubebuilder:validation:Enum=PreferClose;PreferSameZone;PreferSameNode
	TrafficDistribution *string `json:"trafficDistribution,omitempty"`
}

// BackupSpec is etcd-druid's backup configuration. The member-agent acts on store,
// fullSnapshotSchedule, deltaSnapshotPeriod, garbageCollectionPolicy, maxBackupsLimitBasedGC and
// garbageCollectionPeriod; the other fields are accepted and ignored (internal/decide/compat).
type BackupSpec struct {
	// +optional
	Port *int32 `json:"port,omitempty"`
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
	// +optional
	Image *string `json:"image,omitempty"`
	// +optional
	Store *StoreSpec `json:"store,omitempty"`
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// CompactionResources is the older spelling of snapshotCompaction.resources.
	// +optional
	CompactionResources *corev1.ResourceRequirements `json:"compactionResources,omitempty"`
	// +optional
	SnapshotCompaction *SnapshotCompactionSpec `json:"snapshotCompaction,omitempty"`
	// FullSnapshotSchedule is a cron schedule.
	// +optional
	FullSnapshotSchedule *string `json:"fullSnapshotSchedule,omitempty"`
	// +optional
	GarbageCollectionPolicy *GarbageCollectionPolicy `json:"garbageCollectionPolicy,omitempty"`
	// +optional
	MaxBackupsLimitBasedGC *int32 `json:"maxBackupsLimitBasedGC,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	GarbageCollectionPeriod *metav1.Duration `json:"garbageCollectionPeriod,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	DeltaSnapshotPeriod *metav1.Duration `json:"deltaSnapshotPeriod,omitempty"`
	// +optional
	DeltaSnapshotMemoryLimit *resource.Quantity `json:"deltaSnapshotMemoryLimit,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	DeltaSnapshotRetentionPeriod *metav1.Duration `json:"deltaSnapshotRetentionPeriod,omitempty"`
	// +optional
	SnapshotCompression *CompressionSpec `json:"compression,omitempty"`
	// +optional
	EnableProfiling *bool `json:"enableProfiling,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	EtcdSnapshotTimeout *metav1.Duration `json:"etcdSnapshotTimeout,omitempty"`
	// OwnerCheck is from older etcd-druid releases.
	// +optional
	OwnerCheck *OwnerCheckSpec `json:"ownerCheck,omitempty"`
	// +optional
	LeaderElection *LeaderElectionSpec `json:"leaderElection,omitempty"`
}

// StoreSpec is etcd-druid's object store for backups.
type StoreSpec struct {
	// +optional
	Container *string `json:"container,omitempty"`
	// EndpointOverride replaces the endpoint the Secret names (S3-compatible stores).
	// +optional
	EndpointOverride *string `json:"endpointOverride,omitempty"`
	// Prefix is where in the container the backups go (etcd-druid requires it; empty here
	// means the container's root).
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// +optional
	Provider *StorageProvider `json:"provider,omitempty"`
	// +optional
	SecretRef *corev1.SecretReference `json:"secretRef,omitempty"`
}

// SnapshotCompactionSpec is etcd-druid's snapshot compaction job configuration.
type SnapshotCompactionSpec struct {
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	EventsThreshold *int64 `json:"eventsThreshold,omitempty"`
	// +optional
	TriggerFullSnapshotThreshold *int64 `json:"triggerFullSnapshotThreshold,omitempty"`
}

// CompressionSpec is etcd-druid's snapshot compression.
type CompressionSpec struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Policy *CompressionPolicy `json:"policy,omitempty"`
}

// OwnerCheckSpec is older etcd-druid releases' owner DNS record check.
type OwnerCheckSpec struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	DNSCacheTTL *metav1.Duration `json:"dnsCacheTTL,omitempty"`
}

// LeaderElectionSpec is etcd-druid's backup sidecar leader election.
type LeaderElectionSpec struct {
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	ReelectionPeriod *metav1.Duration `json:"reelectionPeriod,omitempty"`
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	EtcdConnectionTimeout *metav1.Duration `json:"etcdConnectionTimeout,omitempty"`
}

// CrossVersionObjectReference names an object of any kind.
type CrossVersionObjectReference struct {
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}
