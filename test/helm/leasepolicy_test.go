package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

func TestMemberLeasePolicyRendering(t *testing.T) {
	// The chart's other policy (component protection) is rendered from its own template.
	ms := splitManifests(t, render(t, nil, "--show-only", "templates/member-lease-policy.yaml"))
	if ms.count("ValidatingAdmissionPolicy") != 1 || ms.count("ValidatingAdmissionPolicyBinding") != 1 {
		t.Fatalf("default render: %d policies, %d bindings; want the member Lease policy on by default",
			ms.count("ValidatingAdmissionPolicy"), ms.count("ValidatingAdmissionPolicyBinding"))
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicy"), policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicyBinding"), binding)
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding %+v does not deny by policy %s", binding.Spec, policy.Name)
	}
	// The policy recognises member Leases by the labels the operator puts on them.
	lease := resources.MemberLease(&druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns"}}, "etcd-0")
	for _, key := range []string{resources.LabelManagedBy, resources.LabelName, resources.LabelInstance} {
		found := false
		for _, c := range policy.Spec.MatchConditions {
			found = found || strings.Contains(c.Expression, "'"+key+"'")
		}
		if !found || lease.Labels[key] == "" {
			t.Errorf("label %s: in the policy's match conditions %t, on a member Lease %q", key, found, lease.Labels[key])
		}
	}
	off := splitManifests(t, render(t, nil, "--set", "memberLeasePolicy.enabled=false", "--set", "componentProtection.enabled=false",
		"--set", "memberReportPolicy.enabled=false", "--set", "secretOwnershipPolicy.enabled=false"))
	if n := off.count("ValidatingAdmissionPolicy") + off.count("ValidatingAdmissionPolicyBinding"); n != 0 {
		t.Errorf("memberLeasePolicy.enabled=false still renders %d policy objects", n)
	}
	_, err := runHelm(t, append(templateArgs(t, nil, "--set", "memberReportPolicy.enabled=false"), "--kube-version", "1.31.0")...)
	if err == nil || !strings.Contains(err.Error(), "memberLeasePolicy needs Kubernetes >= 1.32") {
		t.Errorf("rendering for Kubernetes 1.31: err = %v, want the version requirement", err)
	}
}

// The member report policy is on by default, named in the operator's configuration (which checks
// it is installed before it restores on a report), and off only with the operator told so.
func TestMemberReportPolicyRendering(t *testing.T) {
	ms := splitManifests(t, render(t, nil, "--show-only", "templates/member-report-policy.yaml"))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicy"), policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicyBinding"), binding)
	if binding.Name != policy.Name || binding.Spec.PolicyName != policy.Name {
		t.Errorf("binding %s binds %s; the operator looks for both under %s", binding.Name, binding.Spec.PolicyName, policy.Name)
	}
	config := render(t, nil, "--show-only", "templates/configmap.yaml")
	if !strings.Contains(config, "admissionPolicy: "+policy.Name) || !strings.Contains(config, "trustUnauthenticated: false") {
		t.Errorf("the operator's configuration does not name %s:\n%s", policy.Name, config)
	}
	off := render(t, nil, "--show-only", "templates/configmap.yaml", "--set", "memberReportPolicy.enabled=false")
	if strings.Contains(off, "admissionPolicy:") {
		t.Errorf("policy off, the configuration still names one:\n%s", off)
	}
	_, err := runHelm(t, append(templateArgs(t, nil, "--set", "memberLeasePolicy.enabled=false"), "--kube-version", "1.31.0")...)
	if err == nil || !strings.Contains(err.Error(), "memberReportPolicy needs Kubernetes >= 1.32") {
		t.Errorf("rendering for Kubernetes 1.31: err = %v, want the version requirement", err)
	}
}

