package resources

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Settings are the operator-wide inputs to the StatefulSet, and the per-Etcd ones the controller
// reads elsewhere (the update strategy, the Local backup root).
type Settings struct {
	// UpdateStrategy is OnDelete when QuorumAwareUpdatesWithOnDelete is on, else RollingUpdate.
	UpdateStrategy appsv1.StatefulSetUpdateStrategyType
	// MemberAgentImage is the operator's own image, which also serves as the sidecar.
	MemberAgentImage string
	// MemberAgentInterval is how often the sidecar renews its Lease.
	MemberAgentInterval string
	// LocalBackupRoot is, for an Etcd with the Local provider, its backup Secret's hostPath (the
	// controller reads it; empty: etcd-druid's default); its directory is mounted from below it
	// (LocalBackupHostDir) when BackupReach allows it, else nothing is.
	LocalBackupRoot string
	// BackupReach is the operator's allow-list of store locations (backupStores).
	BackupReach backupstore.Reach
	// Transport is the stages to render (internal/decide/transport); nil: where the spec asks
	// (TransportOf), as for a new Etcd.
	Transport *transport.Stages
	// EtcdImage is the etcd image to render; empty: spec.etcd.image (EtcdImage). The version
	// planner (internal/decide/versionchange) keeps the running image here while a downgrade is
	// prepared or a version change is refused.
	EtcdImage string
	// TrustTemplate is the trust checksum (AnnotationTrustChecksum) for the pod template: that of
	// the member TLS Secret's CA bundles; empty: none written.
	TrustTemplate string
	// DowngradeSource and DowngradeFailedTarget are the downgrade record (AnnotationDowngrade*)
	// the version planner decided; empty: none written, and an existing one removed.
	DowngradeSource, DowngradeFailedTarget string
	// DataVolume is the name of the data volume claim template, and so of the pods' data volume
	// and of the claims "<DataVolume>-<pod>"; empty: "data" (internal/decide/volumechange).
	DataVolume string
}

// dataVolume is the claim template name s renders.
func (s Settings) dataVolume() string {
	if s.DataVolume != "" {
		return s.DataVolume
	}
	return dataVolume
}

// DefaultDataVolume is the claim template name of a new Etcd's StatefulSet.
const DefaultDataVolume = dataVolume

// RunningClaims is sts's data volume claim template: name, storage class and capacity.
func RunningClaims(sts *appsv1.StatefulSet) (volumechange.Claims, bool) {
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		return volumechange.Claims{}, false
	}
	c := sts.Spec.VolumeClaimTemplates[0]
	capacity := c.Spec.Resources.Requests[corev1.ResourceStorage]
	return volumechange.Claims{Name: c.Name, Class: ptr.Deref(c.Spec.StorageClassName, ""), Capacity: capacity.String()}, true
}

// DesiredClaims is what e's spec asks for, named for a change to it: "data-" and a hash of the
// storage class and capacity, so that each change gets claims of its own and leaves the claims
// before it as they are.
func DesiredClaims(e *druidv1alpha1.Etcd) volumechange.Claims {
	capacity := storageCapacity(e)
	c := volumechange.Claims{Class: ptr.Deref(e.Spec.StorageClass, ""), Capacity: capacity.String()}
	c.Name = dataVolume + "-" + ConfigChecksum(map[string]string{"class": c.Class, "capacity": c.Capacity})[:8]
	return c
}

// PodClaims is the claim template the pods mount their data from: the name of the volume backed
// by a claim "<template>-<pod>"; "" when no pod has one.
func PodClaims(pods []corev1.Pod) string {
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == v.Name+"-"+p.Name {
				return v.Name
			}
		}
	}
	return ""
}

// MountedClaims is the claim template each pod mounts its data from (PodClaims), by pod name.
func MountedClaims(pods []corev1.Pod) map[string]string {
	out := make(map[string]string, len(pods))
	for i := range pods {
		if t := PodClaims(pods[i : i+1]); t != "" {
			out[pods[i].Name] = t
		}
	}
	return out
}

