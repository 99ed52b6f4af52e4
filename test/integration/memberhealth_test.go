package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	membershipcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestStuckMemberRestart runs the membership controller against a real kube-apiserver and three
// real etcd members with mTLS (DEP-01 operator scenario 9). etcd-main-0 leads; etcd-main-2 is cut
// off from it on the peer network (the leader does not hear it). The members' status, which the
// status controller would write, is set by the test; the NotReady grace is 2 s.
//   - etcd-main-1 NotReady past the grace: the leader hears it, and without it would hear 1 of 3
//     voters, fewer than a quorum: its pod stays (WaitRestartQuorum, with the numbers);
//   - etcd-main-1 and etcd-main-2 NotReady: no minority, nothing deleted (WaitMajorityNotReady);
//   - etcd-main-2 alone NotReady: its pod is deleted (RestartNonParticipating, an Event), and
//     the cluster keeps its quorum.
func TestStuckMemberRestart(t *testing.T) {
	env := sharedControlPlane(t)
	etcd, cluster := startRealMembers(t, env, testNamespace("member-restart"), func(*druidv1alpha1.Etcd) {})
	pool := etcdclient.NewPool(etcdclient.Options{})
	t.Cleanup(pool.Close)
	ctx := context.Background()
	leadOn(t, pool, cluster, "etcd-main-0")
	heal, err := cluster.Mute(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = heal() })

	events := record.NewFakeRecorder(1000)
	rec := membershipReconciler(env, cluster, pool, events, func(c *membershipcontroller.Config) { c.NotReadyGrace = 2 * time.Second })
	key := client.ObjectKeyFromObject(etcd)
	// setNotReady writes status.members as the status controller would: the named members
	// NotReady for an hour, the others Ready.
	setNotReady := func(names ...string) {
		t.Helper()
		framework.Eventually(t, timeout, "status members written", func(ctx context.Context) (bool, string) {
			got := &druidv1alpha1.Etcd{}
			if err := env.Client().Get(ctx, key, got); err != nil {
				return false, err.Error()
			}
			got.Status.Members = nil
			for i := range 3 {
				name := fmt.Sprintf("etcd-main-%d", i)
				m := druidv1alpha1.EtcdMemberStatus{Name: name, Status: druidv1alpha1.EtcdMemberStatusReady, Reason: "LeaseSucceeded",
					LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}
				for _, n := range names {
					if n == name {
						m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, "UnknownGracePeriodExceeded"
					}
				}
				got.Status.Members = append(got.Status.Members, m)
			}
			if err := env.Client().Status().Update(ctx, got); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	}
	restartCondition := func() *druidv1alpha1.Condition {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeMemberRestart)
	}
	podExists := func(name string) bool {
		err := env.Client().Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: name}, &corev1.Pod{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// Until the pods are older than the grace, nothing is deleted.
	time.Sleep(3 * time.Second)
	waitFor := func(what string, rule memberhealth.RuleID) *druidv1alpha1.Condition {
		t.Helper()
		framework.Eventually(t, timeout, what, func(ctx context.Context) (bool, string) {
			if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				return false, err.Error()
			}
			c := restartCondition()
			return c != nil && c.Reason == rule.CamelCase(), fmt.Sprintf("%+v", c)
		})
		return restartCondition()
	}

	setNotReady("etcd-main-1")
	c := waitFor("the heard member's pod kept: the leader would hear no quorum without it", memberhealth.RuleRestartUnsafe)
	if !strings.Contains(c.Message, "the leader hears every stuck member and 2 of 3 voters; without one it would hear 1, fewer than a quorum of 2") ||
		c.Status != druidv1alpha1.ConditionTrue {
		t.Errorf("MemberRestart %s: %q", c.Status, c.Message)
	}
	setNotReady("etcd-main-1", "etcd-main-2")
	c = waitFor("two NotReady of three: nothing deleted", memberhealth.RuleMajorityNotReady)
	if !strings.Contains(c.Message, "2 NotReady members of 3 are no minority") {
		t.Errorf("MemberRestart message %q", c.Message)
	}
	for _, name := range []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"} {
		if !podExists(name) {
			t.Fatalf("pod %s deleted while deleting it was unsafe", name)
		}
	}

	setNotReady("etcd-main-2")
	c = waitFor("the pod of etcd-main-2, which the leader does not hear, deleted", memberhealth.RuleRestartNonVoting)
	if !strings.Contains(c.Message, "deleting pod etcd-main-2 so it restarts") || !strings.Contains(c.Message, "the leader hears 2 of 3 voters (a quorum is 2)") {
		t.Errorf("MemberRestart message %q", c.Message)
	}
	if podExists("etcd-main-2") {
		t.Errorf("pod etcd-main-2 still there")
	}
	if !podExists("etcd-main-1") || !podExists("etcd-main-0") {
		t.Errorf("another pod than etcd-main-2 deleted")
	}
	var deleted []string
	for _, e := range drainEvents(events) {
		if strings.Contains(e, memberhealth.RuleRestartNonVoting.CamelCase()) {
			deleted = append(deleted, e)
		}
	}
	if len(deleted) != 1 {
		t.Errorf("restart Events %v, want one", deleted)
	}
	if served, err := pool.LinearizableReads(ctx, "check", cluster.Client, cluster.Targets(), []string{"etcd-main-0"}); len(served) != 1 {
		t.Fatalf("etcd-main-0 serves no linearizable read after the restart: %v", err)
	}
}