// The member Lease policy on a real kube-apiserver: member pods share one ServiceAccount whose Role
// may patch every member Lease of the Etcd, so only the policy stops etcd-0 from writing etcd-1's.
// Tokens come from the TokenRequest API bound to each pod, as kubelet gets them.
func TestMemberLeasePolicyOnAPIServer(t *testing.T) {
	helmBinary(t)
	cluster := apiServer(t)
	admin := cluster.RESTConfig()
	ctx := t.Context()
	adminClient := kubernetes.NewForConfigOrDie(admin)

	const ns = "team-a"
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	etcd.Spec.Replicas = 3
	createNamespace(ctx, t, cluster, ns)
	// What the Etcd reconciler creates: the member ServiceAccount, Role, RoleBinding and Leases.
	if _, err := adminClient.CoreV1().ServiceAccounts(ns).Create(ctx, resources.ServiceAccount(etcd), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.RbacV1().Roles(ns).Create(ctx, resources.MemberAgentRole(etcd), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.RbacV1().RoleBindings(ns).Create(ctx, resources.MemberAgentRoleBinding(etcd), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	members := map[string]kubernetes.Interface{}
	for i := range 2 {
		name := resources.PodName(etcd, i)
		if _, err := adminClient.CoordinationV1().Leases(ns).Create(ctx, resources.MemberLease(etcd, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		members[name] = memberClient(ctx, t, admin, adminClient, etcd, name)
	}
	if _, err := adminClient.CoordinationV1().Leases(ns).Create(ctx, resources.MemberLease(etcd, "etcd-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// An Etcd with spec.memberNamePrefix: its Leases are named <prefix>-<pod> (etcd-druid's
	// naming), its pods are not.
	prefixed := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "pfx", Namespace: ns}}
	prefixed.Spec.Replicas, prefixed.Spec.MemberNamePrefix = 3, ptr.To("p")
	for _, obj := range []struct {
		create func() error
	}{
		{func() error {
			_, err := adminClient.CoreV1().ServiceAccounts(ns).Create(ctx, resources.ServiceAccount(prefixed), metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := adminClient.RbacV1().Roles(ns).Create(ctx, resources.MemberAgentRole(prefixed), metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := adminClient.RbacV1().RoleBindings(ns).Create(ctx, resources.MemberAgentRoleBinding(prefixed), metav1.CreateOptions{})
			return err
		}},
	} {
		if err := obj.create(); err != nil {
			t.Fatal(err)
		}
	}
	prefixedMembers := map[string]kubernetes.Interface{}
	for i := range 3 {
		pod := resources.PodName(prefixed, i)
		if _, err := adminClient.CoordinationV1().Leases(ns).Create(ctx, resources.MemberLease(prefixed, pod), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			prefixedMembers[pod] = memberClient(ctx, t, admin, adminClient, prefixed, pod)
		}
	}

	// Without the policy RBAC alone decides, and it cannot tell the pods apart: the hole.
	if err := renew(ctx, members["etcd-0"], ns, "etcd-1", true); err != nil {
		t.Fatalf("before the policy, etcd-0 renewing etcd-1's Lease: %v (the test assumes RBAC allows it)", err)
	}

	policyName := installLeasePolicy(ctx, t, adminClient)

	// The policy takes effect once the apiserver has loaded it; the wait only bounds a broken run.
	var forged error
	deadline := time.Now().Add(30 * time.Second)
	for {
		forged = renew(ctx, members["etcd-0"], ns, "etcd-1", false)
		if forged != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(forged) {
		t.Fatalf("etcd-0 claiming Leader on etcd-1's Lease: err = %v, want Forbidden", forged)
	}
	t.Logf("etcd-0 writing etcd-1's Lease: %v", forged)
	for _, want := range []string{policyName, "may not write Lease etcd-1", "etcd-0"} {
		if !strings.Contains(forged.Error(), want) {
			t.Errorf("denial %q does not name %q", forged, want)
		}
	}

	t.Run("each pod renews its own Lease", func(t *testing.T) {
		for name, c := range members {
			if err := renew(ctx, c, ns, name, true); err != nil {
				t.Errorf("%s renewing its own Lease: %v", name, err)
			}
		}
	})
	t.Run("no pod writes a sibling's Lease", func(t *testing.T) {
		for _, tc := range []struct{ pod, lease string }{{"etcd-1", "etcd-0"}, {"etcd-0", "etcd-2"}} {
			if err := renew(ctx, members[tc.pod], ns, tc.lease, false); !apierrors.IsForbidden(err) {
				t.Errorf("%s renewing %s: err = %v, want Forbidden", tc.pod, tc.lease, err)
			}
		}
	})
	t.Run("a pod cannot relabel its Lease out of the policy", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"someone-else"}}}`)
		_, err := members["etcd-0"].CoordinationV1().Leases(ns).Patch(ctx, "etcd-0", types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "labels") {
			t.Errorf("relabelling: err = %v, want Forbidden naming the labels", err)
		}
	})
	t.Run("the member Role grants only patch", func(t *testing.T) {
		_, err := members["etcd-0"].CoordinationV1().Leases(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("get: err = %v, want Forbidden", err)
		}
		err = members["etcd-0"].CoordinationV1().Leases(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("delete: err = %v, want Forbidden", err)
		}
	})
	t.Run("with memberNamePrefix each pod renews the Lease of its member, <prefix>-<pod>", func(t *testing.T) {
		for pod, c := range prefixedMembers {
			if err := renew(ctx, c, ns, resources.MemberNameOf(prefixed, pod), true); err != nil {
				t.Errorf("%s renewing its member's Lease: %v", pod, err)
			}
		}
	})
	t.Run("with memberNamePrefix no pod writes a sibling's Lease", func(t *testing.T) {
		for _, tc := range []struct{ pod, lease string }{{"pfx-0", "p-pfx-1"}, {"pfx-1", "p-pfx-2"}, {"pfx-1", "p-pfx-0"}} {
			if err := renew(ctx, prefixedMembers[tc.pod], ns, tc.lease, false); !apierrors.IsForbidden(err) {
				t.Errorf("%s renewing %s: err = %v, want Forbidden", tc.pod, tc.lease, err)
			}
		}
	})
	t.Run("other writers are left to RBAC", func(t *testing.T) {
		if err := renew(ctx, adminClient, ns, "etcd-1", true); err != nil {
			t.Errorf("admin renewing etcd-1: %v", err)
		}
	})
}

// memberClient creates the member pod and returns a client holding a token bound to it, as the
// member-agent's in-cluster configuration does.
func memberClient(ctx context.Context, t *testing.T, admin *rest.Config, adminClient kubernetes.Interface, etcd *druidv1alpha1.Etcd, pod string) kubernetes.Interface {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: etcd.Namespace},
		Spec: corev1.PodSpec{
			ServiceAccountName: resources.ServiceAccountName(etcd),
			Containers:         []corev1.Container{{Name: resources.MemberAgentContainerName, Image: "conductor:test"}},
		},
	}
	created, err := adminClient.CoreV1().Pods(etcd.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: created.UID},
	}}
	tr, err = adminClient.CoreV1().ServiceAccounts(etcd.Namespace).CreateToken(ctx, resources.ServiceAccountName(etcd), tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token bound to %s: %v", pod, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return kubernetes.NewForConfigOrDie(cfg)
}

// renew sends the member-agent's Lease renewal: a merge patch of holderIdentity and renewTime.
// A leader claim is what a forging pod would write.
func renew(ctx context.Context, c kubernetes.Interface, namespace, lease string, leader bool) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{
		"holderIdentity": memberlease.HolderIdentity(0xabc, 0xdef, leader),
		"renewTime":      metav1.NewMicroTime(time.Now()),
	}})
	if err != nil {
		return err
	}
	_, err = c.CoordinationV1().Leases(namespace).Patch(ctx, lease, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching Lease %s: %w", lease, err)
	}
	return nil
}

// installLeasePolicy creates the chart's rendered policy and binding and returns the policy name.
func installLeasePolicy(ctx context.Context, t *testing.T, adminClient kubernetes.Interface) string {
	t.Helper()
	ms := splitManifests(t, render(t, nil, "--show-only", "templates/member-lease-policy.yaml"))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicy"), policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicyBinding"), binding)
	if _, err := adminClient.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the policy: %v", err)
	}
	if _, err := adminClient.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding: %v", err)
	}
	return policy.Name
}
