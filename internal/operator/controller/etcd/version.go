package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// MemberCalls are the reconciler's questions and orders to an Etcd's members (memberaccess.Calls):
// their status (versions, leader), etcd's downgrade calls, a leadership move.
type MemberCalls interface {
	Statuses(ctx context.Context, etcd *druidv1alpha1.Etcd) (etcdclient.ClusterStatus, error)
	Downgrade(ctx context.Context, etcd *druidv1alpha1.Etcd, action etcdclient.DowngradeAction, target string) error
	MoveLeader(ctx context.Context, etcd *druidv1alpha1.Etcd, toPod string) error
}

// versionChangeRecheck is how soon an Etcd whose version change waits on its members (their
// storage version, the downgrade's end) is looked at again: member versions are no object event.
const versionChangeRecheck = 3 * time.Second

// planVersion decides the etcd image to render and the downgrade call to make
// (internal/decide/versionchange). The members are asked, and their pods looked at for one that fails to
// start, only when the spec's image is another minor version than the running one, or a
// downgrade is recorded as under way (the condition, or its source on the StatefulSet).
func (r *Reconciler) planVersion(ctx context.Context, etcd *druidv1alpha1.Etcd) (versionchange.Decision, error) {
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil {
		return versionchange.Decision{}, err
	}
	in, needsMembers := ObserveVersion(etcd, sts)
	if !needsMembers || r.members == nil {
		return versionchange.Plan(in), nil
	}
	cs, err := r.members.Statuses(ctx, etcd)
	if err != nil {
		// Planned without the members' word: a downgrade then waits, nothing else needs it.
		logr.FromContextOrDiscard(ctx).Info("Cannot ask the members for their versions", "error", err.Error())
	}
	// Uncached: the cache keeps no pod spec (operator.memberPodView), and the image a pod was
	// created with is in its spec alone (a waiting container's status may not name it).
	pods, err := memberaccess.ReadMemberPods(ctx, r.apiReader, sts)
	if err != nil {
		return versionchange.Decision{}, fmt.Errorf("reading the member pods for failed starts: %w", err)
	}
	return versionchange.Plan(ObserveVersionMembers(in, cs, pods, time.Now(), r.startGrace)), nil
}

// ObserveVersion is what internal/decide/versionchange decides on from the Etcd and its StatefulSet (nil:
// none yet), and whether the members' answers and pods are needed too (ObserveVersionMembers):
// only when the spec's image is another minor version than the running one, or a downgrade is
// recorded as under way (the condition, or its source on the StatefulSet). The plan command
// observes the same way.
func ObserveVersion(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (versionchange.Observed, bool) {
	in := versionchange.Observed{Desired: resources.EtcdImage(etcd)}
	if sts == nil {
		return in, false
	}
	in.Running = resources.RunningEtcdImage(sts)
	in.StatefulSetReplicas = int(ptr.Deref(sts.Spec.Replicas, 0))
	in.Source, in.FailedTarget = resources.DowngradeRecord(sts)
	recorded := in.Source != ""
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		recorded = true
	}
	return in, in.Running != "" && versionchange.NeedsMembers(in.Desired, in.Running, recorded)
}

// ObserveVersionMembers adds the members' answers (cs) and their pods' failed starts (grace: how
// long a pod may stay not Ready after its creation) to in.
func ObserveVersionMembers(in versionchange.Observed, cs etcdclient.ClusterStatus, pods []corev1.Pod, now time.Time, grace time.Duration) versionchange.Observed {
	in.Members = versionMembers(cs)
	in.Failed = startFailures(pods, now, grace)
	return in
}

