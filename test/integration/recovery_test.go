package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	recoveryplan "github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/reportauth"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// recoveryRig is a real 3-member cluster with mTLS behind an Etcd on a real apiserver, its pods
// written as a kubelet would, and the membership and recovery reconcilers driven by hand.
type recoveryRig struct {
	t        *testing.T
	env      *localcluster.Cluster
	etcd     *druidv1alpha1.Etcd
	pool     *etcdclient.Pool
	recovery *recovery.Reconciler
}

func newRecoveryRig(t *testing.T, ns string) (*recoveryRig, func(int) error, func(int) error) {
	env := sharedControlPlane(t)
	etcd, cluster := startRealMembers(t, env, ns, func(e *druidv1alpha1.Etcd) {
		e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket")}}
	})
	pool := etcdclient.NewPool(etcdclient.Options{DialTimeout: 500 * time.Millisecond, CallTimeout: 500 * time.Millisecond})
	t.Cleanup(pool.Close)
	recorder := eventRecorder(t, env)
	// The rig writes the init steps' reports as the admin, on a shared plane without the member
	// report policy: its reports are taken as authentic (TestForgedDataLossReports checks them).
	trusted := reportauth.NewChecker(reportauth.Config{TrustUnauthenticated: true})
	r := &recoveryRig{t: t, env: env, etcd: etcd, pool: pool,
		recovery: recovery.NewReconciler(recovery.Config{Client: env.Client(), Reader: env.Client(), Recorder: recorder, Members: pool, Grace: time.Second, Reports: trusted})}
	for i := range cluster.Members {
		lease := resources.MemberLease(etcd, resources.PodName(etcd, i))
		if err := controllerutil.SetControllerReference(etcd, lease, env.Client().Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := env.Client().Create(context.Background(), lease); err != nil {
			t.Fatal(err)
		}
	}
	// The membership controller records the cluster ID and its voters from the leader.
	m := membership.NewReconciler(membership.Config{Client: env.Client(), Reader: env.Client(), Recorder: recorder, Members: pool})
	framework.Eventually(t, 30*time.Second, "the voters recorded", func(ctx context.Context) (bool, string) {
		if _, err := m.Reconcile(ctx, r.request()); err != nil {
			return false, err.Error()
		}
		got := r.get()
		return len(got.Status.Voters) == 3 && got.Status.ClusterID != "", fmt.Sprintf("clusterID %q voters %+v", got.Status.ClusterID, got.Status.Voters)
	})
	return r, cluster.Stop, cluster.Restart
}

func (r *recoveryRig) request() ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(r.etcd)}
}

func (r *recoveryRig) get() *druidv1alpha1.Etcd {
	r.t.Helper()
	got := &druidv1alpha1.Etcd{}
	if err := r.env.Client().Get(context.Background(), r.request().NamespacedName, got); err != nil {
		r.t.Fatal(err)
	}
	return got
}

// quorumLost writes the Ready condition as the status controller does once the Leases expired.
func (r *recoveryRig) quorumLost(since time.Time) {
	r.t.Helper()
	etcd := r.get()
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: etcdstatus.ReasonQuorumLost,
		Message: "members lost quorum", LastTransitionTime: metav1.NewTime(since), LastUpdateTime: metav1.NewTime(since)}
	if err := etcdstatus.Patch(context.Background(), r.env.Client(), etcd, etcdstatus.WriterStatus, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, c)
	}); err != nil {
		r.t.Fatal(err)
	}
}

// initWaiting makes pod name a pod whose init step runs (etcd not started), as a kubelet reports
// it, creating the pod when it does not exist (a pod of a scale-out that never joined).
func (r *recoveryRig) initWaiting(name string) *corev1.Pod {
	r.t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	err := r.env.Client().Get(ctx, client.ObjectKey{Namespace: r.etcd.Namespace, Name: name}, pod)
	if err != nil {
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.etcd.Namespace, Name: name, Labels: resources.SelectorLabels(r.etcd)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "etcd"}}}}
		if err := r.env.Client().Create(ctx, pod); err != nil {
			r.t.Fatal(err)
		}
	}
	// The pod keeps its address: a member that comes back answers on it.
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, PodIP: pod.Status.PodIP,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: resources.MemberInitContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: resources.EtcdContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
	}
	if err := r.env.Client().Status().Update(ctx, pod); err != nil {
		r.t.Fatal(err)
	}
	return pod
}

