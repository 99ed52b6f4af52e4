package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/render"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=delete
// Claims are listed uncached, and only during a volume change (no informer: the operator does
// not need them otherwise); patch raises a claim's request to grow it in place.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;patch
// Whether a StorageClass allows volume expansion; read uncached, only for a growth of capacity.
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// statefulSetGone bounds the wait for an orphaning delete of the StatefulSet to be carried out
// (the garbage collector drops the orphan finalizer at once) before it is created again.
const statefulSetGone = 20 * time.Second

// observeVolumes is what internal/decide/volumechange decides on, from the running StatefulSet
// sts (ObserveVolumes). The claims, the member pods' mounts and the StorageClass are read only
// while a change is in view or recorded in flight (the VolumeChange condition True): a settled
// Etcd costs no read beyond the StatefulSet from the cache. Which member leads is the members' to
// say (observe).
func (r *Reconciler) observeVolumes(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (volumechange.Observed, error) {
	var pods []corev1.Pod
	if sts == nil {
		// Uncached: the cache keeps pods without their spec (memberPodView), so without their
		// volumes. A missing StatefulSet is rare (a new Etcd, or one deleted mid-change).
		var err error
		if pods, err = memberaccess.ReadLabelledPods(ctx, r.apiReader, etcd); err != nil {
			return volumechange.Observed{}, err
		}
	}
	in, inView := ObserveVolumes(etcd, sts, pods)
	if inView {
		if err := r.observeClaims(ctx, etcd, &in); err != nil {
			return volumechange.Observed{}, err
		}
	}
	return in, nil
}

// ObserveVolumes is what internal/decide/volumechange decides on from the Etcd, its StatefulSet
// (nil: none) and, without one, the Etcd's labelled pods (the claims they mount); and whether a
// change is in view or recorded in flight, whose claims, pods' mounts and StorageClass are then
// needed too (observeClaims). The plan command observes the same way.
func ObserveVolumes(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pods []corev1.Pod) (volumechange.Observed, bool) {
	in := volumechange.Observed{Desired: resources.DesiredClaims(etcd), DefaultName: resources.DefaultDataVolume,
		DesiredReplicas: int(etcd.Spec.Replicas), LeaderOrdinal: -1}
	if sts == nil {
		in.PodClaims = resources.PodClaims(pods)
		return in, false
	}
	running, ok := resources.RunningClaims(sts)
	if !ok {
		// Not a claim template of ours to change: rendered as created.
		in.NotSingle = true
		return in, false
	}
	in.Running = &running
	ready := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersReady)
	in.Ready = ready != nil && ready.Status == druidv1alpha1.ConditionTrue &&
		ptr.Deref(sts.Spec.Replicas, 0) == etcd.Spec.Replicas && sts.Status.ReadyReplicas == etcd.Spec.Replicas
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVolumeChange); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		in.Recorded = c.Reason
	}
	return in, in.Recorded != "" || running.Class != in.Desired.Class || running.Capacity != in.Desired.Capacity
}

// observeClaims reads what a volume change is followed on, all uncached and only during a change:
// the Etcd's data claims (the operator keeps no informer on claims), the claim template each
// member pod mounts (the cache holds pods without their spec) and the running claims'
// StorageClass (cluster-scoped).
func (r *Reconciler) observeClaims(ctx context.Context, etcd *druidv1alpha1.Etcd, in *volumechange.Observed) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.apiReader.List(ctx, claims, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return fmt.Errorf("listing the data claims for a volume change: %w", err)
	}
	// The class the claims were made with: for claims that named none, the default class the
	// apiserver wrote into them.
	class := in.Running.Class
	for _, c := range claims.Items {
		template, pod, ok := resources.ClaimOf(etcd, c.Name)
		if !ok {
			continue
		}
		requested, capacity := c.Spec.Resources.Requests[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
		claim := volumechange.Claim{Name: c.Name, Template: template, Pod: pod, Requested: requested.String(), Resizing: resizing(c),
			Bound: c.Status.Phase == corev1.ClaimBound}
		if _, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
			claim.Capacity = capacity.String()
		}
		in.Claims = append(in.Claims, claim)
		if template == in.Running.Name && c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
	}
	// Uncached too: the cache keeps pods without their spec, so without their volumes.
	pods, err := memberaccess.ReadLabelledPods(ctx, r.apiReader, etcd)
	if err != nil {
		return err
	}
	in.Mounted = resources.MountedClaims(pods)
	in.Members = resources.PodNames(etcd)
	in.Class = volumechange.Class{Name: class}
	if class == "" {
		return nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
		// Taken as not allowing expansion (the reason says so): the members move instead, as
		// for any class without it.
		in.Class.Err = err.Error()
		return nil
	}
	in.Class.Read, in.Class.AllowExpansion = true, ptr.Deref(sc.AllowVolumeExpansion, false)
	return nil
}

