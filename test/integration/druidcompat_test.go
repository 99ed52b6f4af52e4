package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// druidManifests are Etcds written for etcd-druid (test/testdata/druid): the fields of its samples and
// one manifest with every field set, and an EtcdOpsTask and an EtcdCopyBackupsTask with every
// field set. They must apply unchanged with strict field validation, which kubectl uses by default.
var druidManifests = []string{"example.yaml", "example-s3.yaml", "example-tls.yaml", "config-sample.yaml", "object-store.yaml",
	"every-field.yaml", "opstask-every-field.yaml", "copytask-every-field.yaml"}

func readManifest(t *testing.T, name, namespace string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "druid", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	obj.SetNamespace(namespace)
	return obj
}

func TestDruidManifestsApplyWithStrictFieldValidation(t *testing.T) {
	env := sharedControlPlane(t)
	ctx := context.Background()
	ns := testNamespace("druid-compat")
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	strict := client.FieldValidation("Strict")

	for _, name := range druidManifests {
		t.Run("create/"+name, func(t *testing.T) {
			obj := readManifest(t, name, ns)
			if err := env.Client().Create(ctx, obj, strict); err != nil {
				t.Fatalf("strict create of %s refused: %v", name, err)
			}
			// What was sent is what is stored: nothing was pruned.
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			if err := env.Client().Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				t.Fatal(err)
			}
			sent, _, _ := unstructured.NestedMap(readManifest(t, name, ns).Object, "spec")
			got, _, _ := unstructured.NestedMap(stored.Object, "spec")
			for _, path := range leafPaths(sent, nil) {
				if !hasPath(got, path) {
					t.Errorf("%s: field spec.%s was pruned", name, strings.Join(path, "."))
				}
			}
		})
		t.Run("server-side-apply/"+name, func(t *testing.T) {
			obj := readManifest(t, name, ns)
			obj.SetName(obj.GetName() + "-ssa")
			if err := env.Client().Patch(ctx, obj, client.Apply, client.FieldOwner("druid-user"), client.ForceOwnership, strict); err != nil { //nolint:staticcheck // the typed Apply API needs apply configurations we do not generate
				t.Fatalf("strict server-side apply of %s refused: %v", name, err)
			}
		})
	}

	t.Run("typo is rejected", func(t *testing.T) {
		err := env.Client().Create(ctx, readManifest(t, "typo.yaml", ns), strict)
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.etcd.qouta"`) {
			t.Fatalf("want an unknown-field error naming spec.etcd.qouta, got %v", err)
		}
	})

	t.Run("a final delta snapshot is refused", func(t *testing.T) {
		obj := readManifest(t, "opstask-every-field.yaml", ns)
		obj.SetName("final-delta")
		if err := unstructured.SetNestedField(obj.Object, "delta", "spec", "config", "onDemandSnapshot", "type"); err != nil {
			t.Fatal(err)
		}
		err := env.Client().Create(ctx, obj, strict)
		if err == nil || !strings.Contains(err.Error(), "isFinal must be false") {
			t.Fatalf("want etcd-druid's isFinal rule to refuse it, got %v", err)
		}
	})

	t.Run("kubectl apply", func(t *testing.T) {
		kubectl := localcluster.RequireBinary(t, "kubectl")
		kubeconfig := env.KubeconfigPath()
		run := func(file string) (string, error) {
			cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-n", ns, "-f", filepath.Join("..", "testdata", "druid", file))
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, name := range druidManifests {
			// The objects exist from the subtests above: this is an update through kubectl's
			// client-side apply, validated strictly by the server (kubectl's default).
			if out, err := run(name); err != nil {
				t.Errorf("kubectl apply -f %s: %v\n%s", name, err, out)
			}
		}
		out, err := run("typo.yaml")
		if err == nil || !strings.Contains(out, `unknown field "spec.etcd.qouta"`) {
			t.Errorf("kubectl apply of typo.yaml: want an unknown-field error, got %v\n%s", err, out)
		}
	})
}

