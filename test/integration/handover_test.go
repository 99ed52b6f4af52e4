package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/ondelete"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// handoverRig is a real kube-apiserver holding an Etcd, its OnDelete StatefulSet and pods whose
// IPs are real etcd members (mTLS), mid-rollout: the StatefulSet's update revision is rev-2 and
// the pods for which updated says so already carry it.
type handoverRig struct {
	env     *localcluster.Cluster
	etcd    *druidv1alpha1.Etcd
	cluster *etcdtest.Cluster
	pool    *etcdclient.Pool
	leader  string
}

func newHandoverRig(t *testing.T, ns string, replicas int32, updated func(pod, leader string) bool) *handoverRig {
	t.Helper()
	env := sharedControlPlane(t)
	etcd, cluster := startRealMembers(t, env, ns, func(e *druidv1alpha1.Etcd) { e.Spec.Replicas = replicas })
	rig := &handoverRig{env: env, etcd: etcd, cluster: cluster, pool: etcdclient.NewPool(etcdclient.Options{})}
	t.Cleanup(rig.pool.Close)
	rig.leader = rig.currentLeader(t)

	ctx := context.Background()
	sts, err := getStatefulSet(ctx, env.Client(), ns, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	if err := env.Client().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	sts.Status.UpdateRevision = "rev-2"
	if err := env.Client().Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	pods, err := memberPods(ctx, env.Client(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for name, pod := range pods {
		if !updated(name, rig.leader) {
			continue
		}
		pod.Labels[appsv1.StatefulSetRevisionLabel] = "rev-2"
		if err := env.Client().Update(ctx, &pod); err != nil {
			t.Fatal(err)
		}
	}
	return rig
}

// followersUpdated: the followers are replaced already, the leader is the last outdated member.
func followersUpdated(pod, leader string) bool { return pod != leader }

// currentLeader asks the members, as etcd itself says it.
func (r *handoverRig) currentLeader(t *testing.T) string {
	t.Helper()
	cs, err := r.pool.Query(context.Background(), "check", r.cluster.Client, r.cluster.Targets())
	if err != nil {
		t.Fatal(err)
	}
	l, ok := cs.Leader()
	if !ok {
		t.Fatalf("no leader: %+v", cs.Members)
	}
	return l.Name
}

func (r *handoverRig) reconciler(members memberaccess.Pool, recorder record.EventRecorder, metrics *ondelete.Metrics, policy rollout.Policy) *ondelete.Reconciler {
	return ondelete.NewReconciler(ondelete.Config{
		Client: r.env.Client(), Reader: r.env.Client(), Recorder: recorder, Members: members, Metrics: metrics,
		Access: memberaccess.New(memberaccess.Config{Reader: r.env.Client(),
			DefaultClientTLS: func() (conductortls.ClientMaterial, error) { return r.cluster.Client, nil }}),
		Policy:          policy,
		HandoverTimeout: 5 * time.Second,
	})
}

func (r *handoverRig) reconcile(t *testing.T, rec *ondelete.Reconciler) ctrl.Result {
	t.Helper()
	res, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(r.etcd)})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (r *handoverRig) pod(t *testing.T, name string) (*corev1.Pod, bool) {
	t.Helper()
	pod := &corev1.Pod{}
	err := r.env.Client().Get(context.Background(), client.ObjectKey{Namespace: r.etcd.Namespace, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return pod, pod.DeletionTimestamp == nil
}

func (r *handoverRig) lastOperation(t *testing.T) string {
	t.Helper()
	etcd := &druidv1alpha1.Etcd{}
	if err := r.env.Client().Get(context.Background(), client.ObjectKeyFromObject(r.etcd), etcd); err != nil {
		t.Fatal(err)
	}
	if etcd.Status.LastOperation == nil {
		return ""
	}
	return etcd.Status.LastOperation.Description
}

func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// TestHandoverMovesLeadershipBeforeDeletingTheLeader: with the followers updated, the controller
// moves leadership from the outdated leader to an updated member over mTLS, confirms it from the
// members' Status, deletes nothing meanwhile, and deletes the old leader only on the next
// reconcile, as a follower.
func TestHandoverMovesLeadershipBeforeDeletingTheLeader(t *testing.T) {
	rig := newHandoverRig(t, testNamespace("handover"), 3, followersUpdated)
	events := record.NewFakeRecorder(100)
	metrics := newMetrics(t)
	rec := rig.reconciler(rig.pool, events, metrics, rollout.DefaultPolicy())
	oldLeader := rig.leader

	res := rig.reconcile(t, rec)
	if !res.Requeue {
		t.Errorf("a confirmed handover should ask for the next decision at once, got %+v", res)
	}
	newLeader := rig.currentLeader(t)
	if newLeader == oldLeader {
		t.Fatalf("leadership stayed on %s; last operation %q, events %v", oldLeader, rig.lastOperation(t), drainEvents(events))
	}
	if _, alive := rig.pod(t, oldLeader); !alive {
		t.Fatalf("the leader's pod %s was deleted before leadership moved", oldLeader)
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/handover/move-leader]") || !strings.Contains(op, "to "+newLeader) {
		t.Errorf("lastOperation %q, want the handover to %s", op, newLeader)
	}
	got := drainEvents(events)
	if !hasEvent(got, "Normal LeadershipHandedOver leadership moved from "+oldLeader+" to "+newLeader) {
		t.Errorf("no LeadershipHandedOver event from %s to %s: %v", oldLeader, newLeader, got)
	}
	if n := testutil.ToFloat64(metrics.Handovers.WithLabelValues(rig.etcd.Namespace, rig.etcd.Name, newLeader, ondelete.HandoverSucceeded)); n != 1 {
		t.Errorf("handovers succeeded to %s = %v, want 1", newLeader, n)
	}

	rig.reconcile(t, rec)
	if _, alive := rig.pod(t, oldLeader); alive {
		t.Fatalf("old leader %s not deleted after the handover; last operation %q", oldLeader, rig.lastOperation(t))
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/participating/follower]") {
		t.Errorf("old leader deleted by %q, want participating/follower", op)
	}
	if n := counted(t, metrics.LeaderDeletions, "rule", string(rollout.RuleParticipatingFollower)); n != 0 {
		t.Errorf("a leader deletion was counted although the pod followed")
	}
	if l := rig.currentLeader(t); l != newLeader {
		t.Errorf("leadership moved again, to %s", l)
	}
}

// TestHandoverRetriesAnotherTransferee: the member the controller first hands leadership to is
// cut off from the leader (muted: it hears the leader, the leader does not hear it), so the
// MoveLeader fails for real, by timeout. The failure and its target are recorded on the leader's
// pod, and the next attempt goes to the other follower, which takes over. The old leader, a
// follower now, is not deleted while the muted member cannot serve a read (with 3 members that
// would leave the new leader without a quorum that hears it); once healed, it goes.
func TestHandoverRetriesAnotherTransferee(t *testing.T) {
	rig := newHandoverRig(t, testNamespace("handover-retry"), 3, followersUpdated)
	events := record.NewFakeRecorder(100)
	metrics := newMetrics(t)
	leader := rig.leader
	// An idle cluster's members have applied the same index, and the planner breaks the tie by
	// the lowest ordinal: that follower is the first transferee.
	muted, other := "etcd-main-"+notLeader(leader, 0), "etcd-main-"+notLeader(leader, 1)
	heal := rig.mute(t, muted)
	rec := rig.reconciler(rig.pool, events, metrics, rollout.DefaultPolicy())

	rig.reconcile(t, rec)
	pod, alive := rig.pod(t, leader)
	if !alive {
		t.Fatalf("leader deleted after one failed handover")
	}
	if got, to := pod.Annotations[rollout.AnnotationHandoverFailures], pod.Annotations[rollout.AnnotationHandoverFailedTo]; got != "1" || to != muted {
		t.Fatalf("after the first attempt: failures %q to %q, want 1 to %s", got, to, muted)
	}
	if !hasEvent(drainEvents(events), "Warning HandoverFailed moving leadership from "+leader+" to "+muted) {
		t.Errorf("no HandoverFailed event from %s to %s", leader, muted)
	}

	rig.reconcile(t, rec)
	if l := rig.currentLeader(t); l != other {
		t.Fatalf("the second attempt did not move leadership to %s (leader: %s); last operation %q", other, l, rig.lastOperation(t))
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "not "+muted+", which did not serve a read after a handover to it failed") || !strings.Contains(op, "attempt 2 of 3") {
		t.Errorf("lastOperation %q does not say why the target changed", op)
	}
	if !hasEvent(drainEvents(events), "Normal LeadershipHandedOver leadership moved from "+leader+" to "+other) {
		t.Errorf("no LeadershipHandedOver event from %s to %s", leader, other)
	}

	rig.reconcile(t, rec)
	if _, alive := rig.pod(t, leader); !alive {
		t.Fatalf("old leader %s deleted while %s was still cut off; last operation %q", leader, muted, rig.lastOperation(t))
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/wait/handover-target-unheard]") || !strings.Contains(op, "would leave 1 of 3 voters known to be heard (quorum 2)") {
		t.Errorf("lastOperation %q, want the wait for %s with its numbers", op, muted)
	}

	if err := heal(); err != nil {
		t.Fatal(err)
	}
	// The healed member needs a moment to be heard again: one decision may still wait.
	framework.Eventually(t, timeout, "the healed member serving a read, the old leader deleted", func(ctx context.Context) (bool, string) {
		rig.reconcile(t, rec)
		_, alive := rig.pod(t, leader)
		return !alive, rig.lastOperation(t)
	})
	if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/participating/follower]") {
		t.Errorf("old leader deleted by %q, want participating/follower", op)
	}
}

