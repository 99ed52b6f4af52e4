package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	membershipcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// TestScaleInWaitsUntilTheLeaderHearsAQuorum runs the membership controller against a real
// kube-apiserver and five real etcd members with mTLS, started as the operator's pods run them:
// strict-reconfig-check off, so etcd itself refuses no removal. Leadership is on etcd-main-0, and
// two other kept members, etcd-main-1 and etcd-main-2, are cut off from it on the peer network
// (muted: they still answer the operator over their client port and hear the leader, the leader
// does not hear them). With spec.replicas lowered to 3 the planner wants etcd-main-4 gone, but
// that would leave the leader hearing 2 of the 4 voters left, quorum 3: the controller waits,
// says so with the numbers in the ScaleOperationInProgress condition, removes nothing, and the
// cluster keeps its quorum. Once healed, it removes etcd-main-4 and etcd-main-3 and shrinks the
// StatefulSet to 3.
func TestScaleInWaitsUntilTheLeaderHearsAQuorum(t *testing.T) {
	env := sharedControlPlane(t)
	// The members inherit the environment: as the member ConfigMap sets it.
	t.Setenv("ETCD_STRICT_RECONFIG_CHECK", "false")
	etcd, cluster := startRealMembers(t, env, testNamespace("scale-in-heard"), func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = 5 })
	pool := etcdclient.NewPool(etcdclient.Options{})
	t.Cleanup(pool.Close)
	ctx := context.Background()
	leader := "etcd-main-0"
	leadOn(t, pool, cluster, leader)
	var heals []func() error
	for _, i := range []int{1, 2} {
		heal, err := cluster.Mute(i)
		if err != nil {
			t.Fatal(err)
		}
		heals = append(heals, heal)
	}

	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Replicas = 3
	if err := env.Client().Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(1000)
	rec := membershipReconciler(env, cluster, pool, events, nil)
	reconcile := func() error {
		_, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)})
		return err
	}
	var removals []string
	removed := func() []string {
		for _, e := range drainEvents(events) {
			if strings.Contains(e, membership.RuleRemove.CamelCase()) {
				removals = append(removals, e)
			}
		}
		return removals
	}

	framework.Eventually(t, timeout, "the controller waiting for a quorum the leader hears", func(context.Context) (bool, string) {
		if err := reconcile(); err != nil {
			return false, err.Error()
		}
		if got := removed(); len(got) > 0 {
			t.Fatalf("removed a member while %s and %s were cut off from the leader: %v", cluster.Members[1].Name, cluster.Members[2].Name, got)
		}
		c := scaleCondition(t, env, etcd)
		return c != nil && c.Reason == membership.RuleRemoveUnsafe.CamelCase(), fmt.Sprintf("%+v", c)
	})
	c := scaleCondition(t, env, etcd)
	for _, want := range []string{"not removing etcd-main-4 (", "(beyond the desired 3 members): 2 of 4 remaining voters heard by the leader, quorum 3",
		"3/5 voters heard by the leader (quorum 3), 5/5 answered", "[membership/wait/remove-quorum]"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	}
	if c.Status != druidv1alpha1.ConditionTrue {
		t.Errorf("ScaleOperationInProgress %s while the scale-in waits, want True", c.Status)
	}
	for range 2 {
		if err := reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	if got := removed(); len(got) > 0 {
		t.Fatalf("removed a member while two were cut off from the leader: %v", got)
	}
	if v := voters(t, pool, cluster); len(v) != 5 {
		t.Fatalf("voters %v, want all 5 while two are cut off", v)
	}
	// The cluster kept its quorum: the leader still serves a linearizable read.
	if served, err := pool.LinearizableReads(ctx, "check", cluster.Client, cluster.Targets(), []string{leader}); len(served) != 1 {
		t.Fatalf("%s serves no linearizable read: %v", leader, err)
	}

	for _, heal := range heals {
		if err := heal(); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "etcd-main-4 and etcd-main-3 removed, the StatefulSet at 3", func(ctx context.Context) (bool, string) {
		if err := reconcile(); err != nil {
			return false, err.Error()
		}
		sts, err := getStatefulSet(ctx, env.Client(), etcd.Namespace, etcd.Name)
		if err != nil {
			return false, err.Error()
		}
		v := voters(t, pool, cluster)
		return slices.Equal(v, []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}) && *sts.Spec.Replicas == 3,
			fmt.Sprintf("voters %v, StatefulSet replicas %d; %s", v, *sts.Spec.Replicas, scaleCondition(t, env, etcd).Message)
	})
	if got := removed(); len(got) != 2 || !strings.Contains(got[0], "removing etcd-main-4") || !strings.Contains(got[1], "removing etcd-main-3") {
		t.Errorf("removals %v, want etcd-main-4 then etcd-main-3", got)
	}
}

// membershipReconciler is the membership controller on env, reaching the real members of cluster
// through pool with their client key pair, recording Events to events; adjust, when set, changes
// its configuration first.
func membershipReconciler(env *localcluster.Cluster, cluster *etcdtest.Cluster, pool *etcdclient.Pool, events record.EventRecorder,
	adjust func(*membershipcontroller.Config)) *membershipcontroller.Reconciler {
	cfg := membershipcontroller.Config{
		Client: env.Client(), Reader: env.Client(), Recorder: events, Members: pool,
		Access: memberaccess.New(memberaccess.Config{Reader: env.Client(),
			DefaultClientTLS: func() (conductortls.ClientMaterial, error) { return cluster.Client, nil }}),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	return membershipcontroller.NewReconciler(cfg)
}

// leadOn moves leadership to member name, and waits until it leads.
func leadOn(t *testing.T, pool *etcdclient.Pool, cluster *etcdtest.Cluster, name string) {
	t.Helper()
	framework.Eventually(t, timeout, name+" leading", func(ctx context.Context) (bool, string) {
		cs, err := pool.Query(ctx, "check", cluster.Client, cluster.Targets())
		if err != nil {
			return false, err.Error()
		}
		leader, ok := cs.Leader()
		if !ok {
			return false, "no leader"
		}
		if leader.Name == name {
			return true, ""
		}
		i := slices.IndexFunc(cs.Members, func(s etcdclient.MemberStatus) bool { return s.Name == name })
		if err := pool.MoveLeader(ctx, "check", cluster.Client, cluster.Targets(), leader.Name, cs.Members[i].ID); err != nil {
			return false, err.Error()
		}
		return false, "leadership moved from " + leader.Name
	})
}

// voters are the names of the voting members, as a member that answers lists them (the leader
// when it answers), sorted.
func voters(t *testing.T, pool *etcdclient.Pool, cluster *etcdtest.Cluster) []string {
	t.Helper()
	cs, err := pool.Query(context.Background(), "check", cluster.Client, cluster.Targets())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range cs.MemberList {
		if !m.IsLearner {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// scaleCondition is the Etcd's ScaleOperationInProgress condition as the apiserver holds it.
func scaleCondition(t *testing.T, env *localcluster.Cluster, etcd *druidv1alpha1.Etcd) *druidv1alpha1.Condition {
	t.Helper()
	got := &druidv1alpha1.Etcd{}
	if err := env.Client().Get(context.Background(), client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	return druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress)
}
