package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

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
func ObserveVersionMembers(in versionchange.Observed, cs memberaccess.ClusterStatus, pods []corev1.Pod, now time.Time, grace time.Duration) versionchange.Observed {
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
func versionMembers(cs memberaccess.ClusterStatus) []versionchange.Member {
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

// actOnVersion makes the downgrade call the decision names, through the leader the members named
// when asked this pass. A failed call changes nothing (the running image stays rendered while it
// is needed) and is retried at the next look.
func (r *Reconciler) actOnVersion(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d versionchange.Decision) {
	if d.Action == versionchange.ActionNone || o.members == nil {
		return
	}
	target := ""
	if d.Action == versionchange.ActionEnable {
		target = d.Target.MinorString()
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := o.members.Downgrade(ctx, o.status, memberaccess.DowngradeAction(d.Action), target); err != nil {
		log.Info("etcd downgrade call failed; the members keep their version", "action", d.Action, "target", target, "error", err.Error())
		r.recorder.Eventf(etcd, corev1.EventTypeWarning, "DowngradeCallFailed", "etcd downgrade %s %s failed: %v", d.Action, target, err)
		return
	}
	// The rule's Event (recordChange) says what was decided; a success needs no second one
	// (Events per object are rate-limited, and a rollout follows with its own).
	log.Info("etcd downgrade call made", "action", d.Action, "target", target, "rule", d.Rule, "reason", d.Reason)
}
