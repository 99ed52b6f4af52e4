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
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
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

// volumeChangeRecheck is how soon a volume change waiting for every member to be ready is looked
// at again: pods are not watched by this reconciler.
const volumeChangeRecheck = 5 * time.Second

// statefulSetGone bounds the wait for an orphaning delete of the StatefulSet to be carried out
// (the garbage collector drops the orphan finalizer at once) before it is created again.
const statefulSetGone = 20 * time.Second

// planVolumes decides the data claim template to render (internal/decide/volumechange), and returns the
// running StatefulSet the decision was made on. The claims, the member pods' mounts and the
// StorageClass are read only while a change is in view or recorded in flight (the VolumeChange
// condition True): a settled Etcd costs no read beyond the StatefulSet from the cache.
func (r *Reconciler) planVolumes(ctx context.Context, etcd *druidv1alpha1.Etcd) (volumechange.Decision, *appsv1.StatefulSet, error) {
	in := volumechange.Observed{Desired: resources.DesiredClaims(etcd), DefaultName: resources.DefaultDataVolume, DesiredReplicas: int(etcd.Spec.Replicas)}
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil {
		return volumechange.Decision{}, nil, err
	}
	if sts == nil {
		// Uncached: the cache keeps pods without their spec (memberPodView), so without their
		// volumes. A missing StatefulSet is rare (a new Etcd, or one deleted mid-change).
		pods, err := memberaccess.ReadLabelledPods(ctx, r.apiReader, etcd)
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
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVolumeChange); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		in.Recorded = c.Reason
	}
	if in.Recorded != "" || running.Class != in.Desired.Class || running.Capacity != in.Desired.Capacity {
		if err := r.observeClaims(ctx, etcd, &in); err != nil {
			return volumechange.Decision{}, nil, err
		}
	}
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

// recordVolumes sets the VolumeChange condition from d once a volume change has been in view:
// True while it is made, waits or is refused, False once done (its message naming the old claims
// kept). A decision that is neither (steady, a new Etcd, a StatefulSet created over running pods)
// leaves the condition as it is. An Event marks each change of rule.
func (r *Reconciler) recordVolumes(ctx context.Context, etcd *druidv1alpha1.Etcd, d volumechange.Decision) error {
	if !d.InFlight && !d.Done {
		return nil
	}
	status := druidv1alpha1.ConditionFalse
	if d.InFlight {
		status = druidv1alpha1.ConditionTrue
	}
	return r.recordChange(ctx, etcd, druidv1alpha1.ConditionTypeVolumeChange, status, d.Rule, d.Reason, d.Refused)
}

// recordChange sets a condition of a change the Etcd reconciler carries out (VersionChange,
// VolumeChange) to the rule's CamelCase reason and message, writing only what differs, and marks
// each change of rule with an Event (a Warning when warning), logged too.
func (r *Reconciler) recordChange(ctx context.Context, etcd *druidv1alpha1.Etcd, conditionType druidv1alpha1.ConditionType,
	status druidv1alpha1.ConditionStatus, rule ruleid.ID, message string, warning bool) error {
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, conditionType)
	reason := rule.CamelCase()
	if prev != nil && prev.Status == status && prev.Reason == reason && prev.Message == message {
		return nil
	}
	now := metav1.Now()
	c := druidv1alpha1.Condition{Type: conditionType, Status: status, Reason: reason, Message: message,
		LastTransitionTime: now, LastUpdateTime: now}
	if err := etcdstatus.Patch(ctx, r.client, etcd, etcdstatus.WriterEtcd, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, c)
	}); err != nil {
		return fmt.Errorf("recording %s: %w", conditionType, err)
	}
	if prev == nil || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if warning {
			eventType = corev1.EventTypeWarning
		}
		logr.FromContextOrDiscard(ctx).Info("Change", "condition", conditionType, "rule", rule, "reason", message)
		r.recorder.Event(etcd, eventType, reason, message)
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
