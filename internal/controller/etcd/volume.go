package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/volumechange"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=delete

// volumeChangeRecheck is how soon a volume change waiting for every member to be ready is looked
// at again: pods are not watched by this reconciler.
const volumeChangeRecheck = 5 * time.Second

// statefulSetGone bounds the wait for an orphaning delete of the StatefulSet to be carried out
// (the garbage collector drops the orphan finalizer at once) before it is created again.
const statefulSetGone = 20 * time.Second

// planVolumes decides the data claim template to render (internal/volumechange), and returns the
// running StatefulSet the decision was made on.
func (r *Reconciler) planVolumes(ctx context.Context, etcd *druidv1alpha1.Etcd) (volumechange.Decision, *appsv1.StatefulSet, error) {
	in := volumechange.Observed{Desired: resources.DesiredClaims(etcd), DefaultName: resources.DefaultDataVolume, Replicas: int(etcd.Spec.Replicas)}
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil {
		return volumechange.Decision{}, nil, err
	}
	if sts == nil {
		pods, err := memberaccess.ReadLabelledPods(ctx, r.client, etcd)
		if err != nil {
			return volumechange.Decision{}, nil, err
		}
		in.PodClaims = resources.PodClaims(pods)
		return volumechange.Plan(in), nil, nil
	}
	running, ok := resources.RunningClaims(sts)
	if !ok {
		// Not a claim template of ours to change: rendered as created.
		return volumechange.Decision{Name: resources.DefaultDataVolume, Rule: volumechange.RuleSteady, Reason: "no single claim template"}, sts, nil
	}
	in.Running = &running
	ready := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersReady)
	in.Ready = ready != nil && ready.Status == druidv1alpha1.ConditionTrue &&
		ptr.Deref(sts.Spec.Replicas, 0) == etcd.Spec.Replicas && sts.Status.ReadyReplicas == etcd.Spec.Replicas
	in.LeaderOrdinal = -1
	d := volumechange.Plan(in)
	if d.Rule != volumechange.RuleWaitLeader || r.members == nil {
		return d, sts, nil
	}
	// The change can be made: which member leads decides whether leadership moves first.
	cs, err := r.members.Statuses(ctx, etcd)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Info("Cannot ask the members who leads; the volume change waits", "error", err.Error())
		return d, sts, nil
	}
	if leader, ok := cs.Leader(); ok {
		// The pool names members by their pods.
		if ordinal, ok := resources.OrdinalOf(etcd, leader.Name); ok {
			in.LeaderOrdinal = ordinal
		}
	}
	return volumechange.Plan(in), sts, nil
}

// moveLeaderFirst hands leadership to the ordinal the volume change wants last; a failure leaves
// everything as it is until the next look.
func (r *Reconciler) moveLeaderFirst(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, d volumechange.Decision) {
	if d.MoveLeaderTo < 0 || r.members == nil || sts == nil {
		return
	}
	to := resources.PodName(etcd, d.MoveLeaderTo)
	if err := r.members.MoveLeader(ctx, etcd, to); err != nil {
		logr.FromContextOrDiscard(ctx).Info("Moving leadership for the volume change failed; trying again", "to", to, "error", err.Error())
	}
}

// reportVolumes says that a volume change is under way (it happens once), or, once per spec
// generation, that it waits for the members (a refused one is the Etcd's error, ERR_VOLUME_CHANGE).
func (r *Reconciler) reportVolumes(ctx context.Context, etcd *druidv1alpha1.Etcd, d volumechange.Decision) {
	if !d.Recreate && (!d.Waiting || generationReported(etcd)) {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("Volume change", "rule", d.Rule, "reason", d.Reason)
	r.recorder.Event(etcd, corev1.EventTypeNormal, d.Rule.CamelCase(), d.Reason)
}

// recreateStatefulSet deletes sts without its pods and waits until it is gone, so that the sync
// creates it again at once with the new claim template: the pods are adopted by it, outdated, and
// the rollout moves them to the new claims one at a time. The delete is conditional on sts's UID,
// so a StatefulSet created meanwhile by someone else is never the one deleted.
func (r *Reconciler) recreateStatefulSet(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) error {
	err := r.client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &sts.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the StatefulSet without its pods for a volume change: %w", err)
	}
	key := client.ObjectKeyFromObject(sts)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, statefulSetGone, true, func(ctx context.Context) (bool, error) {
		err := r.client.Get(ctx, key, &appsv1.StatefulSet{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if err != nil {
		// The next reconcile finds the pods without a StatefulSet and creates it with the claims
		// they mount (volume/claims-of-running-pods), then tries the change again.
		return fmt.Errorf("waiting for the StatefulSet %s to be gone: %w", key, err)
	}
	return nil
}
