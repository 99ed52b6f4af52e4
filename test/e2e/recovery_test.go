package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	recoverycontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
)

// The scenarios below must NOT restore: a restore while a majority of the recorded voters may
// hold their data rolls the cluster back and loses acknowledged writes. Each is backed up (a
// restore is possible), loses quorum past the recovery grace, then heals; runScale then checks
// that no acknowledged write is lost and that the history the instruments recorded is
// linearizable, and noRestoreFor that the cluster ID never changed.

// noRestoreHold is how long a scenario holds the fault once the Etcd says quorum is lost: the
// recovery controller's grace, which counts from then, and a few of its steps more.
const noRestoreHold = recoverycontroller.DefaultGrace + 15*time.Second

// noRestoreFor watches the Etcd while the fault holds, from the fault until noRestoreHold after
// the Ready condition turned QuorumLost: no restore is ordered and the cluster ID stays, and in
// the end the recovery controller says it waits for the voters awaited.
func noRestoreFor(ctx context.Context, e *env, awaited ...string) {
	e.t.Helper()
	before, err := e.cluster.Get(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(before.Status.Voters) == 0 || before.Status.ClusterID == "" {
		e.t.Fatalf("voters %+v, cluster ID %q: nothing recorded before the fault", before.Status.Voters, before.Status.ClusterID)
	}
	var deadline time.Time
	for deadline.IsZero() || time.Now().Before(deadline) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if etcd.Status.Recovery != nil || etcd.Status.ClusterID != before.Status.ClusterID {
			e.t.Fatalf("restore ordered while voters may hold their data: order %+v, cluster ID %s (was %s)",
				etcd.Status.Recovery, etcd.Status.ClusterID, before.Status.ClusterID)
		}
		if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); deadline.IsZero() && c != nil && c.Reason == etcdstatus.ReasonQuorumLost {
			deadline = c.LastTransitionTime.Add(noRestoreHold)
		}
		if ctx.Err() != nil {
			e.t.Fatalf("quorum loss not reported before the scenario's deadline: %v", ctx.Err())
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.waitFor(ctx, "the recovery controller waiting for "+strings.Join(awaited, ", "), func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
		if c == nil || c.Reason != recovery.RuleDataRemains.CamelCase() {
			return false, fmt.Errorf("RecoveryInProgress %+v", c)
		}
		for _, name := range awaited {
			if !strings.Contains(c.Message, "awaiting") || !strings.Contains(c.Message[strings.Index(c.Message, "awaiting"):], name+" (") {
				return false, fmt.Errorf("message %q does not name %s as awaited", c.Message, name)
			}
		}
		e.t.Logf("recovery waits: %s", c.Message)
		return true, nil
	})
}

// cutFromMembers partitions pod i from every other member pod (it still reaches the apiserver):
// its init step finds no leader, and so reports no data and no leader.
func cutFromMembers(ctx context.Context, e *env, i, n int) {
	e.t.Helper()
	e.waitFor(ctx, e.cluster.PodName(i)+" with an address", func(ctx context.Context) (bool, error) {
		_, err := e.stack.Sim.PodIP(e.cluster.PodKey(i))
		return err == nil, nil
	})
	var peers []string
	for j := 0; j < n; j++ {
		if ip, err := e.stack.Sim.PodIP(e.cluster.PodKey(j)); j != i && err == nil {
			peers = append(peers, ip)
		}
	}
	if err := e.stack.Sim.PartitionFrom(e.cluster.PodKey(i), peers...); err != nil {
		e.t.Fatal(err)
	}
}

func heal(i int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		if err := e.stack.Sim.Heal(e.cluster.PodKey(i)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// wipe deletes member i's claim and pod without waiting for its replacement.
func wipe(i int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) { wipeVolume(ctx, e, i) }
}

// forgeOrder writes a restore order on member lease's Lease as whoever cfg authenticates.
func forgeOrder(ctx context.Context, e *env, cfg *rest.Config, lease, token string) {
	e.t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, memberlease.AnnotationRestore,
		fmt.Sprintf(`{"member":%q,"token":%q}`, lease, token))
	if _, err := kube.CoordinationV1().Leases(e.cluster.Namespace).Patch(ctx, lease, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("forging an order on Lease %s as %s: %v", lease, cfg.Impersonate.UserName, err)
	}
}

