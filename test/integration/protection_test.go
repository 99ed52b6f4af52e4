package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// The chart installed as release etcd-conductor in namespace etcd-conductor runs the manager as
// ServiceAccount etcd-conductor/etcd-conductor, the one identity its protection policy lets write.
const protectionRelease, protectionOperatorNS = "etcd-conductor", "etcd-conductor"

// impersonating is a clientset acting as user (with groups and extra), through admin's
// credentials: what the apiserver's admission then sees is that user.
func impersonating(t *testing.T, admin *rest.Config, user rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = user
	return kubernetes.NewForConfigOrDie(cfg)
}

// etcd-druid's component protection, done by the chart's ValidatingAdmissionPolicy: with the
// operator running as the chart's ServiceAccount under the chart's rules and both chart policies
// installed, a user (a cluster admin by RBAC) may neither delete nor change what the operator
// manages for an Etcd, while the operator, member-agents on their Leases, the StatefulSet
// controller (status) and the garbage collector keep working; with etcd-druid's
// disable-etcd-component-protection on the Etcd the user's deletion goes through, and once it is
// removed it is refused again.
func TestComponentProtection(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true,
		Controllers: []string{"garbage-collector", "statefulset", "serviceaccount"}})
	ctx := context.Background()
	c := env.Client()
	admin := env.RESTConfig()

	if _, err := framework.CreateNamespace(ctx, c, protectionOperatorNS, nil); err != nil {
		t.Fatal(err)
	}
	grant(ctx, t, c, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "protection-operator"}, Rules: chartManagerRules(t)},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "protection-operator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "protection-operator"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: protectionRelease, Namespace: protectionOperatorNS}},
		})
	helmHome := t.TempDir()
	if err := stack.InstallMemberLeasePolicy(ctx, env.Clientset(), helmHome); err != nil {
		t.Fatal(err)
	}
	if err := stack.InstallChartPolicy(ctx, env.Clientset(), helmHome, stack.ComponentProtectionPolicyTemplate,
		protectionRelease, protectionOperatorNS); err != nil {
		t.Fatal(err)
	}
	operatorCfg, err := localcluster.ServiceAccountConfig(ctx, admin, protectionOperatorNS, protectionRelease)
	if err != nil {
		t.Fatal(err)
	}

	const ns, name = "protected", "etcd-main"
	setup(t, env, ns, name)
	framework.StartOperator(t, operatorCfg, framework.OperatorOptions{FeatureGates: gate(true)})
	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	// The operator created every object and wrote the status under the policy.
	waitConverged(t, c, etcd)

	// system:masters: RBAC allows the user everything, so a refusal is the policy's.
	user := impersonating(t, admin, rest.ImpersonationConfig{UserName: "jane", Groups: []string{"system:masters"}})
	refused := func(t *testing.T, err error) {
		t.Helper()
		t.Log(err)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), resources.AnnotationDisableProtection) {
			t.Errorf("err = %v, want Forbidden naming %s", err, resources.AnnotationDisableProtection)
		}
	}
	deleteStatefulSet := func() error {
		return user.AppsV1().StatefulSets(ns).Delete(ctx, resources.StatefulSetName(etcd), metav1.DeleteOptions{})
	}
	labelPatch := []byte(`{"metadata":{"labels":{"touched-by":"jane"}}}`)
	// The apiserver loads a new policy asynchronously: wait for it with a dry run, which
	// admission sees like the real thing and which changes nothing.
	framework.Eventually(t, timeout, "the protection policy in force", func(ctx context.Context) (bool, string) {
		err := user.AppsV1().StatefulSets(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err), fmt.Sprintf("dry-run delete of the StatefulSet: %v", err)
	})

	t.Run("a user is refused", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			call func() error
		}{
			{"delete the StatefulSet", deleteStatefulSet},
			{"scale the StatefulSet", func() error {
				scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
				_, err := user.AppsV1().StatefulSets(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
				return err
			}},
			{"label the StatefulSet", func() error {
				_, err := user.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, labelPatch, metav1.PatchOptions{})
				return err
			}},
			{"delete the client Service", func() error {
				return user.CoreV1().Services(ns).Delete(ctx, resources.ClientServiceName(etcd), metav1.DeleteOptions{})
			}},
			{"change the ConfigMap", func() error {
				_, err := user.CoreV1().ConfigMaps(ns).Patch(ctx, resources.ConfigMapName(etcd), types.MergePatchType,
					[]byte(`{"data":{"ETCD_SNAPSHOT_COUNT":"1"}}`), metav1.PatchOptions{})
				return err
			}},
			{"delete the ServiceAccount", func() error {
				return user.CoreV1().ServiceAccounts(ns).Delete(ctx, resources.ServiceAccountName(etcd), metav1.DeleteOptions{})
			}},
			{"delete the member-agent Role", func() error {
				return user.RbacV1().Roles(ns).Delete(ctx, resources.MemberAgentRoleName(etcd), metav1.DeleteOptions{})
			}},
			{"delete the member-agent RoleBinding", func() error {
				return user.RbacV1().RoleBindings(ns).Delete(ctx, resources.MemberAgentRoleName(etcd), metav1.DeleteOptions{})
			}},
			{"delete the PodDisruptionBudget", func() error {
				return user.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, resources.PodDisruptionBudgetName(etcd), metav1.DeleteOptions{})
			}},
			{"delete a member Lease", func() error {
				return user.CoordinationV1().Leases(ns).Delete(ctx, resources.PodName(etcd, 0), metav1.DeleteOptions{})
			}},
			{"renew a member Lease", func() error {
				_, err := user.CoordinationV1().Leases(ns).Patch(ctx, resources.PodName(etcd, 0), types.MergePatchType,
					[]byte(`{"spec":{"holderIdentity":"jane"}}`), metav1.PatchOptions{})
				return err
			}},
		} {
			t.Run(tt.name, func(t *testing.T) { refused(t, tt.call()) })
		}
		if _, err := getStatefulSet(ctx, c, ns, name); err != nil {
			t.Errorf("the StatefulSet after the refusals: %v", err)
		}
	})

	t.Run("the StatefulSet controller writes status", func(t *testing.T) {
		framework.Eventually(t, timeout, "status.observedGeneration of the StatefulSet", func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return sts.Status.ObservedGeneration == sts.Generation, fmt.Sprintf("observedGeneration %d, generation %d", sts.Status.ObservedGeneration, sts.Generation)
		})
	})

	t.Run("a member-agent renews its own Lease", func(t *testing.T) {
		// The identity kubelet's pod-bound token gives the member-agent of etcd-main-0.
		agent := impersonating(t, admin, rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + ns + ":" + resources.ServiceAccountName(etcd),
			Extra:    map[string][]string{"authentication.kubernetes.io/pod-name": {resources.PodName(etcd, 0)}},
		})
		renew := func(lease string) error {
			_, err := agent.CoordinationV1().Leases(ns).Patch(ctx, lease, types.MergePatchType,
				[]byte(`{"spec":{"holderIdentity":"1:Leader"}}`), metav1.PatchOptions{})
			return err
		}
		if err := renew(resources.PodName(etcd, 0)); err != nil {
			t.Errorf("renewing its own Lease: %v", err)
		}
		// The member Lease policy still narrows it to its own.
		if err := renew(resources.PodName(etcd, 1)); !apierrors.IsForbidden(err) {
			t.Errorf("renewing a sibling's Lease: err = %v, want Forbidden", err)
		}
	})

	t.Run("the operator writes", func(t *testing.T) {
		editEtcd(ctx, t, c, etcd, func(e *druidv1alpha1.Etcd) { e.Spec.Annotations = map[string]string{"team": "a"} })
		framework.Eventually(t, timeout, "the changed spec on the pod template", func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return sts.Spec.Template.Annotations["team"] == "a", fmt.Sprintf("template annotations %v", sts.Spec.Template.Annotations)
		})
	})

	t.Run("the garbage collector's identity may delete", func(t *testing.T) {
		gc := impersonating(t, admin, rest.ImpersonationConfig{
			UserName: "system:serviceaccount:kube-system:generic-garbage-collector", Groups: []string{"system:masters"}})
		if err := gc.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, resources.PodDisruptionBudgetName(etcd), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting the PodDisruptionBudget as the garbage collector: %v", err)
		}
		framework.Eventually(t, timeout, "the PodDisruptionBudget recreated", func(ctx context.Context) (bool, string) {
			_, err := env.Clientset().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, resources.PodDisruptionBudgetName(etcd), metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
	})

	stsMarked := func(want bool) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			v, ok := sts.Annotations[resources.AnnotationProtection]
			return ok == want, fmt.Sprintf("%s=%q (present %t)", resources.AnnotationProtection, v, ok)
		}
	}

	t.Run("protection disabled on the Etcd", func(t *testing.T) {
		editEtcd(ctx, t, c, etcd, func(e *druidv1alpha1.Etcd) {
			metav1.SetMetaDataAnnotation(&e.ObjectMeta, resources.AnnotationDisableProtection, "true")
		})
		framework.Eventually(t, timeout, "every managed object marked unprotected", func(ctx context.Context) (bool, string) {
			var unmarked []string
			for _, obj := range managedObjectsOf(etcd) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return false, err.Error()
				}
				if obj.GetAnnotations()[resources.AnnotationProtection] != resources.ProtectionDisabledValue {
					unmarked = append(unmarked, fmt.Sprintf("%T %s", obj, obj.GetName()))
				}
			}
			return len(unmarked) == 0, fmt.Sprintf("not marked: %v", unmarked)
		})
		old, err := getStatefulSet(ctx, c, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := deleteStatefulSet(); err != nil {
			t.Fatalf("deleting the StatefulSet of an unprotected Etcd: %v", err)
		}
		framework.Eventually(t, timeout, "a new StatefulSet, created marked", func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return sts.UID != old.UID && sts.Annotations[resources.AnnotationProtection] == resources.ProtectionDisabledValue,
				fmt.Sprintf("uid %s (old %s), annotations %v", sts.UID, old.UID, sts.Annotations)
		})
	})

	t.Run("protection restored", func(t *testing.T) {
		editEtcd(ctx, t, c, etcd, func(e *druidv1alpha1.Etcd) { delete(e.Annotations, resources.AnnotationDisableProtection) })
		framework.Eventually(t, timeout, "the StatefulSet's mark removed", stsMarked(false))
		refused(t, deleteStatefulSet())
	})

	t.Run("the garbage collector deletes with the Etcd", func(t *testing.T) {
		if err := c.Delete(ctx, etcd); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, timeout, "the StatefulSet and Services gone", func(ctx context.Context) (bool, string) {
			_, stsErr := getStatefulSet(ctx, c, ns, name)
			_, svcErr := env.Clientset().CoreV1().Services(ns).Get(ctx, resources.ClientServiceName(etcd), metav1.GetOptions{})
			return apierrors.IsNotFound(stsErr) && apierrors.IsNotFound(svcErr), fmt.Sprintf("StatefulSet: %v, client Service: %v", stsErr, svcErr)
		})
	})
}

