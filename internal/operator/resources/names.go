package resources

import (
	"fmt"
	"strconv"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	// The member pod's containers are named by internal/contract/memberpod, where the planners read the
	// names without importing the builder; they are repeated here so the builder and its callers
	// spell the pod in one vocabulary with its ports and files.
	EtcdContainerName        = memberpod.EtcdContainerName
	MemberAgentContainerName = memberpod.MemberAgentContainerName
	MemberInitContainerName  = memberpod.MemberInitContainerName
	// EtcdConfigFile is the configuration member-init writes and etcd starts with.
	EtcdConfigFile = configMountPath + "/etcd.conf.yaml"

	DefaultEtcdImage       = "quay.io/coreos/etcd:v3.6.8"
	DefaultClientPort      = int32(2379)
	DefaultServerPort      = int32(2380)
	MetricsPort            = int32(2381)
	DefaultStorageCapacity = "16Gi"

	// MemberUID is the user, group and fsGroup member containers run as: distroless's "nonroot",
	// the etcd-conductor image's own user (the etcd image's binary runs as any user).
	MemberUID = int64(65532)

	// LeaseDurationSeconds is how long a member Lease stays valid after a renewal.
	LeaseDurationSeconds = int32(15)

	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	ManagerName    = "etcd-conductor"

	// AnnotationFullSnapshot, on an Etcd, requests an out-of-schedule full snapshot: any new value
	// (a timestamp, say) triggers one. The Etcd reconciler hands it on to the full snapshot Lease
	// as memberlease.AnnotationFullSnapshotRequest, where the leading member's backup loop reads it.
	AnnotationFullSnapshot = "etcd-conductor.io/full-snapshot"
	// AnnotationConfigChecksum makes a change of the etcd configuration a pod-template change,
	// so it rolls like any other update.
	AnnotationConfigChecksum = "etcd-conductor.io/config-checksum"
	// AnnotationLegacyUpdateStrategyHold is where releases before the UpdateStrategyHeld
	// condition recorded the update strategy hold on the StatefulSet; it is removed when found.
	AnnotationLegacyUpdateStrategyHold = "etcd-conductor.io/update-strategy-hold"
	// AnnotationSafeToEvict keeps the cluster autoscaler from evicting members.
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

	dataVolume      = "data"
	dataMountPath   = "/var/etcd/data"
	configVolume    = "etcd-config"
	configMountPath = "/var/etcd/config"
	clientCAVolume  = "client-ca"
	serverTLSVolume = "server-tls"
	clientTLSVolume = "client-tls"
	peerCAVolume    = "peer-ca"
	peerTLSVolume   = "peer-tls"
	tlsMountRoot    = "/var/etcd/ssl"

	memberAgentTokenVolumeName = "member-agent-token"
	// serviceAccountMountPath is where client-go's in-cluster configuration reads the token.
	serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// StatefulSetName is the name of the Etcd's StatefulSet (and of the PDB and ServiceAccount).
func StatefulSetName(e *druidv1alpha1.Etcd) string { return e.Name }

// PeerServiceName is the headless Service that gives each member its DNS name.
func PeerServiceName(e *druidv1alpha1.Etcd) string { return e.Name + "-peer" }

// ClientServiceName is the Service clients use.
func ClientServiceName(e *druidv1alpha1.Etcd) string { return e.Name + "-client" }

// ConfigMapName holds the etcd configuration.
func ConfigMapName(e *druidv1alpha1.Etcd) string { return e.Name + "-config" }

// ServiceAccountName is the identity of the member pods (the member-agent writes Leases with it).
func ServiceAccountName(e *druidv1alpha1.Etcd) string { return e.Name }

// MemberAgentRoleName is the Role (and RoleBinding) that lets member-agents renew their Leases.
func MemberAgentRoleName(e *druidv1alpha1.Etcd) string { return e.Name + "-member-agent" }

// PodDisruptionBudgetName protects members from voluntary evictions.
func PodDisruptionBudgetName(e *druidv1alpha1.Etcd) string { return e.Name }

// PodName is the name of the member pod of ordinal i (the StatefulSet's naming). Pods keep it
// whatever spec.memberNamePrefix says; only the etcd member and its Lease carry the prefix.
func PodName(e *druidv1alpha1.Etcd, ordinal int) string {
	return fmt.Sprintf("%s-%d", e.Name, ordinal)
}

// OrdinalOf is the ordinal of pod name of e, false when name is no member pod name of e.
func OrdinalOf(e *druidv1alpha1.Etcd, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, e.Name+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// memberNamePrefix is spec.memberNamePrefix, "" when unset (etcd-druid treats empty as unset).
func memberNamePrefix(e *druidv1alpha1.Etcd) string {
	if p := e.Spec.MemberNamePrefix; p != nil {
		return *p
	}
	return ""
}

// MemberNameOf is the etcd member name of the member pod named pod, which is also the name of
// its member Lease: <prefix>-<pod> with spec.memberNamePrefix (etcd-druid's naming), else the pod
// name itself. Inside the operator a member is known by its pod; this is the one way to the name
// etcd and the Leases know it by, and PodOfMember the one way back.
func MemberNameOf(e *druidv1alpha1.Etcd, pod string) string {
	if p := memberNamePrefix(e); p != "" {
		return p + "-" + pod
	}
	return pod
}

// PodOfMember is the member pod an etcd member name (or member Lease name) of e stands for, false
// when the name is none of this Etcd's: without the prefix, or not followed by a pod name of e.
// Callers treat a name it does not map exactly as a member no pod stands for, never as a pod.
func PodOfMember(e *druidv1alpha1.Etcd, member string) (string, bool) {
	pod := member
	if p := memberNamePrefix(e); p != "" {
		var ok bool
		if pod, ok = strings.CutPrefix(member, p+"-"); !ok {
			return "", false
		}
	}
	if _, ok := OrdinalOf(e, pod); !ok {
		return "", false
	}
	return pod, true
}

// PodNames lists the member pod names for the desired replicas. Callers validate the count first
// (ValidateReplicas); the clamp to [0, MaxReplicas] only keeps one that did not from allocating by
// an unchecked number. It never yields an empty list for a huge count, since an empty list would
// mean "every Lease" in the member-agent Role's resourceNames.
func PodNames(e *druidv1alpha1.Etcd) []string {
	n := min(max(int(e.Spec.Replicas), 0), druidv1alpha1.MaxReplicas)
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		names = append(names, PodName(e, i))
	}
	return names
}

// MemberLeaseNames lists the member Lease names (the etcd member names) for the desired replicas.
func MemberLeaseNames(e *druidv1alpha1.Etcd) []string {
	pods := PodNames(e)
	names := make([]string, 0, len(pods))
	for _, pod := range pods {
		names = append(names, MemberNameOf(e, pod))
	}
	return names
}

// MemberDNSName is the name a member is reached by, and the TLS ServerName its certificate must
// cover: <pod>.<etcd>-peer.<ns>.svc.
func MemberDNSName(etcdName, namespace, pod string) string {
	return fmt.Sprintf("%s.%s-peer.%s.svc", pod, etcdName, namespace)
}

// SelectorLabels select the member pods. They never change for the life of the Etcd, because the
// StatefulSet selector is immutable.
func SelectorLabels(e *druidv1alpha1.Etcd) map[string]string {
	return map[string]string{
		LabelName:      "etcd",
		LabelInstance:  e.Name,
		LabelManagedBy: ManagerName,
	}
}

// Labels are put on every owned object: the user's spec.labels plus the selector labels.
func Labels(e *druidv1alpha1.Etcd) map[string]string {
	out := make(map[string]string, len(e.Spec.Labels)+3)
	for k, v := range e.Spec.Labels {
		out[k] = v
	}
	for k, v := range SelectorLabels(e) {
		out[k] = v
	}
	return out
}

// Annotations are put on every owned object.
func Annotations(e *druidv1alpha1.Etcd) map[string]string {
	out := make(map[string]string, len(e.Spec.Annotations))
	for k, v := range e.Spec.Annotations {
		out[k] = v
	}
	return out
}

// ClientPort returns spec.etcd.clientPort or its default.
func ClientPort(e *druidv1alpha1.Etcd) int32 {
	if p := e.Spec.Etcd.ClientPort; p != nil {
		return *p
	}
	return DefaultClientPort
}

// ServerPort returns spec.etcd.serverPort or its default.
func ServerPort(e *druidv1alpha1.Etcd) int32 {
	if p := e.Spec.Etcd.ServerPort; p != nil {
		return *p
	}
	return DefaultServerPort
}

// EtcdImage returns spec.etcd.image or the default.
func EtcdImage(e *druidv1alpha1.Etcd) string {
	if img := e.Spec.Etcd.Image; img != nil && *img != "" {
		return *img
	}
	return DefaultEtcdImage
}

// CADataKey returns the key of the CA bundle in a CA Secret reference.
func CADataKey(ref druidv1alpha1.SecretReference) string {
	if ref.DataKey != nil && *ref.DataKey != "" {
		return *ref.DataKey
	}
	return conductortls.DefaultCADataKey
}
