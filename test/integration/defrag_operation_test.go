package integration

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	defragplan "github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
)

// TestDefragmentationTakesTurnsThroughItsCondition runs the defragmentation controller on real
// members with the clock in the test's hands: a due run waits while another operation's
// condition is True (no member defragmented), and while a DefragmentationInProgress another
// process left behind may still mark a call in flight (until the Etcd's timeout and a margin);
// then it clears that, defragments, and leaves DefragmentationInProgress False after each member.
func TestDefragmentationTakesTurnsThroughItsCondition(t *testing.T) {
	env := sharedControlPlane(t)
	ctx := context.Background()
	etcd, _ := startRealMembers(t, env, testNamespace("defrag-turns"), func(e *druidv1alpha1.Etcd) {
		e.Spec.Etcd.DefragmentationSchedule = ptr.To("*/5 * * * *")
		e.Spec.Etcd.EtcdDefragTimeout = &metav1.Duration{Duration: time.Minute}
	})
	setCondition := func(typ druidv1alpha1.ConditionType, status druidv1alpha1.ConditionStatus, at time.Time) {
		t.Helper()
		setEtcdCondition(ctx, t, env.Client(), client.ObjectKeyFromObject(etcd), druidv1alpha1.Condition{Type: typ, Status: status,
			Reason: "Test", Message: "set by the test", LastTransitionTime: metav1.NewTime(at), LastUpdateTime: metav1.NewTime(at)})
	}
	condition := func(typ druidv1alpha1.ConditionType) *druidv1alpha1.Condition {
		t.Helper()
		e := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), e); err != nil {
			t.Fatal(err)
		}
		return druidv1alpha1.FindCondition(e.Status.Conditions, typ)
	}

	pool := etcdclient.NewPool(etcdclient.Options{})
	t.Cleanup(pool.Close)
	metrics, err := defrag.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r := defrag.NewReconciler(defrag.Config{Client: env.Client(), Reader: env.Client(), Recorder: record.NewFakeRecorder(100),
		Members: pool, Metrics: metrics, WaitInterval: time.Second, Now: func() time.Time { return clock }})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}
	reconcile := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	defragmented := func() float64 { return counted(t, metrics.Defragmentations, "result", "succeeded") }

	clock = clock.Add(reconcile().RequeueAfter) // the first run is due
	setCondition(druidv1alpha1.ConditionTypeRecoveryInProgress, druidv1alpha1.ConditionTrue, clock)
	reconcile()
	if n := defragmented(); n != 0 {
		t.Fatalf("%v members defragmented while a recovery was in flight", n)
	}
	if n := counted(t, metrics.Decisions, "rule", string(operation.WaitRule(defragplan.Planner, operation.KindRecovery))); n != 1 {
		t.Errorf("decisions under %s = %v, want 1", operation.WaitRule(defragplan.Planner, operation.KindRecovery), n)
	}
	setCondition(druidv1alpha1.ConditionTypeRecoveryInProgress, druidv1alpha1.ConditionFalse, clock)

	// Another operator process was defragmenting a member when it stopped: its call may still
	// run until the timeout (1m) and the margin have passed.
	setCondition(druidv1alpha1.ConditionTypeDefragmentationInProgress, druidv1alpha1.ConditionTrue, clock)
	res := reconcile()
	if n := defragmented(); n != 0 {
		t.Fatalf("%v members defragmented while another process's defragmentation may still run", n)
	}
	if res.RequeueAfter < time.Minute || res.RequeueAfter > time.Minute+time.Minute/2 {
		t.Errorf("requeue after %s, want the rest of the timeout and margin (about 1m10s)", res.RequeueAfter)
	}
	clock = clock.Add(res.RequeueAfter)
	for step := 0; step < 10 && defragmented() < 3; step++ {
		reconcile()
		if c := condition(druidv1alpha1.ConditionTypeDefragmentationInProgress); c == nil || c.Status != druidv1alpha1.ConditionFalse {
			t.Fatalf("after a step: DefragmentationInProgress %+v, want False (released after each member)", c)
		}
		clock = clock.Add(time.Second)
	}
	if n := defragmented(); n != 3 {
		t.Fatalf("%v members defragmented once the left-over condition expired, want 3", n)
	}
}
