package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	recoveryplan "github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/reportauth"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// TestForgedDataLossReports: the proof a restore is ordered on, "data empty" start reports from
// the current pods of a majority of the recorded voters, is written on member Leases, which the
// member pods' shared ServiceAccount may patch and, once etcd-druid's
// disable-etcd-component-protection is set, any namespace user RBAC lets update Leases. With
// the chart's member report policy installed (and not the member Lease policy), a namespace user
// and a member pod writing for a sibling are refused, and nothing is restored; with the policy's
// binding gone, reports get through but prove nothing (the operator checks the policy is in
// force); the genuine reports, each written by its own pod's bound identity, order the restore.
// Three voters, quorum lost, every voter's pod in its init step: no etcd runs.
func TestForgedDataLossReports(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true, NoControllerManager: true})
	ctx := context.Background()
	c := env.Client()
	admin := env.RESTConfig()
	helmHome := t.TempDir()
	if err := stack.InstallMemberReportPolicy(ctx, env.Clientset(), helmHome); err != nil {
		t.Fatal(err)
	}
	if err := stack.InstallChartPolicy(ctx, env.Clientset(), helmHome, stack.ComponentProtectionPolicyTemplate, protectionRelease, protectionOperatorNS); err != nil {
		t.Fatal(err)
	}

	const ns = "forged-reports"
	if _, err := framework.CreateNamespace(ctx, c, ns, nil); err != nil {
		t.Fatal(err)
	}
	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket")}}
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	// What the Etcd reconciler made: the member identity, its Role, the StatefulSet, the member
	// Leases (marked unprotected, as with druid's disable-etcd-component-protection on the Etcd).
	for _, obj := range []client.Object{resources.ServiceAccount(etcd), resources.MemberAgentRole(etcd), resources.MemberAgentRoleBinding(etcd)} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllerutil.SetControllerReference(etcd, sts, c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	var voters []druidv1alpha1.RecordedVoter
	pods := map[string]*corev1.Pod{}
	for i := range 3 {
		name := resources.PodName(etcd, i)
		lease := resources.MemberLease(etcd, name)
		lease.Annotations = map[string]string{resources.AnnotationProtection: resources.ProtectionDisabledValue}
		if err := controllerutil.SetControllerReference(etcd, lease, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: resources.SelectorLabels(etcd)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "etcd"}}}}
		if err := controllerutil.SetControllerReference(sts, pod, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: resources.MemberInitContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pods[name] = pod
		voters = append(voters, druidv1alpha1.RecordedVoter{Name: name, ID: fmt.Sprintf("%x", 0x100+i)})
	}
	since := metav1.NewTime(time.Now().Add(-time.Minute))
	if err := etcdstatus.Patch(ctx, c, etcd, etcdstatus.WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.ClusterID, s.Voters = "c1", voters
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), etcd); err != nil {
		t.Fatal(err)
	}
	if err := etcdstatus.Patch(ctx, c, etcd, etcdstatus.WriterStatus, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady,
			Status: druidv1alpha1.ConditionFalse, Reason: etcdstatus.ReasonQuorumLost, Message: "members lost quorum", LastTransitionTime: since, LastUpdateTime: since})
	}); err != nil {
		t.Fatal(err)
	}

	pool := etcdclient.NewPool(etcdclient.Options{DialTimeout: 200 * time.Millisecond, CallTimeout: 200 * time.Millisecond})
	t.Cleanup(pool.Close)
	r := recovery.NewReconciler(recovery.Config{Client: c, Reader: c, Recorder: eventRecorder(t, env), Members: pool, Grace: time.Second,
		Reports: reportauth.NewChecker(reportauth.Config{Reader: c, AdmissionPolicy: framework.StackMemberReportPolicy, CheckInterval: 100 * time.Millisecond})})
	decides := func(t *testing.T, rule recoveryplan.RuleID, want ...string) *druidv1alpha1.Etcd {
		t.Helper()
		var got *druidv1alpha1.Etcd
		framework.Eventually(t, 20*time.Second, "recovery decision "+string(rule), func(ctx context.Context) (bool, string) {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}); err != nil {
				return false, err.Error()
			}
			got = &druidv1alpha1.Etcd{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
				return false, err.Error()
			}
			cond := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
			if cond == nil || cond.Reason != rule.CamelCase() {
				return false, fmt.Sprintf("RecoveryInProgress %+v", cond)
			}
			for _, w := range want {
				if !strings.Contains(cond.Message, w) {
					return false, fmt.Sprintf("message %q lacks %q", cond.Message, w)
				}
			}
			return true, ""
		})
		return got
	}
	noOrder := func(t *testing.T, got *druidv1alpha1.Etcd) {
		t.Helper()
		if got.Status.Recovery != nil {
			t.Fatalf("restore ordered on forged reports: %+v", got.Status.Recovery)
		}
	}

	// Whoever writes: a namespace user who may write Leases, and each member pod as its bound
	// token shows it (pod name and UID claims).
	const user = "namespace-user"
	grant(ctx, t, c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lease-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "patch", "update", "create", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lease-writer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lease-writer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	asUser := impersonating(t, admin, rest.ImpersonationConfig{UserName: user})
	asPod := func(name string) kubernetes.Interface {
		return impersonating(t, admin, rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + ns + ":" + resources.ServiceAccountName(etcd),
			Extra: map[string][]string{
				"authentication.kubernetes.io/pod-name": {name},
				"authentication.kubernetes.io/pod-uid":  {string(pods[name].UID)},
			}})
	}
	// report writes onto lease's Lease what the init step of pod reporter would write, as who.
	report := func(who kubernetes.Interface, lease, reporter string, dryRun bool) error {
		r := memberlease.StartReport{PodUID: string(pods[reporter].UID), Rule: agent.StartRuleClusterUnknown, Data: memberlease.DataEmpty}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, memberlease.AnnotationStartReport, r.Annotation(),
			memberlease.AnnotationStartDecision, agent.StartRuleClusterUnknown+": no data, no leader answers")
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := who.CoordinationV1().Leases(ns).Patch(ctx, lease, types.MergePatchType, []byte(patch), opts)
		return err
	}
	refused := func(t *testing.T, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may report what the member found") {
			t.Fatalf("err = %v, want Forbidden by the member report policy", err)
		}
		t.Log(err)
	}
	// The apiserver loads a new policy asynchronously: a dry run is admitted like the real thing.
	framework.Eventually(t, 20*time.Second, "the member report policy in force", func(context.Context) (bool, string) {
		err := report(asUser, "etcd-main-1", "etcd-main-1", true)
		return apierrors.IsForbidden(err), fmt.Sprintf("dry-run forged report: %v", err)
	})
	decides(t, recoveryplan.RuleDataRemains, "0 of 3 recorded voters proved")

	t.Run("a namespace user with Lease write access, protection disabled, cannot forge a majority's reports", func(t *testing.T) {
		// Protection disabled lets the user change the Lease otherwise.
		if _, err := asUser.CoordinationV1().Leases(ns).Patch(ctx, "etcd-main-1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"repaired by hand"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("a user's edit of an unprotected Lease: %v", err)
		}
		for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
			refused(t, report(asUser, name, name, false))
		}
		// Nor by deleting the Lease and creating it anew with the reports.
		if err := asUser.CoordinationV1().Leases(ns).Delete(ctx, "etcd-main-2", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting an unprotected Lease: %v", err)
		}
		forged := resources.MemberLease(etcd, "etcd-main-2")
		if err := controllerutil.SetControllerReference(etcd, forged, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		forged.Annotations = map[string]string{memberlease.AnnotationStartReport: memberlease.StartReport{PodUID: string(pods["etcd-main-2"].UID), Data: memberlease.DataEmpty}.Annotation()}
		_, err := asUser.CoordinationV1().Leases(ns).Create(ctx, forged, metav1.CreateOptions{})
		refused(t, err)
		// The operator creates it again, empty.
		forged.Annotations = map[string]string{resources.AnnotationProtection: resources.ProtectionDisabledValue}
		if err := c.Create(ctx, forged); err != nil {
			t.Fatal(err)
		}
		noOrder(t, decides(t, recoveryplan.RuleDataRemains, "0 of 3 recorded voters proved"))
	})

	t.Run("a member pod cannot write a sibling's report, nor one naming another pod", func(t *testing.T) {
		refused(t, report(asPod("etcd-main-0"), "etcd-main-1", "etcd-main-1", false))
		refused(t, report(asPod("etcd-main-1"), "etcd-main-1", "etcd-main-2", false))
		noOrder(t, decides(t, recoveryplan.RuleDataRemains, "0 of 3 recorded voters proved"))
	})

	t.Run("only a Lease's own member pods and the operator say who holds it", func(t *testing.T) {
		// holderIdentity and renewTime say which member a pod runs, of which cluster, whether it
		// leads and answers; the rollout orders pods by them, the cluster ID is recorded from them.
		holderRefused := func(t *testing.T, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may say which member holds it") {
				t.Fatalf("err = %v, want Forbidden by the member report policy", err)
			}
			t.Log(err)
		}
		renew := func(who kubernetes.Interface, lease, holder string) error {
			patch := fmt.Sprintf(`{"spec":{"holderIdentity":%q,"renewTime":%q}}`, holder, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
			_, err := who.CoordinationV1().Leases(ns).Patch(ctx, lease, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
		leader := memberlease.HolderIdentity(0x101, 0xc1, true)
		holderRefused(t, renew(asUser, "etcd-main-1", leader))
		holderRefused(t, renew(asPod("etcd-main-0"), "etcd-main-1", leader))
		if err := renew(asPod("etcd-main-1"), "etcd-main-1", leader); err != nil {
			t.Fatalf("etcd-main-1 renewing its own Lease: %v", err)
		}
		// Only the renewal is guarded: a user may still annotate an unprotected Lease.
		if _, err := asUser.CoordinationV1().Leases(ns).Patch(ctx, "etcd-main-1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"looked at"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("a user's note on an unprotected Lease: %v", err)
		}

		// A snapshot Lease is renewed by whichever member leads: any member pod, nobody else.
		snap := resources.SnapshotLease(etcd, memberlease.FullSnapshotLeaseName(etcd))
		// Unprotected as the member Leases are: what refuses the user is the report policy alone.
		snap.Annotations = map[string]string{resources.AnnotationProtection: resources.ProtectionDisabledValue}
		if err := controllerutil.SetControllerReference(etcd, snap, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, snap); err != nil {
			t.Fatal(err)
		}
		holderRefused(t, renew(asUser, snap.Name, "999999"))
		if err := renew(asPod("etcd-main-2"), snap.Name, "1200"); err != nil {
			t.Fatalf("a member pod recording a full snapshot: %v", err)
		}

		// Nor by creating an Etcd's Lease that already says who holds it, or labelling one into it.
		forged := resources.MemberLease(etcd, resources.PodName(etcd, 3))
		forged.Spec.HolderIdentity = &leader
		_, err := asUser.CoordinationV1().Leases(ns).Create(ctx, forged, metav1.CreateOptions{})
		holderRefused(t, err)
		plain := forged.DeepCopy()
		plain.Labels = nil
		if _, err := asUser.CoordinationV1().Leases(ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a Lease of the user's own: %v", err)
		}
		relabel, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": forged.Labels}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = asUser.CoordinationV1().Leases(ns).Patch(ctx, plain.Name, types.MergePatchType, relabel, metav1.PatchOptions{})
		holderRefused(t, err)
	})

	binding, err := env.Clientset().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, framework.StackMemberReportPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("without the policy's binding, reports get through but prove nothing", func(t *testing.T) {
		if err := env.Clientset().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 20*time.Second, "the member report policy no longer in force", func(context.Context) (bool, string) {
			err := report(asUser, "etcd-main-1", "etcd-main-1", true)
			return err == nil, fmt.Sprintf("dry-run forged report: %v", err)
		})
		for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
			if err := report(asUser, name, name, false); err != nil {
				t.Fatal(err)
			}
		}
		noOrder(t, decides(t, recoveryplan.RuleProofUnauthenticated, "2 of 3 recorded voters proved",
			"ValidatingAdmissionPolicyBinding "+framework.StackMemberReportPolicy+" is not installed"))
	})

	t.Run("genuine reports from each member's own pod order the restore", func(t *testing.T) {
		// The forged reports go before the policy is back (the operator would not remove them:
		// this is the test's own clean-up).
		for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null}}}`, memberlease.AnnotationStartReport, memberlease.AnnotationStartDecision)
			if _, err := env.Clientset().CoordinationV1().Leases(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		binding.ResourceVersion = ""
		if _, err := env.Clientset().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 20*time.Second, "the member report policy in force again", func(context.Context) (bool, string) {
			err := report(asUser, "etcd-main-1", "etcd-main-1", true)
			return apierrors.IsForbidden(err), fmt.Sprintf("dry-run forged report: %v", err)
		})
		for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
			if err := report(asPod(name), name, name, false); err != nil {
				t.Fatalf("%s reporting its own lost data: %v", name, err)
			}
		}
		got := decides(t, recoveryplan.RuleStart, "2 of 3 recorded voters proved they lost their data (etcd-main-1, etcd-main-2)")
		if o := got.Status.Recovery; o == nil || o.Member != "etcd-main-1" || o.PodUID != string(pods["etcd-main-1"].UID) {
			t.Fatalf("order %+v, want etcd-main-1's pod %s", o, pods["etcd-main-1"].UID)
		}
	})
}
