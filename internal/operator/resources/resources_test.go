package resources

import (
	"fmt"
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

func testEtcd(replicas int32) *druidv1alpha1.Etcd {
	tlsCfg := func(prefix string) *druidv1alpha1.TLSConfig {
		return &druidv1alpha1.TLSConfig{
			TLSCASecretRef:     druidv1alpha1.SecretReference{SecretReference: corev1.SecretReference{Name: prefix + "-ca"}},
			ServerTLSSecretRef: corev1.SecretReference{Name: prefix + "-server"},
			ClientTLSSecretRef: corev1.SecretReference{Name: prefix + "-client"},
		}
	}
	return &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "shoot"},
		Spec: druidv1alpha1.EtcdSpec{
			Replicas: replicas,
			Labels:   map[string]string{"role": "main"},
			Etcd:     druidv1alpha1.EtcdConfig{ClientUrlTLS: tlsCfg("client"), PeerUrlTLS: &druidv1alpha1.PeerTLSConfig{TLSConfig: *tlsCfg("peer")}},
		},
	}
}

func TestPodDisruptionBudgetMinAvailable(t *testing.T) {
	for _, tt := range []struct {
		replicas int32
		want     int32
	}{{0, 0}, {1, 0}, {3, 2}, {5, 3}, {7, 4}} {
		t.Run(fmt.Sprintf("replicas=%d", tt.replicas), func(t *testing.T) {
			pdb := PodDisruptionBudget(testEtcd(tt.replicas), true)
			if got := pdb.Spec.MinAvailable.IntVal; got != tt.want {
				t.Errorf("replicas %d: minAvailable = %d, want %d", tt.replicas, got, tt.want)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mutate   func(e *druidv1alpha1.Etcd)
		wantCode string
	}{
		{name: "valid", mutate: func(*druidv1alpha1.Etcd) {}},
		{name: "even replicas", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = 4 }, wantCode: ErrInvalidReplicas},
		{name: "negative replicas", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = -1 }, wantCode: ErrInvalidReplicas},
		{name: "zero replicas", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = 0 }},
		{name: "the largest cluster", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = druidv1alpha1.MaxReplicas }},
		{name: "replicas above the bound", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = druidv1alpha1.MaxReplicas + 2 }, wantCode: ErrInvalidReplicas},
		{name: "replicas 2147483647", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = math.MaxInt32 }, wantCode: ErrInvalidReplicas},
		{name: "no client TLS: plain HTTP", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.ClientUrlTLS = nil }},
		{name: "no TLS at all: plain HTTP", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = nil, nil }},
		{name: "no client key pair", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.ClientUrlTLS.ClientTLSSecretRef.Name = "" }, wantCode: ErrMissingTLS},
		{name: "secret in another namespace", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.PeerUrlTLS.ServerTLSSecretRef.Namespace = "other" }, wantCode: ErrSecretNamespace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			tt.mutate(e)
			problems := ValidateSpec(e)
			if tt.wantCode == "" {
				if len(problems) != 0 {
					t.Fatalf("unexpected problems: %v", problems)
				}
				return
			}
			if len(problems) == 0 || problems[0].Code != tt.wantCode {
				t.Fatalf("problems = %v, want first code %s", problems, tt.wantCode)
			}
		})
	}
}

// TestHugeReplicasAreRefusedNotAllocated: a replica count the CRD should have stopped (or one
// written before the bound existed) must come back as an error naming the bound, never as an
// allocation sized by it (2147483647 member names used to kill the manager).
func TestHugeReplicasAreRefusedNotAllocated(t *testing.T) {
	for _, replicas := range []int32{druidv1alpha1.MaxReplicas + 2, math.MaxInt32, math.MinInt32} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			e := testEtcd(replicas)
			p := ValidateReplicas(replicas)
			if p == nil || p.Code != ErrInvalidReplicas || !strings.Contains(p.Message, fmt.Sprintf("up to %d", druidv1alpha1.MaxReplicas)) {
				t.Fatalf("ValidateReplicas(%d) = %v, want %s naming the bound", replicas, p, ErrInvalidReplicas)
			}
			sts, err := StatefulSet(e, Settings{})
			if err == nil || sts != nil || !strings.Contains(err.Error(), ErrInvalidReplicas) {
				t.Fatalf("StatefulSet() = %v, %v; want an %s error", sts, err, ErrInvalidReplicas)
			}
			// Builders without an error return stay bounded and never fall back to "no names",
			// which would mean every Lease in the Role.
			if n := len(PodNames(e)); n > druidv1alpha1.MaxReplicas {
				t.Errorf("PodNames returned %d names", n)
			}
			if replicas > 0 && len(MemberAgentRole(e).Rules[0].ResourceNames) == 0 {
				t.Errorf("the member-agent Role names no Lease, which grants every Lease of the namespace")
			}
			if allocs := testing.AllocsPerRun(3, func() { ConfigMap(e, TransportOf(e)) }); allocs > 200 {
				t.Errorf("ConfigMap allocated %v times", allocs)
			}
		})
	}
}

