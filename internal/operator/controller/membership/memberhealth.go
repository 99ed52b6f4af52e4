package membership

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Why here and not in a controller of its own: restarting a stuck member needs exactly what
// this controller already has each pass (the members' answers, which voters the leader hears,
// an uncached re-read before acting), and it must never overlap a membership change. Run in the
// same reconcile, only once the membership plan is settled, the two cannot interleave.

// HealthObserve builds internal/decide/memberhealth's input from the Etcd's status members (their
// NotReady time, now − lastTransitionTime), the pods and the membership observation (etcd's
// member list, which voters the leader hears). Every operation in flight counts, the scaling
// this very controller holds too (it is released in this reconcile; the next pass acts). Pure.
func HealthObserve(etcd *druidv1alpha1.Etcd, pods []corev1.Pod, mo membership.Observed, now time.Time, grace time.Duration) memberhealth.Observed {
	o := memberhealth.Observed{
		NotReadyGrace:   grace,
		MembersKnown:    mo.MembersKnown,
		HeardKnown:      mo.HeardKnown,
		RolloutInFlight: mo.RolloutInFlight,
		Operations:      operation.Of(etcd),
	}
	inList := map[string]membership.Member{}
	for _, m := range mo.Members {
		if !m.Learner {
			o.Voters++
		}
		if m.Ordinal >= 0 {
			inList[m.Name] = m
		}
	}
	podsByName := map[string]*corev1.Pod{}
	for i := range pods {
		podsByName[pods[i].Name] = &pods[i]
	}
	for _, s := range etcd.Status.Members {
		// status.members names etcd members; the planner, the pods and the member list here
		// know them by pod. A name of no pod of etcd has no pod to restart: left out.
		pod, ok := resources.PodOfMember(etcd, s.Name)
		if !ok {
			continue
		}
		m := memberhealth.Member{Name: pod, Reason: s.Reason, NotReady: s.Status == druidv1alpha1.EtcdMemberStatusNotReady}
		if m.NotReady {
			m.NotReadyFor = now.Sub(s.LastTransitionTime.Time)
		}
		if p := podsByName[pod]; p != nil && p.DeletionTimestamp.IsZero() {
			m.Pod, m.PodAge = true, now.Sub(etcdStarted(p))
			// The status is written every few seconds, the pod's readiness is newer: a member
			// NotReady for its pod's sake whose pod is Ready now has recovered, and restarting it
			// would undo just that (seen in e2e: a member restarted by liveness, Ready again,
			// then deleted on the status of a moment before). Only an expired Lease is no
			// matter of the pod.
			if m.NotReady && s.Reason != etcdstatus.MemberReasonUnknownGracePeriodExceeded && etcdstatus.PodReady(p) {
				m.NotReady, m.NotReadyFor = false, 0
			}
		}
		if em, ok := inList[pod]; ok {
			m.Voter, m.Heard = !em.Learner, em.Heard
		}
		o.Members = append(o.Members, m)
	}
	return o
}

// etcdStarted is when the pod's etcd last started: its creation, or the start of its etcd
// container if that was later. A container the kubelet restarted (its liveness probe failed) is
// being restarted already; it gets its grace again before its pod is deleted on top.
func etcdStarted(p *corev1.Pod) time.Time {
	started := p.CreationTimestamp.Time
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == resources.EtcdContainerName && cs.State.Running != nil && cs.State.Running.StartedAt.After(started) {
			started = cs.State.Running.StartedAt.Time
		}
	}
	return started
}

