package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/plancmd"
)

// TestANewOperationHoldsTheRollout: an operation kind added to package operation's table, and
// nothing else, holds a rollout (no pod deleted, no leadership moved) and shows in `plan`, in an
// Event and in the wait metric under its own rule id; once its condition clears the rollout goes
// on. The rollout is mid-way (followers updated, the leader outdated) on real members over mTLS.
func TestANewOperationHoldsTheRollout(t *testing.T) {
	const exampleCondition druidv1alpha1.ConditionType = "ExampleMaintenanceInProgress"
	const exampleKind operation.Kind = "example-maintenance"
	saved := slices.Clone(operation.Holds)
	operation.Holds = append(operation.Holds, operation.Hold{Condition: exampleCondition, Kind: exampleKind, Holder: "example controller"})
	t.Cleanup(func() { operation.Holds = saved })
	wantRule := operation.WaitRule(rollout.Planner, exampleKind)

	rig := newHandoverRig(t, testNamespace("operation-hold"), 3, followersUpdated)
	ctx := context.Background()
	setCondition := func(status druidv1alpha1.ConditionStatus) {
		t.Helper()
		setEtcdCondition(ctx, t, rig.env.Client(), client.ObjectKeyFromObject(rig.etcd), druidv1alpha1.Condition{Type: exampleCondition,
			Status: status, Reason: "Examining", Message: "an example maintenance", LastTransitionTime: metav1.Now()})
	}
	setCondition(druidv1alpha1.ConditionTrue)

	events := record.NewFakeRecorder(100)
	metrics := newMetrics(t)
	rec := rig.reconciler(rig.pool, events, metrics, rollout.DefaultPolicy())
	leader := rig.leader
	for range 2 {
		rig.reconcile(t, rec)
	}
	if l := rig.currentLeader(t); l != leader {
		t.Fatalf("leadership moved from %s to %s while the example operation was in flight", leader, l)
	}
	for _, name := range []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"} {
		if _, alive := rig.pod(t, name); !alive {
			t.Fatalf("pod %s deleted while the example operation was in flight", name)
		}
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "["+string(wantRule)+"]") || !strings.Contains(op, "an example maintenance") {
		t.Errorf("lastOperation %q, want the wait under %s naming the operation", op, wantRule)
	}
	if got := drainEvents(events); !hasEvent(got, "Normal "+wantRule.CamelCase()+" ") {
		t.Errorf("no %s Event: %v", wantRule.CamelCase(), got)
	}
	if n := counted(t, metrics.Waits, "rule", string(wantRule)); n != 2 {
		t.Errorf("rollout waits under %s = %v, want 2 (one a reconcile)", wantRule, n)
	}

	state, err := plancmd.ReadLive(ctx, rig.env.Client(), rig.etcd.Namespace, rig.etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := plancmd.Plan(ctx, state, plancmd.Sources{Leases: plancmd.LiveLeases(rig.env.Client())}, roles.SourcePolicyAuto, rollout.DefaultPolicy(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if out.Rule != wantRule || out.Action != rollout.ActionWait {
		t.Errorf("plan says %s %s, want a wait under %s", out.Action, out.Rule, wantRule)
	}

	setCondition(druidv1alpha1.ConditionFalse)
	rig.reconcile(t, rec)
	if l := rig.currentLeader(t); l == leader {
		t.Fatalf("the rollout did not go on once the example operation was over: leader still %s; last operation %q", leader, rig.lastOperation(t))
	}
}

// setEtcdCondition writes cond into the Etcd's status as another writer would, with a merge patch,
// in place of any condition of its type (etcdstatus.SetCondition).
func setEtcdCondition(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, cond druidv1alpha1.Condition) {
	t.Helper()
	etcd := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, key, etcd); err != nil {
		t.Fatal(err)
	}
	before := etcd.DeepCopy()
	etcd.Status.Conditions = etcdstatus.SetCondition(etcd.Status.Conditions, cond)
	if err := c.Status().Patch(ctx, etcd, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}