// ClaimOf splits a claim name of e's StatefulSet, "<template>-<pod>", into the claim template and
// the member pod it was made for; false when name is no such claim.
func ClaimOf(e *druidv1alpha1.Etcd, name string) (template, pod string, ok bool) {
	// The template may hold hyphens, so the pod is found from the end.
	for i := strings.LastIndex(name, "-"+e.Name+"-"); i > 0; i = strings.LastIndex(name[:i], "-"+e.Name+"-") {
		if _, ok := OrdinalOf(e, name[i+1:]); ok {
			return name[:i], name[i+1:], true
		}
	}
	return "", "", false
}

func storageCapacity(e *druidv1alpha1.Etcd) resource.Quantity {
	if e.Spec.StorageCapacity != nil {
		return *e.Spec.StorageCapacity
	}
	return resource.MustParse(DefaultStorageCapacity)
}

// etcdImage is the etcd image s renders for e.
func (s Settings) etcdImage(e *druidv1alpha1.Etcd) string {
	if s.EtcdImage != "" {
		return s.EtcdImage
	}
	return EtcdImage(e)
}

// RunningEtcdImage is the etcd image sts's template runs; empty when it has no etcd container.
func RunningEtcdImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == EtcdContainerName {
			return c.Image
		}
	}
	return ""
}

// transportStages is what s renders for e.
func (s Settings) transportStages(e *druidv1alpha1.Etcd) transport.Stages {
	if s.Transport != nil {
		return *s.Transport
	}
	return TransportOf(e)
}

// StatefulSet is the desired member StatefulSet. Its selector, serviceName, podManagementPolicy
// and volumeClaimTemplates are immutable after creation; ApplyMutableStatefulSetSpec copies only
// what may change.
func StatefulSet(e *druidv1alpha1.Etcd, s Settings) (*appsv1.StatefulSet, error) {
	if p := ValidateReplicas(e.Spec.Replicas); p != nil {
		return nil, *p
	}
	capacity := storageCapacity(e)
	sts := &appsv1.StatefulSet{ObjectMeta: objectMeta(e, StatefulSetName(e))}
	s.recordDowngrade(sts)
	sts.Spec = appsv1.StatefulSetSpec{
		Replicas:            ptr.To(e.Spec.Replicas),
		Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(e)},
		ServiceName:         PeerServiceName(e),
		PodManagementPolicy: appsv1.ParallelPodManagement,
		UpdateStrategy:      updateStrategy(s.UpdateStrategy),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: s.dataVolume()},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: e.Spec.StorageClass,
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: capacity},
				},
			},
		}},
	}
	template, err := podTemplate(e, s)
	if err != nil {
		return nil, err
	}
	sts.Spec.Template = template
	return sts, nil
}

func updateStrategy(t appsv1.StatefulSetUpdateStrategyType) appsv1.StatefulSetUpdateStrategy {
	if t == appsv1.OnDeleteStatefulSetStrategyType {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	return appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
}

// ApplyMutableStatefulSetSpec writes desired's mutable fields onto existing: labels, template and
// the update strategy type; replicas only at creation, since after that the membership controller
// moves them one member at a time (internal/decide/membership). An existing rollingUpdate configuration (partition,
// maxUnavailable) is kept while the type stays RollingUpdate, and dropped for OnDelete, where the
// API forbids it.
func ApplyMutableStatefulSetSpec(existing, desired *appsv1.StatefulSet) {
	existing.Labels = desired.Labels
	existing.Annotations = mergeAnnotations(existing.Annotations, desired.Annotations)
	for _, key := range downgradeRecord {
		if _, ok := desired.Annotations[key]; !ok {
			delete(existing.Annotations, key)
		}
	}
	existing.Spec.Template = desired.Spec.Template
	if existing.Spec.UpdateStrategy.Type != desired.Spec.UpdateStrategy.Type ||
		desired.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		existing.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
	}
	if existing.CreationTimestamp.IsZero() {
		existing.Spec.Replicas = desired.Spec.Replicas
		existing.Spec.Selector = desired.Spec.Selector
		existing.Spec.ServiceName = desired.Spec.ServiceName
		existing.Spec.PodManagementPolicy = desired.Spec.PodManagementPolicy
		existing.Spec.VolumeClaimTemplates = desired.Spec.VolumeClaimTemplates
	}
}