// TestHandoverFailuresFallBackToDeletingTheLeader: five members, two handover attempts, and the
// two followers the planner picks in turn are both cut off from the leader (muted), so both
// MoveLeaders fail for real, by timeout, each to another member. The attempts are used up, but
// the leader is not deleted while both cannot serve a read: that would leave 2 of 5 voters the
// next leader could hear. Once they are healed it goes. Healing them may itself move
// leadership (their failed campaigns raised their term past the leader's), so the leader goes
// either by the fallback (participating/leader-handover-failed, counted and explained) or, if
// it lost leadership first, as a follower.
func TestHandoverFailuresFallBackToDeletingTheLeader(t *testing.T) {
	rig := newHandoverRig(t, testNamespace("handover-fails"), 5, followersUpdated)
	events := record.NewFakeRecorder(100)
	metrics := newMetrics(t)
	leader := rig.leader
	targets := []string{"etcd-main-" + notLeader(leader, 0), "etcd-main-" + notLeader(leader, 1)}
	var heals []func() error
	for _, name := range targets {
		heals = append(heals, rig.mute(t, name))
	}
	policy := rollout.DefaultPolicy()
	policy.HandoverAttempts = 2
	rec := rig.reconciler(rig.pool, events, metrics, policy)

	for attempt := 1; attempt <= policy.HandoverAttempts; attempt++ {
		rig.reconcile(t, rec)
		pod, alive := rig.pod(t, leader)
		if !alive {
			t.Fatalf("attempt %d: leader deleted before the attempts were used up", attempt)
		}
		failedTo := strings.Join(targets[:attempt], ",")
		if got, to := pod.Annotations[rollout.AnnotationHandoverFailures], pod.Annotations[rollout.AnnotationHandoverFailedTo]; got != fmt.Sprint(attempt) || to != failedTo {
			t.Fatalf("attempt %d: failures %q to %q, want %d to %s; last operation %q", attempt, got, to, attempt, failedTo, rig.lastOperation(t))
		}
	}
	got := drainEvents(events)
	for _, target := range targets {
		if !hasEvent(got, "Warning HandoverFailed moving leadership from "+leader+" to "+target) {
			t.Errorf("no HandoverFailed event from %s to %s: %v", leader, target, got)
		}
	}
	if l := rig.currentLeader(t); l != leader {
		t.Errorf("leadership moved to %s although both targets were cut off", l)
	}

	rig.reconcile(t, rec)
	if _, alive := rig.pod(t, leader); !alive {
		t.Fatalf("leader %s deleted while %v were cut off; last operation %q", leader, targets, rig.lastOperation(t))
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/wait/handover-target-unheard]") || !strings.Contains(op, "would leave 2 of 5 voters known to be heard (quorum 3)") {
		t.Errorf("lastOperation %q, want the wait for %v with its numbers", op, targets)
	}

	for _, heal := range heals {
		if err := heal(); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "the healed members serving reads, the old leader deleted", func(ctx context.Context) (bool, string) {
		rig.reconcile(t, rec)
		_, alive := rig.pod(t, leader)
		return !alive, rig.lastOperation(t)
	})
	op := rig.lastOperation(t)
	switch {
	case strings.Contains(op, "[rollout/participating/leader-handover-failed]"):
		if !strings.Contains(op, "after 2 failed handovers (at most 2)") {
			t.Errorf("lastOperation %q does not explain the fallback", op)
		}
		if n := counted(t, metrics.LeaderDeletions, "rule", string(rollout.RuleLeaderHandoverFailed)); n != 1 {
			t.Errorf("leader deletions after failed handovers = %v, want 1", n)
		}
		if !hasEvent(drainEvents(events), "Warning LeaderDeleted deleting "+leader+" while it leads") {
			t.Errorf("no LeaderDeleted event")
		}
	case strings.Contains(op, "[rollout/participating/follower]"):
		t.Logf("the healed members' raised term moved leadership first; %s went as a follower", leader)
	default:
		t.Errorf("leader deleted by %q, want the fallback or, once it lost leadership, as a follower", op)
	}
	if n := testutil.ToFloat64(metrics.Handovers.WithLabelValues(rig.etcd.Namespace, rig.etcd.Name, "", ondelete.HandoverTimedOut)); n != 0 {
		t.Errorf("handovers counted without a target")
	}
}