// impersonating is the stack's admin configuration acting as user.
func impersonating(e *env, user string) *rest.Config {
	cfg := rest.CopyConfig(e.stack.Cluster.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// asMemberPod acts as member pod i: its ServiceAccount, with the pod name its bound token
// carries (the member Lease admission policy lets a pod write only its own Lease).
func asMemberPod(e *env, etcd *druidv1alpha1.Etcd, i int) *rest.Config {
	cfg := impersonating(e, fmt.Sprintf("system:serviceaccount:%s:%s", e.cluster.Namespace, resources.ServiceAccountName(etcd)))
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/pod-name": {e.cluster.PodName(i)}}
	return cfg
}

// leaseWriter grants user what a namespace user may have: writing Leases, nothing of the Etcd.
func leaseWriter(ctx context.Context, e *env, user string) {
	e.t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.cluster.Namespace, Name: "lease-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "patch", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.cluster.Namespace, Name: "lease-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := e.stack.Kube.RbacV1().Roles(e.cluster.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.stack.Kube.RbacV1().RoleBindings(e.cluster.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// forgedOrdersIgnored waits for the operator's Event on each forged order.
func forgedOrdersIgnored(ctx context.Context, e *env, tokens ...string) {
	e.t.Helper()
	e.waitFor(ctx, "ForgedRestoreOrderIgnored Events", func(ctx context.Context) (bool, error) {
		events, err := e.stack.Kube.CoreV1().Events(e.cluster.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, token := range tokens {
			seen := false
			for _, ev := range events.Items {
				seen = seen || (ev.Reason == recoverycontroller.ReasonForgedRestoreOrder && strings.Contains(ev.Message, token))
			}
			if !seen {
				return false, fmt.Errorf("no %s Event for the order with token %s", recoverycontroller.ReasonForgedRestoreOrder, token)
			}
		}
		return true, nil
	})
}

// noRestoreWaiver: these scenarios take the quorum away on purpose (voters down, volumes lost) to
// prove that nothing is restored while a majority may still hold data.
const noRestoreWaiver = "the fault takes two of the voters (or the only one) away on purpose: the quorum is lost until they are back, " +
	"and leadership is won by election then"

// TestNoRestore runs the scenarios below side by side under one operator (they spend most of
// their time holding a fault), each in its own namespace.
func TestNoRestore(t *testing.T) {
	op := framework.StartOperator(t, sharedStack(t).Cluster.RESTConfig(), operatorDefaults)
	for _, sc := range []scaleScenario{scaleOutInFlightVoterDown, onlyVoterDownDuringScaleOut, twoVotersDown, restoreCalledOff} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runScaleWith(t, sc, op)
		})
	}
}

// scaleOutInFlightVoterDown is the reproduction: a 3→5 scale-out in flight (the
// StatefulSet already holds a 4th pod, not yet a member, which finds no leader) when etcd-2 loses
// its volume and etcd-1 goes down with its volume intact. Two of four pods have no data, but one
// of three voters: nothing may be restored, however long etcd-1 is down. Meanwhile a member pod
// (its ServiceAccount) and a namespace user who may write Leases each write a restore order on a
// Lease; both are reported and ignored. Once etcd-1 is back, the cluster keeps its ID and every
// acknowledged write, replaces etcd-2 and reaches 5 members.
var scaleOutInFlightVoterDown = scaleScenario{name: "3-to-5-voter-down", promise: scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges, Waived: noRestoreWaiver}, from: 3, to: 5, backup: true, during: func(ctx context.Context, e *env) {
	cutFromMembers(ctx, e, 3, 3)
	kill(1)(ctx, e)
	wipe(2)(ctx, e)

	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	const user = "namespace-user"
	leaseWriter(ctx, e, user)
	// etcd-2 is the member with an empty volume, cut off from any leader: the forger.
	forgeOrder(ctx, e, asMemberPod(e, etcd, 2), e.cluster.PodName(2), "forged-by-a-member")
	forgeOrder(ctx, e, impersonating(e, user), e.cluster.PodName(3), "forged-by-a-user")
	noRestoreFor(ctx, e, e.cluster.PodName(1))
	forgedOrdersIgnored(ctx, e, "forged-by-a-member", "forged-by-a-user")
	fixed(1)(ctx, e)
	heal(3)(ctx, e)
}}

// onlyVoterDownDuringScaleOut: a 1→3 scale-out in flight (the learner's pod, cut off from the
// member, finds no leader and no data) when the only voter goes down with its volume. One of two
// pods has no data, none of the one voter: nothing may be restored.
var onlyVoterDownDuringScaleOut = scaleScenario{name: "1-to-3-voter-down", promise: scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges, Waived: noRestoreWaiver}, from: 1, to: 3, backup: true, during: func(ctx context.Context, e *env) {
	cutFromMembers(ctx, e, 1, 1)
	kill(0)(ctx, e)
	noRestoreFor(ctx, e, e.cluster.PodName(0))
	fixed(0)(ctx, e)
	heal(1)(ctx, e)
}}

// twoVotersDown: two of three voters crash-loop (volumes intact) past the grace.
var twoVotersDown = scaleScenario{name: "two-voters-down", promise: scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges, Waived: noRestoreWaiver}, from: 3, to: 3, backup: true, skipScale: true, during: func(ctx context.Context, e *env) {
	kill(1)(ctx, e)
	kill(2)(ctx, e)
	noRestoreFor(ctx, e, e.cluster.PodName(1), e.cluster.PodName(2))
	fixed(1, 2)(ctx, e)
}}