func mergeAnnotations(existing, desired map[string]string) map[string]string {
	if len(desired) == 0 {
		return existing
	}
	out := make(map[string]string, len(existing)+len(desired))
	for k, v := range existing {
		out[k] = v
	}
	for k, v := range desired {
		out[k] = v
	}
	return out
}

func podTemplate(e *druidv1alpha1.Etcd, s Settings) (corev1.PodTemplateSpec, error) {
	annotations := Annotations(e)
	annotations[AnnotationSafeToEvict] = "false"
	st := s.transportStages(e)
	annotations[AnnotationConfigChecksum] = ConfigChecksum(templateEnvironment(e, st))
	if s.TrustTemplate != "" {
		annotations[AnnotationTrustChecksum] = s.TrustTemplate
	}

	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: Labels(e), Annotations: annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName: ServiceAccountName(e),
			// The token goes only to the member-agent, through memberAgentTokenVolume: the
			// network-exposed etcd container never holds a Kubernetes credential.
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               podSecurityContext(),
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			InitContainers:                []corev1.Container{memberInitContainer(e, s, st)},
			Containers:                    []corev1.Container{etcdContainer(e, s, st), memberAgentContainer(e, s, st)},
			Volumes: append([]corev1.Volume{
				memberAgentTokenVolume(),
				{Name: configVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}, tlsVolumes(e, st)...),
		},
	}
	if e.Spec.PriorityClassName != nil {
		template.Spec.PriorityClassName = *e.Spec.PriorityClassName
	}
	applySchedulingConstraints(&template.Spec, e)
	applyBackup(&template.Spec, e, s.LocalBackupRoot, s.BackupReach)
	applyRestore(&template.Spec)
	return template, nil
}

// podSecurityContext makes the members pass the restricted Pod Security Standard: a fixed
// non-root identity (MemberUID) and fsGroup, so the data volume and the Secret volumes (mode 0640)
// are readable and writable through the group. OnRootMismatch re-owns a volume only when its root is not already ours: a large data directory
// is not walked on every start, yet data written by an earlier root-running member is taken over.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(MemberUID),
		RunAsGroup:          ptr.To(MemberUID),
		FSGroup:             ptr.To(MemberUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurityContext is the same for both containers: nothing to escalate to, no
// capabilities, and a read-only root filesystem (etcd writes only to its data volume, the agent
// nowhere).
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// memberAgentTokenVolume is what the ServiceAccount admission plugin would inject as
// kube-api-access-*: a pod-bound token (which carries the pod name the member Lease policy checks),
// the cluster CA and the namespace, mounted where client-go's in-cluster configuration looks.
func memberAgentTokenVolume() corev1.Volume {
	return corev1.Volume{Name: memberAgentTokenVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o440)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}

// secretVolume mounts the given keys of a Secret, each under its path.
func secretVolume(name, secret string, items []corev1.KeyToPath) corev1.Volume {
	src := &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To(int32(0o640)), Items: items}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: src}}
}

// tlsVolumes are the TLS material the members mount, from the member TLS Secret (never the
// Etcd's Secrets directly, see internal/decide/trustchange): the client CA, serving and client pairs
// while client traffic is adding or on TLS, the peer CA and pair likewise for peer traffic.
func tlsVolumes(e *druidv1alpha1.Etcd, st transport.Stages) []corev1.Volume {
	var out []corev1.Volume
	if client := e.Spec.Etcd.ClientUrlTLS; client != nil && materialMounted(st.Client) {
		out = append(out,
			memberTLSVolume(e, clientCAVolume, memberTLSClientCA),
			memberTLSVolume(e, serverTLSVolume, memberTLSServerCert, memberTLSServerKey),
			memberTLSVolume(e, clientTLSVolume, memberTLSClientCert, memberTLSClientKey))
	}
	if peer := e.Spec.Etcd.PeerUrlTLS.TLS(); peer != nil && materialMounted(st.Peer) {
		out = append(out,
			memberTLSVolume(e, peerCAVolume, memberTLSPeerCA),
			memberTLSVolume(e, peerTLSVolume, memberTLSPeerCert, memberTLSPeerKey))
	}
	return out
}