// startFailures are the member pods that fail to start: the etcd container waiting with a reason
// after which it does not come up without a new pod (rollout.ClassifyContainer's dead reasons:
// CrashLoopBackOff, ErrImagePull, ImagePullBackOff, CreateContainerError, RunContainerError, …),
// or the pod not Ready longer than grace after its creation (an etcd that runs but never
// serves). A terminated container is not counted: the kubelet restarts it, and if it dies again
// it waits in CrashLoopBackOff. A terminating pod is on its way out and counts for nothing.
func startFailures(pods []corev1.Pod, now time.Time, grace time.Duration) []versionchange.Failure {
	var out []versionchange.Failure
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() || etcdstatus.PodReady(p) {
			continue
		}
		image := ""
		for _, c := range p.Spec.Containers {
			if c.Name == resources.EtcdContainerName {
				image = c.Image
			}
		}
		reason := ""
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == resources.EtcdContainerName && s.State.Waiting != nil && rollout.ClassifyContainer(p) == rollout.ContainerDead {
				reason = s.State.Waiting.Reason
				if msg := s.State.Waiting.Message; msg != "" {
					reason += ": " + msg
				}
			}
		}
		if age := now.Sub(p.CreationTimestamp.Time); reason == "" && !p.CreationTimestamp.IsZero() && age > grace {
			reason = fmt.Sprintf("not Ready %s after its creation", age.Round(time.Second))
		}
		if reason != "" {
			out = append(out, versionchange.Failure{Pod: p.Name, Image: image, Reason: reason})
		}
	}
	return out
}

// versionMembers is what the members said, for the planner.
func versionMembers(cs etcdclient.ClusterStatus) []versionchange.Member {
	out := make([]versionchange.Member, 0, len(cs.Members))
	for _, s := range cs.Members {
		m := versionchange.Member{Name: s.Name, Answered: s.Reachable}
		if s.Reachable {
			// A member whose version cannot be read reports 0.0.0: never at any version, so a
			// downgrade waits on it rather than go ahead.
			m.Server, _ = versionchange.ParseVersion(s.Version)
			m.Storage, m.StorageKnown = versionchange.ParseVersion(s.StorageVersion)
			m.DowngradeEnabled = s.DowngradeEnabled
			m.DowngradeTarget, _ = versionchange.ParseVersion(s.DowngradeTarget)
		}
		out = append(out, m)
	}
	return out
}

// actOnVersion makes the downgrade call the decision names. A failed call changes nothing (the
// running image stays rendered while it is needed) and is retried at the next look.
func (r *Reconciler) actOnVersion(ctx context.Context, etcd *druidv1alpha1.Etcd, d versionchange.Decision) {
	if d.Action == versionchange.ActionNone || r.members == nil {
		return
	}
	target := ""
	if d.Action == versionchange.ActionEnable {
		target = d.Target.MinorString()
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := r.members.Downgrade(ctx, etcd, etcdclient.DowngradeAction(d.Action), target); err != nil {
		log.Info("etcd downgrade call failed; the members keep their version", "action", d.Action, "target", target, "error", err.Error())
		r.recorder.Eventf(etcd, corev1.EventTypeWarning, "DowngradeCallFailed", "etcd downgrade %s %s failed: %v", d.Action, target, err)
		return
	}
	// The rule's Event (recordVersion) says what was decided; a success needs no second one
	// (Events per object are rate-limited, and a rollout follows with its own).
	log.Info("etcd downgrade call made", "action", d.Action, "target", target, "rule", d.Rule, "reason", d.Reason)
}

// recordVersion sets the VersionChange condition from d once a version change has been in view:
// True while a downgrade is prepared or under way or a change is refused, False once steady, and
// False too once a downgrade whose member failed was rolled back (refused until the spec changes,
// with nothing under way). An Event marks each change of rule, a Warning for a refusal or a
// failed member.
func (r *Reconciler) recordVersion(ctx context.Context, etcd *druidv1alpha1.Etcd, d versionchange.Decision) error {
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange)
	active := (d.Downgrading || d.Refused || d.Action != versionchange.ActionNone) && !d.RolledBack
	if prev == nil && !active && !d.RolledBack {
		return nil
	}
	status := druidv1alpha1.ConditionFalse
	if active {
		status = druidv1alpha1.ConditionTrue
	}
	warning := d.Refused || d.Rule == versionchange.RuleRollForwardMemberFailed
	return r.recordChange(ctx, etcd, druidv1alpha1.ConditionTypeVersionChange, status, d.Rule, d.Reason, warning)
}

// versionWaits tells whether the decision waits on the members, so the Etcd is looked at again
// soon.
func versionWaits(d versionchange.Decision) bool {
	// The downgrade's waits (members, storage version) hold with Downgrading set.
	return d.Downgrading || d.Action != versionchange.ActionNone
}