// leafPaths lists the paths of a manifest's scalar and list values.
func leafPaths(m map[string]any, prefix []string) [][]string {
	var out [][]string
	for k, v := range m {
		p := append(append([]string(nil), prefix...), k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leafPaths(sub, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func hasPath(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		return true
	}
	sub, ok := v.(map[string]any)
	return ok && hasPath(sub, path[1:])
}

// eventWithReason waits for an Event on the Etcd with reason whose message contains each of want.
func eventWithReason(t *testing.T, env *localcluster.Cluster, ns, etcdName, reason string, want ...string) {
	t.Helper()
	framework.Eventually(t, timeout, "a "+reason+" Event", func(ctx context.Context) (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client().List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.Reason != reason || e.InvolvedObject.Name != etcdName {
				continue
			}
			seen = append(seen, e.Message)
			all := true
			for _, w := range want {
				all = all && strings.Contains(e.Message, w)
			}
			if all {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s Events: %q", reason, seen)
	})
}

// The druid settings of an Etcd reach the objects the members run from; a bad value is reported
// and leaves them as they were.
func TestDruidSettingsReachTheMembersAndBadOnesAreKept(t *testing.T) {
	env := sharedControlPlane(t)
	ns, name := testNamespace("druid-settings"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})

	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	quota := resource.MustParse("2Gi")
	etcd.Spec.Etcd.Quota = &quota
	etcd.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsExtensive)
	etcd.Spec.Etcd.HeartbeatDuration = &metav1.Duration{Duration: 10 * time.Second}
	etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("0 3 * * *")
	etcd.Spec.Etcd.ClientService = &druidv1alpha1.ClientService{Annotations: map[string]string{"team": "storage"}, TrafficDistribution: ptr.To("PreferClose")}
	etcd.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionPeriodic), AutoCompactionRetention: ptr.To("30m")}
	etcd.Spec.SchedulingConstraints = &druidv1alpha1.SchedulingConstraints{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
	}}}
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{Port: ptr.To(int32(8080)), FullSnapshotSchedule: ptr.To("0 */24 * * *")}
	if err := env.Client().Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}

	key := types.NamespacedName{Namespace: ns, Name: name}
	var firstTemplate corev1.PodTemplateSpec
	framework.Eventually(t, timeout, "settings on the ConfigMap, StatefulSet, client Service and Leases", func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, cm); err != nil {
			return false, err.Error()
		}
		for k, v := range map[string]string{
			"ETCD_QUOTA_BACKEND_BYTES": "2147483648", "ETCD_METRICS": "extensive",
			"ETCD_AUTO_COMPACTION_MODE": "periodic", "ETCD_AUTO_COMPACTION_RETENTION": "30m",
		} {
			if cm.Data[k] != v {
				return false, fmt.Sprintf("ConfigMap %s = %q, want %q", k, cm.Data[k], v)
			}
		}
		sts, err := getStatefulSet(ctx, env.Client(), ns, name)
		if err != nil {
			return false, err.Error()
		}
		pod := sts.Spec.Template.Spec
		if len(pod.TopologySpreadConstraints) != 1 {
			return false, fmt.Sprintf("topologySpreadConstraints %+v", pod.TopologySpreadConstraints)
		}
		if args := strings.Join(pod.Containers[1].Args, " "); !strings.Contains(args, "--interval=10s") {
			return false, "member-agent args " + args
		}
		svc := &corev1.Service{}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-client"}, svc); err != nil {
			return false, err.Error()
		}
		if svc.Annotations["team"] != "storage" || svc.Spec.TrafficDistribution == nil {
			return false, fmt.Sprintf("client Service annotations %v trafficDistribution %v", svc.Annotations, svc.Spec.TrafficDistribution)
		}
		lease := &coordinationv1.Lease{}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, lease); err != nil {
			return false, err.Error()
		}
		if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 30 {
			return false, fmt.Sprintf("lease duration %v, want 30 (3 heartbeats of 10s)", d)
		}
		firstTemplate = sts.Spec.Template
		return true, ""
	})
	eventWithReason(t, env, ns, name, "FieldsIgnored", "spec.backup.fullSnapshotSchedule", "spec.backup.port", "no backups are taken")

	// A bad schedule and a bad retention: reported, and the members' template stays as it was.
	if err := env.Client().Get(ctx, key, etcd); err != nil {
		t.Fatal(err)
	}
	etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("0 25 * * *")
	etcd.Spec.SharedConfig.AutoCompactionRetention = ptr.To("half an hour")
	etcd.Spec.Etcd.Quota = ptr.To(resource.MustParse("1Gi"))
	if err := env.Client().Update(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "lastErrors naming the schedule and the retention", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		codes := map[string]bool{}
		for _, e := range got.Status.LastErrors {
			codes[e.Code] = true
		}
		if codes["ERR_INVALID_DEFRAGMENTATION_SCHEDULE"] && codes["ERR_INVALID_AUTO_COMPACTION"] {
			return true, ""
		}
		return false, fmt.Sprintf("lastErrors %+v", got.Status.LastErrors)
	})
	eventWithReason(t, env, ns, name, "InvalidSpec", "defragmentationSchedule")
	sts, err := getStatefulSet(ctx, env.Client(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(sts.Spec.Template, firstTemplate) {
		t.Fatal("the pod template changed although the new spec is invalid")
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["ETCD_QUOTA_BACKEND_BYTES"] != "2147483648" {
		t.Fatalf("quota in the ConfigMap %s: the valid part of an invalid spec was applied", cm.Data["ETCD_QUOTA_BACKEND_BYTES"])
	}

	// Fixed, and with a larger volume: the settings go through, the storage change waits for
	// every member to be ready (none is, here) and says so. No member answers here, so the
	// lowered quota is applied unverified, with a warning.
	if err := env.Client().Get(ctx, key, etcd); err != nil {
		t.Fatal(err)
	}
	etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("0 3 * * *")
	etcd.Spec.SharedConfig.AutoCompactionRetention = ptr.To("30m")
	etcd.Spec.StorageCapacity = ptr.To(resource.MustParse("20Gi"))
	if err := env.Client().Update(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	eventWithReason(t, env, ns, name, "VolumeWaitMembersReady", "16Gi of the default class → 20Gi of the default class")
	// No class, so no growth in place: the members are to move, and the reason says why.
	eventWithReason(t, env, ns, name, "VolumeWaitMembersReady", "the claims name no storage class, so they cannot grow in place")
	eventWithReason(t, env, ns, name, "QuotaUnverified", "lowered from 2147483648 to 1073741824")
	framework.Eventually(t, timeout, "the fixed settings applied", func(ctx context.Context) (bool, string) {
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["ETCD_QUOTA_BACKEND_BYTES"] == "1073741824", "quota " + cm.Data["ETCD_QUOTA_BACKEND_BYTES"]
	})
}

// TestEtcdAskingToJoinAnExistingClusterWaits: etcd-druid's bootstrapWithExistingCluster is
// accepted (no lastErrors) and everything but the members is created; no StatefulSet is, since
// its members would form a new, empty cluster, and the BootstrappedWithExistingCluster condition
// and a Warning say why. As in etcd-druid the field cannot be added to an Etcd after its creation;
// removed, the members start as a new cluster.
func TestEtcdAskingToJoinAnExistingClusterWaits(t *testing.T) {
	env := sharedControlPlane(t)
	ns, name := testNamespace("druid-join"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})

	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	etcd.Spec.Etcd.BootstrapWithExistingCluster = &druidv1alpha1.BootstrapWithExistingCluster{
		Members:         []druidv1alpha1.BootstrapExistingMember{{Name: "source-0", PeerURLs: []string{"https://source-0.source-peer.other.svc:2380"}}},
		ClientEndpoints: []string{"https://source-client.other.svc:2379"},
	}
	if err := env.Client().Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	eventWithReason(t, env, ns, name, "ExistingClusterNotJoined", "not supported yet", "no member is started")
	framework.Eventually(t, timeout, "the condition, no lastErrors, the ConfigMap", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		if len(got.Status.LastErrors) > 0 {
			return false, fmt.Sprintf("lastErrors %+v", got.Status.LastErrors)
		}
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeBootstrappedWithExistingCluster)
		if c == nil || c.Status != druidv1alpha1.ConditionFalse || c.Reason != "JoinNotSupported" {
			return false, fmt.Sprintf("condition %+v", c)
		}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-config"}, &corev1.ConfigMap{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if _, err := getStatefulSet(ctx, env.Client(), ns, name); err == nil {
		t.Fatal("a StatefulSet was created for an Etcd that asks to join an existing cluster")
	}

	// Added to an Etcd that exists: refused by the API server.
	other := framework.NewEtcd(ns, "etcd-other", 1, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	// A merge patch, not an update: the operator writes the new Etcd meanwhile.
	patch := client.MergeFrom(other.DeepCopy())
	other.Spec.Etcd.BootstrapWithExistingCluster = etcd.Spec.Etcd.BootstrapWithExistingCluster.DeepCopy()
	if err := env.Client().Patch(ctx, other, patch); err == nil || !strings.Contains(err.Error(), "can only be set when the Etcd is created") {
		t.Fatalf("adding bootstrapWithExistingCluster to an existing Etcd: %v", err)
	}

	// Removed: the members start, as a new cluster, and the condition goes.
	if err := env.Client().Get(ctx, key, etcd); err != nil {
		t.Fatal(err)
	}
	removal := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Etcd.BootstrapWithExistingCluster = nil
	if err := env.Client().Patch(ctx, etcd, removal); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the StatefulSet created and the condition gone", func(ctx context.Context) (bool, string) {
		if _, err := getStatefulSet(ctx, env.Client(), ns, name); err != nil {
			return false, err.Error()
		}
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeBootstrappedWithExistingCluster); c != nil {
			return false, fmt.Sprintf("condition still there: %+v", c)
		}
		return true, ""
	})
}