// clientTLSMounts are the client CA and client pair, for the containers that dial members:
// member-init and the member-agent. None until client traffic is TLS only: before, they dial
// http, which every member serves.
func clientTLSMounts(st transport.Stages) []corev1.VolumeMount {
	if st.Client != transport.TLS {
		return nil
	}
	return []corev1.VolumeMount{
		{Name: clientCAVolume, MountPath: tlsMountRoot + "/client-ca", ReadOnly: true},
		{Name: clientTLSVolume, MountPath: tlsMountRoot + "/client", ReadOnly: true},
	}
}

// clientTLSArgs are the member-agent's flags for dialling a member: the client files, or
// --plaintext until client traffic is TLS only.
func clientTLSArgs(st transport.Stages) []string {
	if st.Client != transport.TLS {
		return []string{"--plaintext"}
	}
	return []string{
		"--ca-file=" + tlsMountRoot + "/client-ca/ca.crt",
		"--cert-file=" + tlsMountRoot + "/client/tls.crt",
		"--key-file=" + tlsMountRoot + "/client/tls.key",
	}
}

func podEnv() []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"), field("POD_IP", "status.podIP")}
}

// etcdFlags are the member's own settings. They listen on the pod IP only (never 0.0.0.0 or
// localhost), so members behave the same in a real pod and in the node simulator's per-pod
// network namespaces. The member-init container turns them, the ConfigMap's settings and its
// start decision into etcd's configuration file.
func etcdFlags(e *druidv1alpha1.Etcd, st transport.Stages) []string {
	dns := fmt.Sprintf("$(POD_NAME).%s.$(POD_NAMESPACE).svc", PeerServiceName(e))
	listen := func(schemes []string, port int32) string {
		urls := make([]string, 0, len(schemes))
		for _, scheme := range schemes {
			urls = append(urls, fmt.Sprintf("%s://$(POD_IP):%d", scheme, port))
		}
		return strings.Join(urls, ",")
	}
	flags := []string{
		"--name=" + MemberNameOf(e, "$(POD_NAME)"),
		"--listen-client-urls=" + listen(listenSchemes(st.Client), ClientPort(e)),
		fmt.Sprintf("--advertise-client-urls=%s://%s:%d", advertiseScheme(st.Client), dns, ClientPort(e)),
		"--listen-peer-urls=" + listen([]string{advertiseScheme(st.Peer)}, ServerPort(e)),
		fmt.Sprintf("--initial-advertise-peer-urls=%s://%s:%d", advertiseScheme(st.Peer), dns, ServerPort(e)),
		fmt.Sprintf("--listen-metrics-urls=http://$(POD_IP):%d", MetricsPort),
	}
	// While adding, the TLS settings are flags of this template, not ConfigMap settings: the
	// ConfigMap is shared by every member, and one of the previous template restarting meanwhile
	// would find settings naming files it does not mount.
	if st.Client == transport.Adding {
		flags = append(flags, flagsOf(clientTLSSettings())...)
	}
	if st.Peer == transport.Adding {
		flags = append(flags, flagsOf(peerTLSSettings(e))...)
	}
	return flags
}

// flagsOf turns ETCD_* settings into the member's flags, in a stable order.
func flagsOf(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flags := make([]string, 0, len(keys))
	for _, k := range keys {
		flags = append(flags, "--"+strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "ETCD_"), "_", "-"))+"="+env[k])
	}
	return flags
}

