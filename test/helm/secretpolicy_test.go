package helm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// The Secret ownership policy on a real kube-apiserver: the operator's ServiceAccount, which RBAC
// lets create, update and delete any Secret, is refused every write of a Secret it does not own
// and allowed its own member TLS Secret; nobody else is matched.
func TestSecretOwnershipPolicyOnAPIServer(t *testing.T) {
	helmBinary(t)
	cluster := apiServer(t)
	admin := cluster.RESTConfig()
	ctx := t.Context()
	adminClient := kubernetes.NewForConfigOrDie(admin)
	const ns = "team-a"
	createNamespace(ctx, t, cluster, ns)
	createNamespace(ctx, t, cluster, releaseNamespace)

	// RBAC allows the operator every write on Secrets: a refusal below is the policy's.
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}
	if _, err := adminClient.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secret-writer"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secret-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secret-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fullname, Namespace: releaseNamespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	operator := asServiceAccount(t, admin, releaseNamespace, fullname)

	ms := splitManifests(t, render(t, nil, "--show-only", "templates/secret-ownership-policy.yaml"))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicy"), policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicyBinding"), binding)
	if _, err := adminClient.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	etcd := &druidv1alpha1.Etcd{TypeMeta: metav1.TypeMeta{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd"},
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns, UID: types.UID("etcd-uid")}}
	// owned is the member TLS Secret as the Etcd reconciler writes it (trust.go).
	owned := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: resources.Labels(etcd),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: etcd.APIVersion, Kind: etcd.Kind, Name: etcd.Name, UID: etcd.UID, Controller: ptr.To(true)}}},
			Data: map[string][]byte{"ca.crt": []byte("ca")}}
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password", Namespace: ns}, Data: map[string][]byte{"password": []byte("hunter2")}}
	if _, err := adminClient.CoreV1().Secrets(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The apiserver loads a new policy asynchronously: a dry run is admitted like the real thing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := operator.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy not in force after 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	refused := func(t *testing.T, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy.Name) {
			t.Errorf("%s: err = %v, want Forbidden by %s", what, err, policy.Name)
			return
		}
		t.Logf("%s: %v", what, err)
	}
	t.Run("the operator is refused a Secret it does not own", func(t *testing.T) {
		_, err := operator.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "planted", Namespace: ns}}, metav1.CreateOptions{})
		refused(t, "create a foreign Secret", err)
		_, err = operator.CoreV1().Secrets(ns).Patch(ctx, foreign.Name, types.MergePatchType, []byte(`{"data":{"password":"b3du"}}`), metav1.PatchOptions{})
		refused(t, "update a foreign Secret", err)
		// Nor by making it look like its own: the stored Secret is what counts.
		adopt := fmt.Sprintf(`{"metadata":{"labels":{%q:"etcd-conductor"},"ownerReferences":[{"apiVersion":%q,"kind":"Etcd","name":"db-password","uid":"x","controller":true}]}}`,
			resources.LabelManagedBy, etcd.APIVersion)
		_, err = operator.CoreV1().Secrets(ns).Patch(ctx, foreign.Name, types.MergePatchType, []byte(adopt), metav1.PatchOptions{})
		refused(t, "adopt a foreign Secret", err)
		refused(t, "delete a foreign Secret", operator.CoreV1().Secrets(ns).Delete(ctx, foreign.Name, metav1.DeleteOptions{}))
		noOwner := owned(resources.MemberTLSSecretName(etcd))
		noOwner.OwnerReferences = nil
		_, err = operator.CoreV1().Secrets(ns).Create(ctx, noOwner, metav1.CreateOptions{})
		refused(t, "create a member TLS Secret no Etcd controls", err)
		_, err = operator.CoreV1().Secrets(ns).Create(ctx, owned("other-member-tls"), metav1.CreateOptions{})
		refused(t, "create the member TLS Secret of another Etcd than its owner", err)
		// Under its own name, a Secret of a type the cluster acts on: a service-account token
		// Secret would be filled with a token of the ServiceAccount it names.
		token := owned(resources.MemberTLSSecretName(etcd))
		token.Type = corev1.SecretTypeServiceAccountToken
		token.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
		token.Data = nil
		_, err = operator.CoreV1().Secrets(ns).Create(ctx, token, metav1.CreateOptions{})
		refused(t, "create a service-account token Secret under its member TLS Secret's name", err)
	})
	t.Run("the operator writes its own member TLS Secret", func(t *testing.T) {
		mine := owned(resources.MemberTLSSecretName(etcd))
		created, err := operator.CoreV1().Secrets(ns).Create(ctx, mine, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating its own Secret: %v", err)
		}
		created.Data["tls.crt"] = []byte("renewed")
		if _, err := operator.CoreV1().Secrets(ns).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating its own Secret: %v", err)
		}
		_, err = operator.CoreV1().Secrets(ns).Patch(ctx, created.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`), metav1.PatchOptions{})
		refused(t, "give its own Secret away", err)
	})
	t.Run("nobody else is matched", func(t *testing.T) {
		if _, err := adminClient.CoreV1().Secrets(ns).Patch(ctx, foreign.Name, types.MergePatchType, []byte(`{"data":{"password":"b3du"}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("the admin updating a Secret: %v", err)
		}
	})
}
