// Package integration runs the operator in-process against a real kube-apiserver (localcluster, the
// binaries the Makefile builds) and, where pods are needed, a real kube-controller-manager. No
// kubelet runs here: where a test needs a pod to be ready, it writes the pod status as a kubelet
// would.
package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

const (
	gateName = "QuorumAwareUpdatesWithOnDelete"
	timeout  = 60 * time.Second
)

func gate(on bool) map[string]bool { return map[string]bool{gateName: on} }

// setup creates a namespace with TLS Secrets and returns a context.
func setup(t *testing.T, env *localcluster.Cluster, ns, etcdName string) context.Context {
	t.Helper()
	ctx := context.Background()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.CreateTLSSecrets(ctx, env.Client(), ns, etcdName); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func getStatefulSet(ctx context.Context, c client.Client, ns, name string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	return sts, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sts)
}

func TestEtcdCreatesOwnedObjects(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("objects")
	ctx := setup(t, env, ns, "etcd-main")
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})

	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	owned := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-peer"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-client"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-config"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-member-agent"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-member-agent"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-0"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-1"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-2"}},
	}
	for _, obj := range owned {
		key := types.NamespacedName{Namespace: ns, Name: obj.GetName()}
		framework.Eventually(t, timeout, fmt.Sprintf("%T %s", obj, key), func(ctx context.Context) (bool, string) {
			if err := env.Client().Get(ctx, key, obj); err != nil {
				return false, err.Error()
			}
			if !metav1.IsControlledBy(obj, etcd) {
				return false, "not controlled by the Etcd"
			}
			return true, ""
		})
	}

	sts, err := getStatefulSet(ctx, env.Client(), ns, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("updateStrategy = %s, want OnDelete with the gate on", sts.Spec.UpdateStrategy.Type)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %s", sts.Spec.PodManagementPolicy)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main"}, pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PDB minAvailable = %s, want 2", pdb.Spec.MinAvailable.String())
	}
	peer := &corev1.Service{}
	if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main-peer"}, peer); err != nil {
		t.Fatal(err)
	}
	if !peer.Spec.PublishNotReadyAddresses || peer.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("peer Service must be headless and publish not-ready addresses: %+v", peer.Spec)
	}

	framework.Eventually(t, timeout, "observedGeneration and selector", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		if got.Status.ObservedGeneration == nil || *got.Status.ObservedGeneration != got.Generation || got.Status.Selector == nil {
			return false, fmt.Sprintf("status = %+v", got.Status)
		}
		return true, ""
	})
}

func TestEvenReplicasRejectedByTheAPI(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("even")
	ctx := setup(t, env, ns, "etcd-even")
	for _, replicas := range []int32{2, 4} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			err := env.Client().Create(ctx, framework.NewEtcd(ns, fmt.Sprintf("etcd-%d", replicas), replicas, framework.EtcdImage("3.6.8")))
			if err == nil || !strings.Contains(err.Error(), "odd number") {
				t.Fatalf("creating an Etcd with %d replicas: err = %v, want a rejection mentioning an odd number", replicas, err)
			}
		})
	}
	if err := env.Client().Create(ctx, framework.NewEtcd(ns, "etcd-three", 3, framework.EtcdImage("3.6.8"))); err != nil {
		t.Fatalf("3 replicas must be accepted: %v", err)
	}
}

func TestInvalidSecretIsReportedAndNothingIsCreated(t *testing.T) {
	env := sharedControlPlane(t)
	ctx := context.Background()
	ns := testNamespace("nosecret")
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, env.Client(), etcd, "ERR_SECRET_MISSING", []string{"etcd-main-ca"})
	waitForEvent(t, env.Client(), etcd, "InvalidSpec")
	if _, err := getStatefulSet(ctx, env.Client(), ns, "etcd-main"); err == nil {
		t.Fatal("a StatefulSet was created although its Secrets are missing")
	}
}

// TestMemberNetworkPolicyBesideEveryEtcd: with the manager watching every namespace (the chart's
// default, where no chart can know the namespaces), each Etcd gets its member NetworkPolicy in
// its own namespace as soon as it is created, put back if someone edits it, and removed once the
// operator is configured to make none.
func TestMemberNetworkPolicyBesideEveryEtcd(t *testing.T) {
	env := sharedControlPlane(t)
	fence := &configv1alpha1.MemberNetworkPolicyConfiguration{Enabled: true, MetricsFrom: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}}
	op := framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), MemberNetworkPolicy: fence})
	c := env.Client()
	var etcds []*druidv1alpha1.Etcd
	for _, ns := range []string{testNamespace("fence-a"), testNamespace("fence-b")} {
		ctx := setup(t, env, ns, "etcd-main")
		etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
		if err := c.Create(ctx, etcd); err != nil {
			t.Fatal(err)
		}
		etcds = append(etcds, etcd)
	}
	fenced := func(t *testing.T, etcd *druidv1alpha1.Etcd) {
		t.Helper()
		key := types.NamespacedName{Namespace: etcd.Namespace, Name: etcd.Name + "-members"}
		framework.Eventually(t, timeout, "NetworkPolicy "+key.String(), func(ctx context.Context) (bool, string) {
			np := &networkingv1.NetworkPolicy{}
			if err := c.Get(ctx, key, np); err != nil {
				return false, err.Error()
			}
			if !metav1.IsControlledBy(np, etcd) {
				return false, "not controlled by the Etcd"
			}
			if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/instance"] != etcd.Name || len(np.Spec.Ingress) != 3 {
				return false, fmt.Sprintf("spec %+v", np.Spec)
			}
			return true, ""
		})
	}
	for _, etcd := range etcds {
		fenced(t, etcd)
	}

	t.Run("an edit is put back", func(t *testing.T) {
		etcd := etcds[0]
		np := &networkingv1.NetworkPolicy{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: etcd.Namespace, Name: etcd.Name + "-members"}, np); err != nil {
			t.Fatal(err)
		}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} // open to all
		if err := c.Update(context.Background(), np); err != nil {
			t.Fatal(err)
		}
		fenced(t, etcd)
	})

	t.Run("turned off, the fences go", func(t *testing.T) {
		if err := op.Stop(); err != nil {
			t.Fatal(err)
		}
		framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true)})
		for _, etcd := range etcds {
			key := types.NamespacedName{Namespace: etcd.Namespace, Name: etcd.Name + "-members"}
			framework.Eventually(t, timeout, "NetworkPolicy "+key.String()+" removed", func(ctx context.Context) (bool, string) {
				err := c.Get(ctx, key, &networkingv1.NetworkPolicy{})
				return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
			})
		}
	})
}