// memberInitContainer decides how the member starts (DEP-01's member scenarios: restart with its
// data, bootstrap, join as the learner the operator added, or wait for the operator) and writes
// the configuration file. It asks the other members over mTLS with the client certificate and
// reports its decision on the member Lease.
func memberInitContainer(e *druidv1alpha1.Etcd, s Settings, st transport.Stages) corev1.Container {
	args := append([]string{
		"member-agent", "init",
		"--config-file=" + EtcdConfigFile,
		fmt.Sprintf("--client-port=%d", ClientPort(e)),
	}, clientTLSArgs(st)...)
	args = append(args,
		"--lease="+MemberNameOf(e, "$(POD_NAME)"),
		"--namespace=$(POD_NAMESPACE)",
		"--pod-uid=$(POD_UID)",
	)
	if flag := additionalPeerURLsFlag(e); flag != "" {
		args = append(args, flag)
	}
	args = append(args, "--")
	return corev1.Container{
		Name:  MemberInitContainerName,
		Image: s.MemberAgentImage,
		// Args only, no command: the image's entrypoint runs (Kubernetes: no command, the
		// ENTRYPOINT; args replace CMD), so the pod does not depend on where the image keeps the
		// binary (tools/imagebuild and the Dockerfile make it the ENTRYPOINT).
		Args: append(args, etcdFlags(e, st)...),
		// The pod's UID names its incarnation: a restore order is for one incarnation, and the
		// evidence the step reports (no data here) holds only for the pod that found it.
		Env: append(podEnv(), corev1.EnvVar{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			goMemLimit(memberInitGoMemLimit)),
		Resources: memberInitResources(),
		EnvFrom:   []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(e)}}}},
		// It writes the etcd config and may set a corrupt data dir aside: both volumes writable,
		// the root filesystem not. The token is for its own member Lease (the old member ID of a
		// member that lost its data), as for the member-agent.
		SecurityContext: containerSecurityContext(),
		VolumeMounts: append(append([]corev1.VolumeMount{
			{Name: s.dataVolume(), MountPath: dataMountPath},
			{Name: configVolume, MountPath: configMountPath},
		}, clientTLSMounts(st)...),
			corev1.VolumeMount{Name: memberAgentTokenVolumeName, MountPath: serviceAccountMountPath, ReadOnly: true}),
	}
}

// etcdContainer runs etcd from the configuration file member-init wrote. Its readiness is etcd's
// own /readyz, which passes only when the member can serve a linearizable read (and is no
// learner): readiness is quorum participation, which the OnDelete controller relies on.
func etcdContainer(e *druidv1alpha1.Etcd, s Settings, st transport.Stages) corev1.Container {
	c := corev1.Container{
		Name:    EtcdContainerName,
		Image:   s.etcdImage(e),
		Command: []string{"/usr/local/bin/etcd"},
		Args:    []string{"--config-file=" + EtcdConfigFile},
		Env:     podEnv(),
		Ports: []corev1.ContainerPort{
			{Name: portNameClient, ContainerPort: ClientPort(e), Protocol: corev1.ProtocolTCP},
			{Name: portNamePeer, ContainerPort: ServerPort(e), Protocol: corev1.ProtocolTCP},
			{Name: portNameMetrics, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(MetricsPort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 2, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 2,
		},
		LivenessProbe:   etcdLivenessProbe(),
		StartupProbe:    etcdStartupProbe(),
		SecurityContext: containerSecurityContext(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: s.dataVolume(), MountPath: dataMountPath},
			{Name: configVolume, MountPath: configMountPath, ReadOnly: true},
		},
	}
	if materialMounted(st.Client) {
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: clientCAVolume, MountPath: tlsMountRoot + "/client-ca", ReadOnly: true},
			corev1.VolumeMount{Name: serverTLSVolume, MountPath: tlsMountRoot + "/server", ReadOnly: true})
	}
	if materialMounted(st.Peer) {
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: peerCAVolume, MountPath: tlsMountRoot + "/peer-ca", ReadOnly: true},
			corev1.VolumeMount{Name: peerTLSVolume, MountPath: tlsMountRoot + "/peer", ReadOnly: true})
	}
	if e.Spec.Etcd.Resources != nil {
		c.Resources = *e.Spec.Etcd.Resources
	}
	return c
}