func TestValidateSecret(t *testing.T) {
	want := SecretKeys{Name: "client-ca", Field: "spec.etcd.clientUrlTls.tlsCASecretRef", Keys: []string{"ca.crt"}}
	if p := ValidateSecret("shoot", want, nil); len(p) != 1 || p[0].Code != ErrSecretMissing || !strings.Contains(p[0].Message, "shoot/client-ca") {
		t.Errorf("missing secret: %v", p)
	}
	empty := &corev1.Secret{Data: map[string][]byte{"tls.crt": []byte("x")}}
	if p := ValidateSecret("shoot", want, empty); len(p) != 1 || p[0].Code != ErrSecretData || !strings.Contains(p[0].Message, `"ca.crt"`) {
		t.Errorf("secret without key: %v", p)
	}
	ok := &corev1.Secret{Data: map[string][]byte{"ca.crt": []byte("pem")}}
	if p := ValidateSecret("shoot", want, ok); len(p) != 0 {
		t.Errorf("valid secret: %v", p)
	}
}

func TestStatefulSetFollowsGate(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			sts, err := StatefulSet(testEtcd(3), Settings{UpdateStrategy: strategy, MemberAgentImage: "conductor:test"})
			if err != nil {
				t.Fatal(err)
			}
			if sts.Spec.UpdateStrategy.Type != strategy || sts.Spec.UpdateStrategy.RollingUpdate != nil {
				t.Errorf("strategy = %+v", sts.Spec.UpdateStrategy)
			}
			if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || *sts.Spec.Replicas != 3 {
				t.Errorf("spec = %+v", sts.Spec)
			}
			if sts.Spec.Template.Annotations[AnnotationSafeToEvict] != "false" {
				t.Errorf("missing safe-to-evict annotation")
			}
			probe := sts.Spec.Template.Spec.Containers[0].ReadinessProbe
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/readyz" {
				t.Errorf("etcd readiness must be /readyz, got %+v", probe)
			}
		})
	}
}

func TestApplyMutableStatefulSetSpec(t *testing.T) {
	desiredOnDelete, _ := StatefulSet(testEtcd(3), Settings{UpdateStrategy: appsv1.OnDeleteStatefulSetStrategyType})
	desiredRolling, _ := StatefulSet(testEtcd(3), Settings{UpdateStrategy: appsv1.RollingUpdateStatefulSetStrategyType})
	rolling := func() *appsv1.StatefulSet {
		s := desiredRolling.DeepCopy()
		s.CreationTimestamp = metav1.Now()
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(0)), MaxUnavailable: nil}
		s.Spec.ServiceName = "kept"
		return s
	}
	t.Run("to OnDelete drops rollingUpdate", func(t *testing.T) {
		existing := rolling()
		ApplyMutableStatefulSetSpec(existing, desiredOnDelete)
		if existing.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || existing.Spec.UpdateStrategy.RollingUpdate != nil {
			t.Errorf("strategy = %+v", existing.Spec.UpdateStrategy)
		}
		if existing.Spec.ServiceName != "kept" {
			t.Errorf("immutable serviceName was overwritten")
		}
	})
	t.Run("staying RollingUpdate keeps its configuration", func(t *testing.T) {
		existing := rolling()
		ApplyMutableStatefulSetSpec(existing, desiredRolling)
		if existing.Spec.UpdateStrategy.RollingUpdate == nil {
			t.Errorf("rollingUpdate configuration was dropped")
		}
	})
	t.Run("to RollingUpdate", func(t *testing.T) {
		existing := desiredOnDelete.DeepCopy()
		existing.CreationTimestamp = metav1.Now()
		ApplyMutableStatefulSetSpec(existing, desiredRolling)
		if existing.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
			t.Errorf("strategy = %+v", existing.Spec.UpdateStrategy)
		}
	})
}

