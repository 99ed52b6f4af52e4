package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
)

func objectMeta(e *druidv1alpha1.Etcd, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   e.Namespace,
		Labels:      Labels(e),
		Annotations: Annotations(e),
	}
}

// ConfigMap holds the cluster-wide etcd configuration as ETCD_* environment variables, read by
// the member-init container through envFrom. It merges them with the member's own flags and the
// start decision into the configuration file etcd starts with (etcd ignores every flag and
// variable once --config-file is given).
func ConfigMap(e *druidv1alpha1.Etcd, st transport.Stages) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: objectMeta(e, ConfigMapName(e))}
	cm.Data = etcdEnvironment(e, st)
	return cm
}

// Bootstrap settings: the initial cluster follows spec.replicas and the state turns "existing"
// once the cluster has formed (status.clusterID). Members read them only when they start without
// data, so they are kept out of the pod template's checksum: scaling rolls no pod.
const (
	EnvInitialCluster      = "ETCD_INITIAL_CLUSTER"
	EnvInitialClusterState = "ETCD_INITIAL_CLUSTER_STATE"
)

// InitialClusterState is "new" until the operator has seen the cluster formed, then "existing".
func InitialClusterState(e *druidv1alpha1.Etcd) string {
	if e.Status.ClusterID != "" {
		return "existing"
	}
	return "new"
}

// templateEnvironment is the part of the configuration whose change must replace the members.
func templateEnvironment(e *druidv1alpha1.Etcd, st transport.Stages) map[string]string {
	env := etcdEnvironment(e, st)
	delete(env, EnvInitialCluster)
	delete(env, EnvInitialClusterState)
	return env
}

// EtcdEnvironment is the configuration shared by all members, with client and peer traffic
// where the spec asks (TransportOf).
func EtcdEnvironment(e *druidv1alpha1.Etcd) map[string]string {
	return etcdEnvironment(e, TransportOf(e))
}

// etcdEnvironment is EtcdEnvironment at stages st: a kind's TLS settings are here once it is on
// TLS only (while adding, each template carries them as flags: etcdFlags).
func etcdEnvironment(e *druidv1alpha1.Etcd, st transport.Stages) map[string]string {
	var peers []string
	for _, pod := range PodNames(e) {
		for _, u := range PeerURLs(e, PeerScheme(st), pod) {
			peers = append(peers, MemberNameOf(e, pod)+"="+u)
		}
	}
	env := map[string]string{
		"ETCD_DATA_DIR":              dataMountPath + "/new.etcd",
		EnvInitialCluster:            strings.Join(peers, ","),
		EnvInitialClusterState:       InitialClusterState(e),
		"ETCD_INITIAL_CLUSTER_TOKEN": fmt.Sprintf("%s-%s", e.Namespace, e.Name),
		// etcd's own check refuses every membership change, even adding a learner, while any
		// voter is down. The membership planner checks quorum itself for each step (a learner
		// never counts, promotion and removal only with a healthy quorum after them), so the
		// cluster can grow or replace a lost member while one member is dead.
		"ETCD_STRICT_RECONFIG_CHECK": "false",
	}
	if st.Client == transport.TLS {
		for k, v := range clientTLSSettings() {
			env[k] = v
		}
	}
	if st.Peer == transport.TLS {
		for k, v := range peerTLSSettings(e) {
			env[k] = v
		}
	}
	for k, v := range SettingsEnvironment(e) {
		env[k] = v
	}
	return env
}

// clientTLSSettings serve clients with the mounted server pair and demand client certificates
// signed by the mounted CA.
func clientTLSSettings() map[string]string {
	return map[string]string{
		"ETCD_CLIENT_CERT_AUTH": "true",
		"ETCD_TRUSTED_CA_FILE":  tlsMountRoot + "/client-ca/ca.crt",
		"ETCD_CERT_FILE":        tlsMountRoot + "/server/tls.crt",
		"ETCD_KEY_FILE":         tlsMountRoot + "/server/tls.key",
	}
}

// peerTLSSettings serve and dial peers with the mounted peer pair, each verifying the other
// against the mounted CA.
func peerTLSSettings(e *druidv1alpha1.Etcd) map[string]string {
	return map[string]string{
		"ETCD_PEER_CLIENT_CERT_AUTH": "true",
		"ETCD_PEER_TRUSTED_CA_FILE":  tlsMountRoot + "/peer-ca/ca.crt",
		"ETCD_PEER_CERT_FILE":        tlsMountRoot + "/peer/tls.crt",
		"ETCD_PEER_KEY_FILE":         tlsMountRoot + "/peer/tls.key",
		// Unset, true: peer certificates carry wildcard DNS names, which etcd's client-SAN
		// check would try to resolve against the peer's address and fail; the CA check still
		// applies.
		"ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION": strconv.FormatBool(PeerSkipClientSANVerification(e)),
	}
}