// restoreCalledOff: two of three voters come back without data (etcd-1's volume lost, etcd-2's
// data dir out of sight, as a volume that failed to mount would be), so after the grace etcd-1 is
// ordered to restore; the backup store is down, so its restore keeps failing. Then etcd-2's data
// is back: the old cluster (etcd-0, etcd-2) regains quorum and the restore must be called off
// before anything is restored: same cluster ID, no acknowledged write lost, etcd-1 replaced as a
// member that lost its data.
var restoreCalledOff = scaleScenario{name: "restore-called-off", promise: scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges, Waived: noRestoreWaiver}, from: 3, to: 3, backup: true, skipScale: true, during: func(ctx context.Context, e *env) {
	dir, err := e.stack.Sim.ClaimDir(ctx, e.cluster.Namespace+"/data-"+e.cluster.PodName(2))
	if err != nil {
		e.t.Fatal(err)
	}
	before, err := e.cluster.Get(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.backup.s3.Stop(); err != nil {
		e.t.Fatal(err)
	}
	kill(2)(ctx, e)
	hidden := dir + "/out-of-sight.etcd"
	if err := os.Rename(dir+"/new.etcd", hidden); err != nil {
		e.t.Fatal(err)
	}
	wipe(1)(ctx, e)
	fixed(2)(ctx, e)
	if err := e.stack.Kube.CoreV1().Pods(e.cluster.Namespace).Delete(ctx, e.cluster.PodName(2), metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor(ctx, "a restore ordered and failing (the store is down)", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil || etcd.Status.Recovery == nil {
			return false, err
		}
		lease, err := e.stack.Kube.CoordinationV1().Leases(e.cluster.Namespace).Get(ctx, etcd.Status.Recovery.Member, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return strings.HasPrefix(lease.Annotations[memberlease.AnnotationStartDecision], agent.StartRuleRestoreFailed), nil
	})
	if err := os.Rename(hidden, dir+"/new.etcd"); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor(ctx, "the restore called off", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		if etcd.Status.ClusterID != before.Status.ClusterID {
			e.t.Fatalf("cluster ID %s, was %s: restored although the old cluster came back", etcd.Status.ClusterID, before.Status.ClusterID)
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
		return etcd.Status.Recovery == nil && c != nil && c.Status == druidv1alpha1.ConditionFalse, nil
	})
	if err := e.backup.s3.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	// The order withdrawn with the cluster ID unchanged is the call-off (the one other way an
	// order ends records a new cluster ID). Its Event is best effort: client-go's recorder drops
	// Events of an object beyond a burst, so it is shown when it came, not required.
	called := scenariopkg.EventsWithin(ctx, e.cluster, recovery.RuleCallOff.CamelCase(), scenariopkg.EventDelivery)
	for _, ev := range called {
		e.t.Logf("called off: %s", ev)
	}
	if len(called) == 0 {
		e.t.Logf("no %s Event within %s (Events are best effort)", recovery.RuleCallOff.CamelCase(), scenariopkg.EventDelivery)
	}
}}