// mute cuts member name off from its peers' side until heal, or the end of the test
// (etcdtest.Cluster.Mute heals at cleanup).
func (r *handoverRig) mute(t *testing.T, name string) (heal func() error) {
	t.Helper()
	heal, err := r.cluster.Mute(slices.IndexFunc(r.cluster.Members, func(m *etcdtest.Member) bool { return m.Name == name }))
	if err != nil {
		t.Fatal(err)
	}
	return heal
}

// TestBatchWithinQuorumHeadroom: five real members, every pod outdated, concurrency 2: one
// reconcile deletes two followers (never the leader), asking the members for roles and applied
// indexes; the next waits for them, since the headroom of 5 voters is used up.
func TestBatchWithinQuorumHeadroom(t *testing.T) {
	rig := newHandoverRig(t, testNamespace("batch"), 5, func(string, string) bool { return false })
	events := record.NewFakeRecorder(100)
	metrics := newMetrics(t)
	policy := rollout.DefaultPolicy()
	policy.MaxConcurrent = 2
	rec := rig.reconciler(rig.pool, events, metrics, policy)

	rig.reconcile(t, rec)
	var deleted []string
	for i := range 5 {
		name := fmt.Sprintf("%s-%d", rig.etcd.Name, i)
		if _, alive := rig.pod(t, name); !alive {
			deleted = append(deleted, name)
		}
	}
	if len(deleted) != 2 || slices.Contains(deleted, rig.leader) {
		t.Fatalf("deleted %v (leader %s), want two followers; last operation %q", deleted, rig.leader, rig.lastOperation(t))
	}
	if op := rig.lastOperation(t); !strings.Contains(op, "2 at once within the quorum's headroom (concurrency 2, 5 voters, quorum 3, headroom 2, 0 already unavailable)") {
		t.Errorf("lastOperation %q does not carry the batch's numbers", op)
	}
	if n := counted(t, metrics.Deletions, "rule", string(rollout.RuleParticipatingFollower)); n != 2 {
		t.Errorf("deletions counted %v, want 2", n)
	}

	rig.reconcile(t, rec)
	still := 0
	for i := range 5 {
		if _, alive := rig.pod(t, fmt.Sprintf("%s-%d", rig.etcd.Name, i)); alive {
			still++
		}
	}
	if still != 3 {
		t.Fatalf("%d pods left after the second reconcile, want 3: nothing more may go while two are out; last operation %q", still, rig.lastOperation(t))
	}
}

