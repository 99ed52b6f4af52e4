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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore/seedtest"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestPlantedSeedIsNotPromoted runs the membership controller against a real kube-apiserver and
// real mTLS members: a scale-out 3→5 whose first learner was seeded from a full snapshot planted in the
// bucket (one value differs from the leader's; its origin and raft position are the cluster's).
// Its pod reports on its Lease that it was seeded. The controller compares its keyspace with the
// leader's, never promotes it, removes it (a Warning naming the rule) and deletes its pod so that
// its init step moves the data aside; the three voters keep their quorum throughout.
func TestPlantedSeedIsNotPromoted(t *testing.T) {
	env := sharedControlPlane(t)
	etcd, cluster := startRealMembers(t, env, testNamespace("seed-planted"), func(*druidv1alpha1.Etcd) {})
	pool := etcdclient.NewPool(etcdclient.Options{CallTimeout: 30 * time.Second})
	t.Cleanup(pool.Close)
	ctx := context.Background()
	cs, err := pool.Query(ctx, "check", cluster.Client, cluster.Targets())
	if err != nil {
		t.Fatal(err)
	}
	leader, ok := cs.Leader()
	if !ok {
		t.Fatal("no leader")
	}
	leaderIndex := 0
	for i, s := range cs.Members {
		if s.Name == leader.Name {
			leaderIndex = i
		}
	}
	lc, err := pool.Member("check", cluster.Client, cluster.Targets(), leader.Name)
	if err != nil {
		t.Fatal(err)
	}
	follower, err := cluster.MemberConn((leaderIndex+1)%3, etcdclient.Options{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	id := seedtest.Join(t, cluster, leaderIndex, lc, follower, leader.ClusterID, true)

	// The Etcd asks for five; the StatefulSet has the learner's pod, which reports its seed.
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Replicas = 5
	if err := env.Client().Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	sts, err := getStatefulSet(ctx, env.Client(), etcd.Namespace, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	stsPatch := client.MergeFrom(sts.DeepCopy())
	sts.Spec.Replicas = ptr.To[int32](4)
	if err := env.Client().Patch(ctx, sts, stsPatch); err != nil {
		t.Fatal(err)
	}
	sts.Status = appsv1.StatefulSetStatus{Replicas: 4, ReadyReplicas: 3, CurrentRevision: "rev-1", UpdateRevision: "rev-1"}
	if err := env.Client().Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	labels := resources.SelectorLabels(etcd)
	labels[appsv1.StatefulSetRevisionLabel] = "rev-1"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: resources.PodName(etcd, 3), Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "etcd"}}},
	}
	if err := controllerutil.SetControllerReference(sts, pod, env.Client().Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client().Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: cluster.Members[3].IP,
		ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	if err := env.Client().Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	report := memberlease.StartReport{PodUID: string(pod.UID), Rule: "join/listed", Data: memberlease.DataEmpty, Seeded: true}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: resources.MemberNameOf(etcd, pod.Name), Labels: resources.SelectorLabels(etcd),
		Annotations: map[string]string{memberlease.AnnotationStartReport: report.Annotation()}}}
	if err := env.Client().Create(ctx, lease); err != nil {
		t.Fatal(err)
	}

	events := record.NewFakeRecorder(1000)
	rec := membershipReconciler(env, cluster, pool, events, nil)
	var seen []string
	framework.Eventually(t, 2*timeout, "the seeded learner removed and its pod deleted", func(ctx context.Context) (bool, string) {
		if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}); err != nil {
			return false, err.Error()
		}
		seen = append(seen, drainEvents(events)...)
		for _, e := range seen {
			if strings.Contains(e, membership.RulePromote.CamelCase()) {
				t.Fatalf("promoted the learner seeded from a planted snapshot: %s", e)
			}
		}
		cs, err := pool.Query(ctx, "check", cluster.Client, cluster.Targets()[:3])
		if err != nil {
			return false, err.Error()
		}
		for _, m := range cs.MemberList {
			if m.ID == id {
				return false, fmt.Sprintf("the learner is still a member (learner %v); %s", m.IsLearner, scaleCondition(t, env, etcd).Message)
			}
		}
		err = env.Client().Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, &corev1.Pod{})
		return apierrors.IsNotFound(err), fmt.Sprintf("its pod: %v", err)
	})
	warned := false
	for _, e := range seen {
		if strings.HasPrefix(e, corev1.EventTypeWarning+" "+membership.RuleSeedMismatch.CamelCase()) {
			warned = true
			t.Logf("%s", e)
		}
	}
	if !warned {
		t.Errorf("no Warning %s among the Events: %v", membership.RuleSeedMismatch.CamelCase(), seen)
	}
	if v := voters(t, pool, cluster); len(v) != 3 {
		t.Errorf("voters %v, want the three", v)
	}
	if served, err := pool.LinearizableReads(ctx, "check", cluster.Client, cluster.Targets()[:3], []string{leader.Name}); len(served) != 1 {
		t.Errorf("%s serves no linearizable read: %v", leader.Name, err)
	}
}
