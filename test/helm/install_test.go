package helm

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// apiServer starts a real kube-apiserver (RBAC authorizer) on loopback, without controllers: the
// tests judge what the chart and the manager write, not what controllers make of it.
func apiServer(t *testing.T) *localcluster.Cluster {
	t.Helper()
	return localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true})
}

// createNamespace creates a namespace the test works in.
func createNamespace(ctx context.Context, t *testing.T, cluster *localcluster.Cluster, name string) {
	t.Helper()
	if _, err := framework.CreateNamespace(ctx, cluster.Client(), name, nil); err != nil {
		t.Fatal(err)
	}
}

// asServiceAccount impersonates a ServiceAccount the way the API server authenticates its token,
// so RBAC (including the escalation check on Roles) judges it exactly as it would the manager.
func asServiceAccount(t *testing.T, admin *rest.Config, namespace, name string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// helm install against a real API server: every object is accepted, the manager's ServiceAccount
// can do what the reconcilers do and no more, it can create the member-agent Role without the
// escalate verb, and a gate flip by helm upgrade changes the configuration and the pod template.
func TestInstallOnAPIServer(t *testing.T) {
	helmBinary(t) // skip before paying for an API server when helm is missing
	cluster := apiServer(t)
	admin, kubeconfig := cluster.RESTConfig(), cluster.KubeconfigPath()
	ctx := t.Context()
	adminClient := kubernetes.NewForConfigOrDie(admin)

	createNamespace(ctx, t, cluster, releaseNamespace)
	install := []string{"install", releaseName, chartDir(t), "--kubeconfig", kubeconfig, "--namespace", releaseNamespace}
	if _, err := runHelm(t, install...); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	fullname := releaseName + "-etcd-conductor"
	manager := asServiceAccount(t, admin, releaseNamespace, fullname)

	t.Run("access", func(t *testing.T) {
		cases := []struct {
			verb, group, resource, subresource string
			allowed                            bool
		}{
			{"watch", "druid.gardener.cloud", "etcds", "", true},
			{"patch", "druid.gardener.cloud", "etcds", "status", true},
			{"update", "druid.gardener.cloud", "etcds", "finalizers", true},
			{"update", "druid.gardener.cloud", "etcds", "", false},
			// patch: only to remove a consumed druid.gardener.cloud/operation annotation (internal/decide/specgate)
			{"patch", "druid.gardener.cloud", "etcds", "", true},
			{"delete", "druid.gardener.cloud", "etcds", "", false},
			{"create", "druid.gardener.cloud", "etcds", "", false},
			{"watch", "druid.gardener.cloud", "etcdopstasks", "", true},
			{"delete", "druid.gardener.cloud", "etcdopstasks", "", true}, // a finished task after its TTL
			{"update", "druid.gardener.cloud", "etcdopstasks", "status", true},
			{"create", "druid.gardener.cloud", "etcdopstasks", "", false},
			{"update", "druid.gardener.cloud", "etcdopstasks", "", false},
			{"watch", "druid.gardener.cloud", "etcdcopybackupstasks", "", true},
			{"update", "druid.gardener.cloud", "etcdcopybackupstasks", "status", true},
			{"update", "druid.gardener.cloud", "etcdcopybackupstasks", "", false},
			{"delete", "druid.gardener.cloud", "etcdcopybackupstasks", "", false},
			{"update", "apps", "statefulsets", "", true},
			{"patch", "apps", "statefulsets", "", true},  // the membership controller sets replicas
			{"delete", "apps", "statefulsets", "", true}, // orphaning, for a volume change
			{"delete", "", "pods", "", true},
			{"get", "", "pods", "", false},
			{"create", "", "pods", "", false},
			{"update", "", "pods", "", false},
			{"create", "", "pods", "eviction", false},
			{"get", "", "secrets", "", true},
			{"list", "", "secrets", "", false},
			{"watch", "", "secrets", "", false},
			// Its own member TLS Secret per Etcd (internal/operator/controller/etcd/trust.go); still no list
			// or watch, so it never holds the Secrets in reach.
			{"create", "", "secrets", "", true},
			{"update", "", "secrets", "", true},
			{"delete", "", "secrets", "", false},
			{"create", "coordination.k8s.io", "leases", "", true},
			{"create", "rbac.authorization.k8s.io", "roles", "", true},
			{"delete", "rbac.authorization.k8s.io", "roles", "", false},
			{"escalate", "rbac.authorization.k8s.io", "roles", "", false},
			{"bind", "rbac.authorization.k8s.io", "roles", "", false},
			{"create", "rbac.authorization.k8s.io", "clusterroles", "", false},
			{"create", "policy", "poddisruptionbudgets", "", true},
			{"delete", "policy", "poddisruptionbudgets", "", false},
			{"delete", "", "services", "", false},
			{"create", "", "events", "", true},
			{"create", "events.k8s.io", "events", "", false},
			// A volume change lists the claims and grows them in place; it never deletes one
			// (the old claims keep their data) nor watches them.
			{"list", "", "persistentvolumeclaims", "", true},
			{"patch", "", "persistentvolumeclaims", "", true},
			{"watch", "", "persistentvolumeclaims", "", false},
			{"delete", "", "persistentvolumeclaims", "", false},
			{"get", "storage.k8s.io", "storageclasses", "", true},
			{"list", "storage.k8s.io", "storageclasses", "", false},
			{"get", "", "nodes", "", false},
			{"impersonate", "", "serviceaccounts", "", false},
		}
		for _, tc := range cases {
			name := tc.verb + " " + tc.resource
			if tc.group != "" {
				name = tc.verb + " " + tc.group + "/" + tc.resource
			}
			if tc.subresource != "" {
				name += "/" + tc.subresource
			}
			t.Run(name, func(t *testing.T) {
				review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: "team-a", Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource,
					},
				}}
				got, err := manager.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("asking the API server: %v", err)
				}
				if got.Status.Allowed != tc.allowed {
					t.Errorf("allowed = %t, want %t (%s)", got.Status.Allowed, tc.allowed, got.Status.Reason)
				}
			})
		}
	})

	t.Run("member-agent role without escalate", func(t *testing.T) {
		createNamespace(ctx, t, cluster, "team-a")
		// The Role and RoleBinding the Etcd reconciler creates for every cluster.
		etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "team-a"}}
		etcd.Spec.Replicas = 3
		role := resources.MemberAgentRole(etcd)
		if _, err := manager.RbacV1().Roles("team-a").Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("manager cannot create the member-agent Role: %v", err)
		}
		binding := resources.MemberAgentRoleBinding(etcd)
		if _, err := manager.RbacV1().RoleBindings("team-a").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("manager cannot bind the member-agent Role: %v", err)
		}

		// The other side of least privilege: without escalate it cannot hand out what it lacks.
		wider := role.DeepCopy()
		wider.Name = "wider"
		wider.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}
		_, err := manager.RbacV1().Roles("team-a").Create(ctx, wider, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("creating a Role that grants secrets/list: err = %v, want Forbidden", err)
		}
	})

	t.Run("gate flip by helm upgrade", func(t *testing.T) {
		before := deployedState(ctx, t, adminClient, fullname)
		if before.gates.Enabled(features.QuorumAwareUpdatesWithOnDelete) {
			t.Fatal("gate is on after a default install")
		}
		upgrade := []string{"upgrade", releaseName, chartDir(t), "--kubeconfig", kubeconfig,
			"--namespace", releaseNamespace, "--reuse-values", "--set", "featureGates.QuorumAwareUpdatesWithOnDelete=true"}
		if _, err := runHelm(t, upgrade...); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		after := deployedState(ctx, t, adminClient, fullname)
		if !after.gates.Enabled(features.QuorumAwareUpdatesWithOnDelete) {
			t.Error("gate is off in the cluster's config after the upgrade")
		}
		if after.checksum == before.checksum {
			t.Error("pod template checksum unchanged: the manager would keep running with the old configuration")
		}
	})

	// watchNamespaces: Roles in the watched namespace and the release namespace, nothing else.
	t.Run("namespaced release", func(t *testing.T) {
		const release, ns = "scoped", "scoped-system"
		// The Roles go into the watched namespace, which must exist.
		if _, err := adminClient.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			createNamespace(ctx, t, cluster, "team-a")
		}
		createNamespace(ctx, t, cluster, ns)
		// The first release owns the CRDs (one release per cluster does, docs/upgrading.md).
		install := []string{"install", release, chartDir(t), "--kubeconfig", kubeconfig,
			"--namespace", ns, "--set", "watchNamespaces={team-a}", "--set", "crds.install=false"}
		if _, err := runHelm(t, install...); err != nil {
			t.Fatalf("helm install: %v", err)
		}
		scoped := asServiceAccount(t, admin, ns, release+"-etcd-conductor")
		cases := []struct {
			verb, group, resource, namespace string
			allowed                          bool
		}{
			{"get", "", "secrets", "team-a", true},
			{"delete", "", "pods", "team-a", true},
			{"watch", "druid.gardener.cloud", "etcds", "team-a", true},
			{"get", "", "secrets", "team-b", false},
			{"watch", "druid.gardener.cloud", "etcds", "team-b", false},
			{"watch", "druid.gardener.cloud", "etcds", "", false},
			{"list", "", "pods", "", false},
			{"update", "coordination.k8s.io", "leases", ns, true}, // leader election
			{"list", "coordination.k8s.io", "leases", ns, false},
			{"create", "authentication.k8s.io", "tokenreviews", "", true}, // metrics authentication
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s %s/%s in %q", tc.verb, tc.group, tc.resource, tc.namespace), func(t *testing.T) {
				review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: tc.namespace, Verb: tc.verb, Group: tc.group, Resource: tc.resource,
					},
				}}
				got, err := scoped.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("asking the API server: %v", err)
				}
				if got.Status.Allowed != tc.allowed {
					t.Errorf("allowed = %t, want %t (%s)", got.Status.Allowed, tc.allowed, got.Status.Reason)
				}
			})
		}
		if _, err := adminClient.RbacV1().ClusterRoles().Get(ctx, release+"-etcd-conductor", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("controllers' ClusterRole in a namespaced install: err = %v, want NotFound", err)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		uninstall := []string{"uninstall", releaseName, "--kubeconfig", kubeconfig, "--namespace", releaseNamespace}
		if _, err := runHelm(t, uninstall...); err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		if _, err := adminClient.RbacV1().ClusterRoles().Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole after uninstall: err = %v, want NotFound", err)
		}
		if _, err := adminClient.RbacV1().ClusterRoleBindings().Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRoleBinding after uninstall: err = %v, want NotFound", err)
		}
	})
}

type deployed struct {
	gates    features.Gates
	checksum string
}

// deployedState reads the configuration and pod template the cluster holds, decoding the config
// as the manager would at its next start.
func deployedState(ctx context.Context, t *testing.T, c *kubernetes.Clientset, fullname string) deployed {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(releaseNamespace).Get(ctx, fullname+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading config ConfigMap: %v", err)
	}
	cfg, err := configv1alpha1.Decode([]byte(cm.Data[configKey]))
	if err != nil {
		t.Fatalf("manager would reject the installed configuration: %v", err)
	}
	gates, err := features.New(cfg.FeatureGates)
	if err != nil {
		t.Fatalf("manager would reject the installed gates: %v", err)
	}
	deploy, err := c.AppsV1().Deployments(releaseNamespace).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Deployment: %v", err)
	}
	return deployed{gates: gates, checksum: deploy.Spec.Template.Annotations["checksum/config"]}
}
