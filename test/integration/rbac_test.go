package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// chartManagerRules are the controllers' rules exactly as the chart grants them: the file the
// chart renders into its ClusterRole or per-namespace Roles (generated from the code's
// +kubebuilder:rbac markers; test/helm checks that the chart renders this file unchanged).
func chartManagerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "charts", "etcd-conductor", "files", "rbac", "manager", "role.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the chart's generated rules: %v", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s holds no rules", path)
	}
	return role.Rules
}

// The operator runs as a ServiceAccount holding only the chart's rules (Secrets: get, nothing
// else) and still converges an Etcd: StatefulSet written, status written by both the Etcd and the
// status controller. A Secret read through the informer cache would list and watch Secrets, which
// these rules forbid: the cache would never sync and the StatefulSet would never appear.
//
// Namespaced, the rules are a Role in the one watched namespace: the operator converges the Etcd
// there and leaves one in another namespace alone.
func TestOperatorRunsWithOnlyTheChartsRBAC(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true, CRDs: true})
	ctx := context.Background()
	rules := chartManagerRules(t)
	const operatorNS = "etcd-conductor"
	if _, err := framework.CreateNamespace(ctx, env.Client(), operatorNS, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("cluster-wide", func(t *testing.T) {
		const sa, ns = "cluster-wide", "rbac-cluster"
		setup(t, env, ns, "etcd-main")
		grant(ctx, t, env.Client(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: sa},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNS}},
			})
		cfg, err := localcluster.ServiceAccountConfig(ctx, env.RESTConfig(), operatorNS, sa)
		if err != nil {
			t.Fatal(err)
		}
		op := framework.StartOperator(t, cfg, framework.OperatorOptions{FeatureGates: gate(true)})
		etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
		if err := env.Client().Create(ctx, etcd); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, env.Client(), etcd)
		if err := op.Stop(); err != nil {
			t.Errorf("operator stopped with an error: %v", err)
		}
	})

	t.Run("watched namespace", func(t *testing.T) {
		const sa, ns, other = "namespaced", "rbac-watched", "rbac-unwatched"
		setup(t, env, ns, "etcd-main")
		setup(t, env, other, "etcd-main")
		grant(ctx, t, env.Client(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}, Rules: rules},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNS}},
			})
		cfg, err := localcluster.ServiceAccountConfig(ctx, env.RESTConfig(), operatorNS, sa)
		if err != nil {
			t.Fatal(err)
		}
		framework.StartOperator(t, cfg, framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
		unwatched := framework.NewEtcd(other, "etcd-main", 3, framework.EtcdImage("3.6.8"))
		if err := env.Client().Create(ctx, unwatched); err != nil {
			t.Fatal(err)
		}
		etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
		if err := env.Client().Create(ctx, etcd); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, env.Client(), etcd)
		// The watched Etcd converged, so the operator was running while this one existed.
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: other, Name: "etcd-main"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			t.Errorf("StatefulSet in the unwatched namespace: err = %v, want NotFound", err)
		}
	})
}

func grant(ctx context.Context, t *testing.T, c client.Client, role, binding client.Object) {
	t.Helper()
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// waitConverged waits for the Etcd reconciler's StatefulSet and observedGeneration and for the
// status controller's replica count and conditions.
func waitConverged(t *testing.T, c client.Client, etcd *druidv1alpha1.Etcd) {
	t.Helper()
	key := client.ObjectKeyFromObject(etcd)
	framework.Eventually(t, timeout, fmt.Sprintf("StatefulSet %s", key), func(ctx context.Context) (bool, string) {
		if _, err := getStatefulSet(ctx, c, key.Namespace, key.Name); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	framework.Eventually(t, timeout, fmt.Sprintf("status of Etcd %s", key), func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		s := got.Status
		if s.ObservedGeneration == nil || *s.ObservedGeneration != got.Generation || len(s.LastErrors) > 0 ||
			len(s.Conditions) == 0 || s.Selector == nil {
			return false, fmt.Sprintf("status = %+v", s)
		}
		return true, ""
	})
}