func TestConfigChecksumStable(t *testing.T) {
	e := testEtcd(3)
	if ConfigChecksum(EtcdEnvironment(e)) != ConfigChecksum(EtcdEnvironment(e)) {
		t.Fatal("checksum is not deterministic")
	}
	other := testEtcd(5)
	if ConfigChecksum(EtcdEnvironment(e)) == ConfigChecksum(EtcdEnvironment(other)) {
		t.Fatal("checksum ignores the member list")
	}
}

func TestControlledLeases(t *testing.T) {
	e := testEtcd(3)
	e.UID = "etcd-uid"
	owned := MemberLease(e, "etcd-main-0")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: e.Name, UID: e.UID, Controller: ptr.To(true)}}
	previous := MemberLease(e, "etcd-main-1") // left by a deleted Etcd of the same name
	previous.OwnerReferences = []metav1.OwnerReference{{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: e.Name, UID: "old-uid", Controller: ptr.To(true)}}
	unowned := MemberLease(e, "etcd-main-2")
	got := ControlledLeases(e, []coordinationv1.Lease{*owned, *previous, *unowned})
	if len(got) != 1 || got[0].Name != "etcd-main-0" {
		t.Fatalf("ControlledLeases kept %v, want only etcd-main-0", got)
	}
}

func TestFindPod(t *testing.T) {
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-1"}}}
	got := FindPod(pods, "etcd-main-1")
	if got != &pods[1] {
		t.Fatalf("FindPod(etcd-main-1) = %v, want a pointer to pods[1]", got)
	}
	if got := FindPod(pods, "etcd-main-2"); got != nil {
		t.Fatalf("FindPod(etcd-main-2) = %v, want nil", got.Name)
	}
	if got := FindPod(nil, "etcd-main-0"); got != nil {
		t.Fatalf("FindPod on no pods = %v, want nil", got.Name)
	}
}

// TestMemberLeasesUnused: after spec.replicas drops, a member's Lease stays while the member is
// still a recorded voter or its pod still exists; it goes once neither holds.
func TestMemberLeasesUnused(t *testing.T) {
	e := testEtcd(3)
	leases := []string{"etcd-main-0", "etcd-main-1", "etcd-main-2", "etcd-main-3", "etcd-main-4"}
	for _, tt := range []struct {
		name   string
		voters []string
		pods   []string
		want   []string
	}{
		{"removed from the cluster, pods gone", []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}, nil, []string{"etcd-main-3", "etcd-main-4"}},
		{"still voters", []string{"etcd-main-0", "etcd-main-1", "etcd-main-2", "etcd-main-3", "etcd-main-4"}, nil, nil},
		{"left the cluster, one pod still running", []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}, []string{"etcd-main-4"}, []string{"etcd-main-3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.Status.Voters = nil
			for _, v := range tt.voters {
				e.Status.Voters = append(e.Status.Voters, druidv1alpha1.RecordedVoter{Name: v})
			}
			got := MemberLeasesUnused(e, leases, tt.pods)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("unused %v, want %v", got, tt.want)
			}
		})
	}
}

// The etcd container's liveness probe asks /metrics on the metrics port (answered without a
// quorum and during a defragmentation, unlike /livez, /health or /readyz) and restarts the
// container only after at least 60 s without an answer; the startup probe holds it off while
// etcd loads its database.
func TestEtcdLivenessProbe(t *testing.T) {
	sts, err := StatefulSet(testEtcd(3), Settings{UpdateStrategy: appsv1.OnDeleteStatefulSetStrategyType, MemberAgentImage: "conductor:test"})
	if err != nil {
		t.Fatal(err)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Name != EtcdContainerName {
		t.Fatalf("first container is %s", c.Name)
	}
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
	}{{"liveness", c.LivenessProbe}, {"startup", c.StartupProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != "/metrics" ||
			p.probe.HTTPGet.Port.IntVal != MetricsPort || p.probe.HTTPGet.Scheme != corev1.URISchemeHTTP {
			t.Fatalf("%s probe must GET /metrics on the metrics port, got %+v", p.kind, p.probe)
		}
	}
	l := c.LivenessProbe
	if silence := l.PeriodSeconds * l.FailureThreshold; silence < 60 || l.TimeoutSeconds < 5 {
		t.Errorf("liveness restarts after %ds of failures with a %ds timeout: a loaded member could be killed", silence, l.TimeoutSeconds)
	}
	if s := c.StartupProbe; s.PeriodSeconds*s.FailureThreshold < 15*60 {
		t.Errorf("startup allows %ds: a member loading a large database would be restarted", s.PeriodSeconds*s.FailureThreshold)
	}
}