// ConfigChecksum is a stable hash of the etcd configuration.
func ConfigChecksum(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// PeerService is headless and publishes not-ready addresses, so members can find each other
// before they are ready (they cannot become ready without each other).
func PeerService(e *druidv1alpha1.Etcd) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: objectMeta(e, PeerServiceName(e))}
	svc.Spec = corev1.ServiceSpec{
		ClusterIP:                corev1.ClusterIPNone,
		PublishNotReadyAddresses: true,
		Selector:                 SelectorLabels(e),
		Ports: []corev1.ServicePort{
			{Name: "peer", Port: ServerPort(e), TargetPort: intstr.FromInt32(ServerPort(e)), Protocol: corev1.ProtocolTCP},
			{Name: "client", Port: ClientPort(e), TargetPort: intstr.FromInt32(ClientPort(e)), Protocol: corev1.ProtocolTCP},
		},
	}
	return svc
}

// ClientService load-balances clients over the ready members. spec.etcd.clientService adds
// labels (never overriding the operator's), annotations and a traffic distribution.
func ClientService(e *druidv1alpha1.Etcd) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: objectMeta(e, ClientServiceName(e))}
	if cs := e.Spec.Etcd.ClientService; cs != nil {
		svc.Labels = mergeAnnotations(cs.Labels, svc.Labels)
		svc.Annotations = mergeAnnotations(svc.Annotations, cs.Annotations)
		svc.Spec.TrafficDistribution = cs.TrafficDistribution
	}
	svc.Spec = corev1.ServiceSpec{
		TrafficDistribution: svc.Spec.TrafficDistribution,
		Type:                corev1.ServiceTypeClusterIP,
		Selector:            SelectorLabels(e),
		Ports: []corev1.ServicePort{
			{Name: "client", Port: ClientPort(e), TargetPort: intstr.FromInt32(ClientPort(e)), Protocol: corev1.ProtocolTCP},
		},
	}
	return svc
}

// ServiceAccount is the member pods' identity.
func ServiceAccount(e *druidv1alpha1.Etcd) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: objectMeta(e, ServiceAccountName(e))}
}

// MemberAgentRole allows patching exactly this cluster's member Leases, the one call the agent
// makes (a merge patch; it never reads, creates or deletes a Lease), and reading this one Etcd,
// whose status holds the operator's restore order for the init step (read only: a member can
// never write an order). RBAC cannot tell one member pod from another, since they share the
// ServiceAccount: the chart's member Lease ValidatingAdmissionPolicy narrows each pod to the
// Lease of its member (named as the pod, or <prefix>-<pod>: MemberNameOf).
func MemberAgentRole(e *druidv1alpha1.Etcd) *rbacv1.Role {
	role := &rbacv1.Role{ObjectMeta: objectMeta(e, MemberAgentRoleName(e))}
	role.Rules = []rbacv1.PolicyRule{{
		APIGroups:     []string{coordinationv1.GroupName},
		Resources:     []string{"leases"},
		ResourceNames: MemberLeaseNames(e),
		Verbs:         []string{"patch"},
	}, {
		APIGroups:     []string{druidv1alpha1.GroupVersion.Group},
		Resources:     []string{"etcds"},
		ResourceNames: []string{e.Name},
		Verbs:         []string{"get"},
	}}
	role.Rules = append(role.Rules, snapshotLeaseRule(e)...)
	return role
}

// MemberAgentRoleBinding binds MemberAgentRole to the member pods' ServiceAccount.
func MemberAgentRoleBinding(e *druidv1alpha1.Etcd) *rbacv1.RoleBinding {
	rb := &rbacv1.RoleBinding{ObjectMeta: objectMeta(e, MemberAgentRoleName(e))}
	rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: MemberAgentRoleName(e)}
	rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName(e), Namespace: e.Namespace}}
	return rb
}

// MemberLeasesUnused are the names among leases (an Etcd's member Leases) that no member uses any
// more: none of a wanted member (spec.replicas), none of a recorded voter (a member being removed
// is one until it has left the cluster, and its Lease still says how it is), and none whose pod
// still exists (it runs, and its agent may renew it). Only those may be deleted.
func MemberLeasesUnused(e *druidv1alpha1.Etcd, leases, pods []string) []string {
	keep := map[string]bool{}
	for _, m := range MemberLeaseNames(e) {
		keep[m] = true
	}
	// A voter is recorded under its etcd member name, which is its Lease's name.
	for _, v := range e.Status.Voters {
		keep[v.Name] = true
	}
	for _, p := range pods {
		keep[MemberNameOf(e, p)] = true
	}
	var out []string
	for _, l := range leases {
		if !keep[l] {
			out = append(out, l)
		}
	}
	return out
}