// The etcd container's liveness probe restarts a wedged etcd process: one that runs but answers
// nothing (stopped, deadlocked in its HTTP serving, swapped out for good). It must never fail a
// healthy member, loaded or not, so it asks the least etcd can answer: GET /metrics on the
// metrics listener (plain HTTP on the pod IP, MetricsPort), which Prometheus' handler serves from
// in-memory collectors without a quorum, a leader, the raft loop or the backend.
//
// Not /livez: in etcd 3.6/3.7 /livez is one check, "serializable_read", a local Range under
// etcd's request timeout (5 s + 2 × election timeout). It needs no quorum, but a defragmentation
// holds the backend's read lock for its whole run, so every Range, /livez's too, blocks until
// it returns; a long defragmentation (up to etcdDefragTimeout, 8 min by default) would get the
// member killed mid-way and leave it to restart on a half-rewritten database file. /health and
// /readyz add a leader or linearizable read on top: a member without quorum (a partition, a
// majority lost, recovery's) would be restarted in a loop, which helps nothing. Unreadiness is
// the readiness probe's (/readyz) and the membership controller's (a member NotReady past
// notReadyThreshold has its pod deleted: internal/decide/memberhealth), not liveness's.
//
// Tuned to fail only after at least a minute without an answer: every 10 s, 10 s to answer
// (/metrics answers in milliseconds even under load; 10 s rides out CPU throttling and GC
// pauses of a loaded member), restarted after 6 failures in a row, i.e. 60–70 s of silence. A
// restart costs a member its place in the quorum for a restart's time, so a minute is cheap
// against a wedged member left for ever, and long enough that no pause of a healthy one gets
// there. The startup probe holds it off while etcd opens its backend and replays its WAL (the
// metrics listener opens only after that), which on a large database takes minutes.
func etcdLivenessProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/metrics", Port: intstr.FromInt32(MetricsPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: 10, TimeoutSeconds: 10, SuccessThreshold: 1, FailureThreshold: 6,
	}
}

// etcdStartupProbe holds the liveness probe off until etcd serves its metrics listener, probing
// every 2 s (readiness waits for it too, so a short period costs a starting member nothing) for
// up to 30 min: a member loading a large database or catching up a long WAL is not restarted.
func etcdStartupProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/metrics", Port: intstr.FromInt32(MetricsPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: 2, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 900,
	}
}

func memberAgentContainer(e *druidv1alpha1.Etcd, s Settings, st transport.Stages) corev1.Container {
	interval := MemberAgentInterval(e, s).String()
	args := []string{
		"member-agent",
		"--lease=" + MemberNameOf(e, "$(POD_NAME)"),
		"--namespace=$(POD_NAMESPACE)",
		fmt.Sprintf("--endpoint=%s://$(POD_IP):%d", advertiseScheme(st.Client), ClientPort(e)),
		fmt.Sprintf("--server-name=$(POD_NAME).%s.$(POD_NAMESPACE).svc", PeerServiceName(e)),
	}
	args = append(append(args, clientTLSArgs(st)...), "--interval="+interval)
	return corev1.Container{
		Name:            MemberAgentContainerName,
		Image:           s.MemberAgentImage,
		Args:            args, // the image's entrypoint runs, as for member-init
		Env:             append(podEnv(), goMemLimit(memberAgentGoMemLimit)),
		SecurityContext: containerSecurityContext(),
		VolumeMounts: append(clientTLSMounts(st),
			corev1.VolumeMount{Name: memberAgentTokenVolumeName, MountPath: serviceAccountMountPath, ReadOnly: true}),
		Resources: memberAgentResources(),
	}
}