// restartStuck is DEP-01 operator scenario 9, run once the membership plan is settled: plan on
// the cached view; when a pod may be deleted, read everything again uncached, ask which voters
// the leader hears and plan once more on that; delete at most the one pod named (UID
// precondition: never a pod created since); report it.
func (r *Reconciler) restartStuck(ctx context.Context, view *clusterView, tgts []memberaccess.Target, creds conductortls.ClientMaterial, cs *memberaccess.ClusterStatus) error {
	log := logr.FromContextOrDiscard(ctx)
	d := r.healthPlan(view, cs, nil)
	if d.Rule == memberhealth.RuleHeardUnknown {
		// A pod may be deleted: decide again on what the apiserver holds now, on the members'
		// answers for the pods there are now, and on which voters the leader hears.
		fresh, err := r.read(ctx, r.cfg.Reader, client.ObjectKeyFromObject(view.etcd))
		if err != nil || fresh == nil {
			return err
		}
		view = fresh
		if freshTgts := memberaccess.Targets(view.etcd, view.pods); !sameTargets(tgts, freshTgts) {
			tgts = freshTgts
			creds, cs, _ = r.askMembers(ctx, view.etcd, tgts)
		}
		d = r.healthPlan(view, cs, r.hear(ctx, view.etcd, tgts, creds, cs))
	}
	log.V(1).Info("Member health decision", "action", d.Action, "rule", d.Rule, "reason", d.Reason)
	var actErr error
	if d.Action == memberhealth.ActionDeletePod {
		actErr = r.deleteStuckPod(ctx, view, d.Pod)
		if actErr == nil {
			log.Info("Deleted the pod of a member NotReady past the grace so it restarts", "pod", d.Pod, "rule", d.Rule, "reason", d.Reason)
		}
	}
	if err := r.reportRestart(ctx, view.etcd, d, actErr); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return actErr
}

// healthPlan observes the view for internal/decide/memberhealth and plans; heard nil is "not asked".
func (r *Reconciler) healthPlan(v *clusterView, cs *memberaccess.ClusterStatus, heard map[uint64]bool) memberhealth.Decision {
	mo := WithHeard(Observe(v.etcd, v.sts, v.pods, v.leases, cs, r.cfg.WaitForBackupReady), heard)
	return memberhealth.Plan(HealthObserve(v.etcd, v.pods, mo, r.now(), r.cfg.NotReadyGrace))
}

// deleteStuckPod deletes the named pod of the view, with its UID as precondition: a pod created
// since the decision is another pod, which gets its grace. A pod already gone is no error.
func (r *Reconciler) deleteStuckPod(ctx context.Context, v *clusterView, name string) error {
	for i := range v.pods {
		p := &v.pods[i]
		if p.Name != name {
			continue
		}
		err := r.cfg.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	}
	return nil
}

// reportRestart records a memberhealth decision: an Event for every pod deleted and every change
// of rule, and the MemberRestart condition, written only when the rule changes or a pod was
// deleted (its message carries durations that change every pass), never added to an Etcd that
// has none while nothing is stuck.
func (r *Reconciler) reportRestart(ctx context.Context, etcd *druidv1alpha1.Etcd, d memberhealth.Decision, actErr error) error {
	reason := d.Rule.CamelCase()
	message := fmt.Sprintf("%s [%s]", d.Reason, d.Rule)
	if actErr != nil {
		message = fmt.Sprintf("%s: failed: %v [%s]", d.Reason, actErr, d.Rule)
	}
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeMemberRestart)
	acted := d.Action == memberhealth.ActionDeletePod
	if !acted && (prev == nil && !d.Stuck || prev != nil && prev.Reason == reason) {
		return nil
	}
	eventType := corev1.EventTypeNormal
	if actErr != nil || (d.Stuck && !acted) {
		eventType = corev1.EventTypeWarning
	}
	r.cfg.Recorder.Event(etcd, eventType, reason, message)
	status := druidv1alpha1.ConditionFalse
	if d.Stuck {
		status = druidv1alpha1.ConditionTrue
	}
	cond := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeMemberRestart, Status: status,
		Reason: reason, Message: message, LastUpdateTime: metav1.NewTime(r.now())}
	err := r.setCondition(ctx, etcd, cond)
	if err != nil {
		return fmt.Errorf("recording member restart decision: %w", err)
	}
	return nil
}