// resizing names a claim's resize conditions that are True, for the reason of a wait.
func resizing(c corev1.PersistentVolumeClaim) string {
	var out []string
	for _, cond := range c.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			out = append(out, string(cond.Type))
		}
	}
	return strings.Join(out, ", ")
}

// expandClaims raises the request of each claim d names to d.ExpandTo, before the StatefulSet is
// created again with that size. The apiserver lets a bound claim grow only when its class allows
// expansion (admission PersistentVolumeClaimResize): a refusal is returned, and nothing else has
// changed yet. A merge patch of the one field: idempotent, and no other field is touched.
func (r *Reconciler) expandClaims(ctx context.Context, etcd *druidv1alpha1.Etcd, d volumechange.Decision) error {
	if len(d.Expand) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": d.ExpandTo}}}})
	if err != nil {
		return fmt.Errorf("building the claim resize patch: %w", err)
	}
	for _, name := range d.Expand {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: name}}
		if err := r.client.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("growing claim %s to %s: %w", name, d.ExpandTo, err)
		}
		logr.FromContextOrDiscard(ctx).Info("Claim request raised", "claim", name, "size", d.ExpandTo)
	}
	return nil
}

// moveLeaderFirst hands leadership to the ordinal the volume change wants last, through the
// leader the members named this pass; a failure leaves everything as it is until the next look.
func (r *Reconciler) moveLeaderFirst(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d volumechange.Decision) {
	if d.MoveLeaderTo < 0 || o.members == nil || o.status == nil || o.sts == nil {
		return
	}
	to := resources.PodName(etcd, d.MoveLeaderTo)
	if err := moveLeaderTo(ctx, o.members, o.status, to); err != nil {
		logr.FromContextOrDiscard(ctx).Info("Moving leadership for the volume change failed; trying again", "to", to, "error", err.Error())
	}
}

// moveLeaderTo hands leadership to the member of pod to, from the leader of cs; nothing when that
// member leads already.
func moveLeaderTo(ctx context.Context, members *memberaccess.Cluster, cs *memberaccess.ClusterStatus, to string) error {
	leader, ok := cs.Leader()
	if !ok {
		return memberaccess.ErrNoLeader
	}
	for _, m := range cs.Members {
		switch {
		case m.Name != to:
		case !m.Reachable:
			return fmt.Errorf("moving leadership: %s did not answer", to)
		case m.Name == leader.Name:
			return nil
		default:
			return members.MoveLeader(ctx, leader.Name, m.ID)
		}
	}
	return fmt.Errorf("moving leadership: %s is not among the members asked", to)
}

// recordChange sets the condition of a change the Etcd reconciler carries out (VersionChange,
// VolumeChange, TrustChange) as internal/decide/render says, to the rule's CamelCase reason and
// message, writing only what differs, and marks each change of rule with an Event (a Warning when
// c.Warning), logged too.
func (r *Reconciler) recordChange(ctx context.Context, etcd *druidv1alpha1.Etcd, c render.Change) error {
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, c.Condition)
	reason := c.Rule.CamelCase()
	if prev != nil && prev.Status == c.Status && prev.Reason == reason && prev.Message == c.Reason {
		return nil
	}
	now := metav1.Now()
	cond := druidv1alpha1.Condition{Type: c.Condition, Status: c.Status, Reason: reason, Message: c.Reason,
		LastTransitionTime: now, LastUpdateTime: now}
	if err := etcdstatus.Patch(ctx, r.client, etcd, etcdstatus.WriterEtcd, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, cond)
	}); err != nil {
		return fmt.Errorf("recording %s: %w", c.Condition, err)
	}
	if prev == nil || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if c.Warning {
			eventType = corev1.EventTypeWarning
		}
		logr.FromContextOrDiscard(ctx).Info("Change", "condition", c.Condition, "rule", c.Rule, "reason", c.Reason)
		r.recorder.Event(etcd, eventType, reason, c.Reason)
	}
	return nil
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