// TestReplacedMemberCountsBackOnceItServesARead: an updated follower whose pod is not Ready yet
// (the kubelet has not probed it since it started) but whose etcd serves a linearizable read is
// back in the quorum: with RejoinByRead the next follower goes at once, and the reason says why;
// without it the rollout waits for the readiness probe (DEP-07 step 3). A member that cannot
// serve (its etcd stopped) holds the rollout and is watched: the controller is woken once it
// serves, not at its next requeue.
func TestReplacedMemberCountsBackOnceItServesARead(t *testing.T) {
	rig := newHandoverRig(t, testNamespace("rejoin-read"), 3, func(pod, leader string) bool { return pod == "etcd-main-"+notLeader(leader, 0) })
	replaced := "etcd-main-" + notLeader(rig.leader, 0)
	pod, _ := rig.pod(t, replaced)
	pod.Status.ContainerStatuses[0].Ready = false
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if err := rig.env.Client().Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	metrics := newMetrics(t)
	withoutRead := rollout.DefaultPolicy()
	withoutRead.RejoinByRead = false

	t.Run("without the read, the readiness probe decides", func(t *testing.T) {
		rig.reconcile(t, rig.reconciler(rig.pool, record.NewFakeRecorder(100), metrics, withoutRead))
		if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/wait/updated-not-participating]") {
			t.Fatalf("lastOperation %q, want a wait for %s", op, replaced)
		}
	})

	idx := slices.IndexFunc(rig.cluster.Members, func(m *etcdtest.Member) bool { return m.Name == replaced })
	if err := rig.cluster.Stop(idx); err != nil {
		t.Fatal(err)
	}
	watched := rig.reconciler(rig.pool, record.NewFakeRecorder(100), metrics, rollout.DefaultPolicy())
	t.Run("a member that cannot serve holds the rollout and is watched", func(t *testing.T) {
		rig.reconcile(t, watched)
		if op := rig.lastOperation(t); !strings.Contains(op, "[rollout/wait/updated-not-participating]") {
			t.Fatalf("lastOperation %q, want a wait for %s", op, replaced)
		}
		if n := testutil.ToFloat64(metrics.RejoinReads.WithLabelValues(rig.etcd.Namespace, rig.etcd.Name, "not-yet")); n != 1 {
			t.Errorf("reads not served counted %v, want 1", n)
		}
		select {
		case ev := <-watched.RejoinWakeups():
			t.Fatalf("woken for %s while %s cannot serve", ev.Object.GetName(), replaced)
		case <-time.After(10 * ondelete.DefaultRejoinInterval):
		}
	})

	if err := rig.cluster.Restart(idx); err != nil {
		t.Fatal(err)
	}
	t.Run("the watch wakes the controller once the member serves", func(t *testing.T) {
		// The member's pod is still not Ready: only the watch's own read can tell it serves.
		select {
		case ev := <-watched.RejoinWakeups():
			if ev.Object.GetName() != rig.etcd.Name {
				t.Errorf("woken for %s, want the StatefulSet %s", ev.Object.GetName(), rig.etcd.Name)
			}
		case <-time.After(timeout):
			t.Fatalf("not woken within %s after %s restarted", timeout, replaced)
		}
		if n := testutil.ToFloat64(metrics.RejoinWatches.WithLabelValues(rig.etcd.Namespace, rig.etcd.Name, ondelete.RejoinWatchServed)); n != 1 {
			t.Errorf("watches ended by a served read counted %v, want 1", n)
		}
	})
	t.Run("once it serves, the next follower goes", func(t *testing.T) {
		rec := rig.reconciler(rig.pool, record.NewFakeRecorder(100), metrics, rollout.DefaultPolicy())
		framework.Eventually(t, timeout, "the next follower deleted", func(context.Context) (bool, string) {
			rig.reconcile(t, rec)
			op := rig.lastOperation(t)
			return strings.Contains(op, "[rollout/participating/follower]"), op
		})
		if op := rig.lastOperation(t); !strings.Contains(op, replaced+" served a linearizable read before its readiness probe passed") {
			t.Errorf("lastOperation %q does not say that %s counted by its read", op, replaced)
		}
		if _, alive := rig.pod(t, rig.leader); !alive {
			t.Errorf("the leader %s was deleted", rig.leader)
		}
		if n := testutil.ToFloat64(metrics.RejoinReads.WithLabelValues(rig.etcd.Namespace, rig.etcd.Name, "served")); n < 1 {
			t.Errorf("served reads counted %v, want at least 1", n)
		}
	})
}

// notLeader names the ordinal of the n-th member (from 0) that is not leader.
func notLeader(leader string, n int) string {
	for i := range rollout.MaxMembers {
		if name := fmt.Sprintf("etcd-main-%d", i); name != leader {
			if n == 0 {
				return fmt.Sprint(i)
			}
			n--
		}
	}
	return ""
}

// newMetrics is a fresh set of the OnDelete controller's metrics on a registry of its own.
func newMetrics(t *testing.T) *ondelete.Metrics {
	t.Helper()
	m, err := ondelete.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}