// MemberLease is the Lease the agent of the member of pod renews, named as the member
// (MemberNameOf). The reconciler creates it empty; only the agent writes holderIdentity and
// renewTime.
func MemberLease(e *druidv1alpha1.Etcd, pod string) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: objectMeta(e, MemberNameOf(e, pod))}
	d := MemberLeaseDurationSeconds(e)
	lease.Spec.LeaseDurationSeconds = &d
	return lease
}

// ControlledLeases keeps the Leases e controls. A Lease under a member's name that something
// else created is never adopted (the Etcd reconciler reports it as foreign), and what it says
// must not become a member's status or role either.
func ControlledLeases(e *druidv1alpha1.Etcd, leases []coordinationv1.Lease) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for i := range leases {
		if metav1.IsControlledBy(&leases[i], e) {
			out = append(out, leases[i])
		}
	}
	return out
}

// FindPod returns the pod named name among pods (a pointer into pods), or nil.
func FindPod(pods []corev1.Pod, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

// AnnotationAllowUnhealthyPodEviction is etcd-druid's annotation on an Etcd that lets a member
// pod that is not ready be evicted whatever the budget (unhealthyPodEvictionPolicy: AlwaysAllow).
// Its presence counts, any value, as in etcd-druid.
const AnnotationAllowUnhealthyPodEviction = "resources.druid.gardener.cloud/allow-unhealthy-pod-eviction"

// PodDisruptionBudget keeps external actors (drains, VPA, autoscaler) from evicting members
// beyond what the cluster's health affords (DisruptionBudget). The OnDelete controller deletes
// rather than evicts, so it is not bound by it (DEP-07). waitForBackupReady is the operator's
// controllers.etcd.waitForBackupReady.
func PodDisruptionBudget(e *druidv1alpha1.Etcd, waitForBackupReady bool) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: objectMeta(e, PodDisruptionBudgetName(e))}
	minAvailable := intstr.FromInt32(DisruptionBudget(e, backupgate.Of(e, waitForBackupReady)).MinAvailable)
	pdb.Spec = policyv1.PodDisruptionBudgetSpec{
		MinAvailable: &minAvailable,
		Selector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(e)},
	}
	if _, ok := e.Annotations[AnnotationAllowUnhealthyPodEviction]; ok {
		pdb.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	}
	return pdb
}

// Budget is the PodDisruptionBudget's minAvailable and the rule that set it.
type Budget struct {
	MinAvailable int32
	Rule         ruleid.ID
}

// The rules of DisruptionBudget.
const (
	BudgetSingleNode      ruleid.ID = "pdb/single-node"
	BudgetQuorum          ruleid.ID = "pdb/quorum"
	BudgetMembersNotReady ruleid.ID = "pdb/members-not-ready"
	BudgetBackupNotReady  ruleid.ID = "pdb/backup-not-ready"
)

// DisruptionBudget is DEP-01's "PodDisruptionBudget" section, with n = spec.replicas:
//   - a single-node cluster (n ≤ 1) gets 0: there is no quorum to keep, and a drain must be able
//     to move its only member (DEP-01 asks for the budget for multi-node clusters);
//   - AllMembersReady True (or not reported yet): floor(n/2)+1, a quorum;
//   - AllMembersReady False: the number of members whose status is Ready, "to disable eviction
//     of any member pods when not all members are Ready" — the ready members are all that may
//     not go, while a member that is not ready can still be evicted (Kubernetes' default
//     IfHealthyBudget lets an unhealthy pod go while the budget is met);
//   - BackupReady False while waiting for the backup is on (backup.Holds, DEP-01 "BackupReady":
//     "toggle the minAvailable field between n/2 + 1 and n ... whenever the BackupReady
//     condition toggles"): n, no voluntary eviction at all.
//
// "In case of a conflict ... the highest of the applicable values", so the result is the
// largest value that applies, and never less than a quorum for a multi-node cluster.
func DisruptionBudget(e *druidv1alpha1.Etcd, backup backupgate.Gate) Budget {
	n := int(e.Spec.Replicas)
	if n <= 1 {
		return Budget{MinAvailable: 0, Rule: BudgetSingleNode}
	}
	b := Budget{MinAvailable: int32(quorum.Of(n)), Rule: BudgetQuorum}
	if c := druidv1alpha1.FindCondition(e.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersReady); c != nil && c.Status == druidv1alpha1.ConditionFalse {
		ready := 0
		for _, m := range e.Status.Members {
			if m.Status == druidv1alpha1.EtcdMemberStatusReady {
				ready++
			}
		}
		if ready = min(ready, n); int32(ready) > b.MinAvailable {
			b = Budget{MinAvailable: int32(ready), Rule: BudgetMembersNotReady}
		}
	}
	if backup.Holds && int32(n) > b.MinAvailable {
		b = Budget{MinAvailable: int32(n), Rule: BudgetBackupNotReady}
	}
	return b
}