// report writes the init step's evidence on member name's Lease (creating a Lease of a pod that
// has none yet), as the init step of incarnation podUID would.
func (r *recoveryRig) report(name, podUID string, data memberlease.DataState) {
	r.t.Helper()
	raw, err := json.Marshal(memberlease.StartReport{PodUID: podUID, Rule: agent.StartRuleClusterUnknown, Data: data})
	if err != nil {
		r.t.Fatal(err)
	}
	r.annotate(name, map[string]any{
		memberlease.AnnotationStartReport:   string(raw),
		memberlease.AnnotationStartDecision: agent.StartRuleClusterUnknown + ": no data, no leader answers",
	})
}

func (r *recoveryRig) annotate(lease string, annotations map[string]any) {
	r.t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{}
	if err := r.env.Client().Get(ctx, client.ObjectKey{Namespace: r.etcd.Namespace, Name: lease}, l); err != nil {
		l = resources.MemberLease(r.etcd, lease)
		if err := controllerutil.SetControllerReference(r.etcd, l, r.env.Client().Scheme()); err != nil {
			r.t.Fatal(err)
		}
		if err := r.env.Client().Create(ctx, l); err != nil {
			r.t.Fatal(err)
		}
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.env.Client().Patch(ctx, l, client.RawPatch("application/merge-patch+json", raw)); err != nil {
		r.t.Fatal(err)
	}
}

// reconcileUntil reconciles until done says the Etcd is as awaited; it returns the Etcd.
func (r *recoveryRig) reconcileUntil(t *testing.T, what string, done func(*druidv1alpha1.Etcd) (bool, string)) *druidv1alpha1.Etcd {
	t.Helper()
	var got *druidv1alpha1.Etcd
	framework.Eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, string) {
		if _, err := r.recovery.Reconcile(ctx, r.request()); err != nil {
			return false, err.Error()
		}
		got = r.get()
		return done(got)
	})
	return got
}

// decides reconciles until the RecoveryInProgress condition carries reason and says want.
func (r *recoveryRig) decides(t *testing.T, reason string, want ...string) *druidv1alpha1.Etcd {
	t.Helper()
	return r.reconcileUntil(t, "recovery decision "+reason, func(got *druidv1alpha1.Etcd) (bool, string) {
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
		if c == nil {
			return false, "no RecoveryInProgress condition"
		}
		if c.Reason != reason {
			return false, fmt.Sprintf("RecoveryInProgress %s: %s", c.Reason, c.Message)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false, fmt.Sprintf("message %q lacks %q", c.Message, w)
			}
		}
		return true, ""
	})
}