// managedObjectsOf are the objects of an Etcd without backups the policy protects.
func managedObjectsOf(e *druidv1alpha1.Etcd) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: e.Namespace, Name: name} }
	out := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: meta(resources.StatefulSetName(e))},
		&corev1.Service{ObjectMeta: meta(resources.PeerServiceName(e))},
		&corev1.Service{ObjectMeta: meta(resources.ClientServiceName(e))},
		&corev1.ConfigMap{ObjectMeta: meta(resources.ConfigMapName(e))},
		&corev1.ServiceAccount{ObjectMeta: meta(resources.ServiceAccountName(e))},
		&rbacv1.Role{ObjectMeta: meta(resources.MemberAgentRoleName(e))},
		&rbacv1.RoleBinding{ObjectMeta: meta(resources.MemberAgentRoleName(e))},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta(resources.PodDisruptionBudgetName(e))},
	}
	for _, member := range resources.PodNames(e) {
		out = append(out, &coordinationv1.Lease{ObjectMeta: meta(member)})
	}
	return out
}

// editEtcd applies f to the stored Etcd with a merge patch.
func editEtcd(ctx context.Context, t *testing.T, c client.Client, etcd *druidv1alpha1.Etcd, f func(*druidv1alpha1.Etcd)) {
	t.Helper()
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	f(got)
	if err := c.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
}