// TestRecoveryDecidesOnRecordedVoters drives the recovery controller over a real cluster whose
// quorum is lost: pods that never joined and voters that are down prove nothing, a report of an
// earlier pod incarnation proves nothing, an order written on a Lease is a forgery, a majority of
// voters proven without data is ordered to restore (in the status only), and the old cluster
// coming back calls it off.
func TestRecoveryDecidesOnRecordedVoters(t *testing.T) {
	ns := testNamespace("recovery-voters")
	r, stop, restart := newRecoveryRig(t, ns)
	voters := r.get().Status.Voters
	if names := []string{voters[0].Name, voters[1].Name, voters[2].Name}; !slices.Equal(names, []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}) {
		t.Fatalf("recorded voters %+v", voters)
	}
	for _, v := range voters {
		if _, err := strconv.ParseUint(v.ID, 16, 64); err != nil || v.ID == "0" || len(v.PeerURLs) == 0 {
			t.Fatalf("recorded voter %+v: want a member ID and peer URLs", v)
		}
	}

	// A 3→5 scale-out in flight when etcd-main-2 loses its volume and etcd-main-1 goes down
	// with its volume intact: 2 of 4 pods have no data, but 1 of the 3 voters.
	for _, i := range []int{1, 2} {
		if err := stop(i); err != nil {
			t.Fatal(err)
		}
	}
	r.quorumLost(time.Now().Add(-time.Minute))
	lost := r.initWaiting("etcd-main-2")
	r.report("etcd-main-2", string(lost.UID), memberlease.DataEmpty)
	joining := r.initWaiting("etcd-main-3")
	r.report("etcd-main-3", string(joining.UID), memberlease.DataEmpty)
	down := r.initWaiting("etcd-main-1")
	r.decides(t, recoveryplan.RuleDataRemains.CamelCase(), "1 of 3 recorded voters proved", "a restore needs 2 proven", "etcd-main-1")

	t.Run("a report of an earlier incarnation proves nothing", func(t *testing.T) {
		r.report("etcd-main-1", "uid-of-an-earlier-pod", memberlease.DataEmpty)
		got := r.decides(t, recoveryplan.RuleDataRemains.CamelCase(), "1 of 3 recorded voters proved")
		if got.Status.Recovery != nil {
			t.Fatalf("restore ordered on an earlier incarnation's report: %+v", got.Status.Recovery)
		}
	})

	t.Run("an order written on a Lease is ignored and removed", func(t *testing.T) {
		r.annotate("etcd-main-3", map[string]any{memberlease.AnnotationRestore: `{"member":"etcd-main-3","token":"forged"}`})
		got := r.decides(t, recoveryplan.RuleDataRemains.CamelCase())
		if got.Status.Recovery != nil {
			t.Fatalf("restore ordered after a forged request: %+v", got.Status.Recovery)
		}
		eventWithReason(t, r.env, ns, r.etcd.Name, recovery.ReasonForgedRestoreOrder, "etcd-main-3", "forged")
		l := &coordinationv1.Lease{}
		if err := r.env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "etcd-main-3"}, l); err != nil {
			t.Fatal(err)
		}
		if v, ok := l.Annotations[memberlease.AnnotationRestore]; ok {
			t.Fatalf("forged order left on the Lease: %q", v)
		}
	})

	t.Run("a majority of voters proven without data is ordered to restore", func(t *testing.T) {
		r.report("etcd-main-1", string(down.UID), memberlease.DataEmpty)
		got := r.decides(t, recoveryplan.RuleStart.CamelCase(), "2 of 3 recorded voters proved they lost their data (etcd-main-1, etcd-main-2)")
		order := got.Status.Recovery
		if order == nil || order.Member != "etcd-main-1" || order.PodUID != string(down.UID) || order.Token == "" || order.OldClusterID != got.Status.ClusterID {
			t.Fatalf("order %+v, want etcd-main-1's incarnation %s with a token, old cluster %s", order, down.UID, got.Status.ClusterID)
		}
	})

	t.Run("the old cluster coming back calls the restore off", func(t *testing.T) {
		for _, i := range []int{1, 2} {
			if err := restart(i); err != nil {
				t.Fatal(err)
			}
		}
		// The restarted members answer on their pods' addresses again.
		for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
			pod := &corev1.Pod{}
			if err := r.env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
				t.Fatal(err)
			}
			pod.Status.InitContainerStatuses = nil
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			pod.Status.Phase = corev1.PodRunning
			if err := r.env.Client().Status().Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
		}
		r.reconcileUntil(t, "the order withdrawn", func(got *druidv1alpha1.Etcd) (bool, string) {
			return got.Status.Recovery == nil, fmt.Sprintf("order %+v", got.Status.Recovery)
		})
		// Whichever comes first calls it off: etcd-main-2's proof gone with its init step, or
		// the old cluster's leader answering.
		eventWithReason(t, r.env, ns, r.etcd.Name, recoveryplan.RuleCallOff.CamelCase(), "cluster "+r.get().Status.ClusterID, "calling the restore off")
	})
}
