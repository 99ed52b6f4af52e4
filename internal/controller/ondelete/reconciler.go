// Package ondelete holds the OnDelete controller (DEP-07): for StatefulSets owned by an Etcd and
// running with the OnDelete update strategy it deletes at most one outdated pod per reconcile, in
// the order internal/rollout decides, learning member roles from the members themselves.
package ondelete

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// MemberClient is the part of the member client pool the controller uses.
type MemberClient interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error)
	// Forget closes a cluster's cached connections.
	Forget(cluster string)
}

// Config holds the controller's dependencies and settings.
type Config struct {
	// Client writes (pod deletes, Etcd status); Reader reads StatefulSets and pods uncached, so
	// every decision is made on what the apiserver holds now, not on a lagging informer.
	Client   client.Client
	Reader   client.Reader
	Recorder record.EventRecorder
	Members  MemberClient
	Metrics  *Metrics
	// RoleSource is Auto (ask the members, fall back to leases) or LeaseOnly.
	RoleSource roles.Mode
	// DefaultClientTLS loads the operator-wide client key pair, used for Etcds that name none.
	DefaultClientTLS func() (conductortls.ClientMaterial, error)
	// RequeueInterval is how soon a waiting rollout is looked at again.
	RequeueInterval time.Duration
}

// Reconciler is the OnDelete controller.
type Reconciler struct {
	cfg Config
	now func() time.Time
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.RequeueInterval == 0 {
		cfg.RequeueInterval = 5 * time.Second
	}
	return &Reconciler{cfg: cfg, now: time.Now}
}

// RBAC: the StatefulSet, pods and leases are read fresh (get, list) and watched through the cache;
// the Etcd is read from the cache; the client key pair is read uncached from its Secrets (get
// only, never listed); one pod at a time is deleted.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile runs one step of a quorum-safe rollout:
//  1. read the StatefulSet, its owning Etcd, its pods and the member leases (all fresh);
//  2. resolve member roles (members over mTLS, cross-checked with leases; see internal/roles);
//  3. plan (internal/rollout) and carry out the decision: delete at most one pod, with UID and
//     resourceVersion preconditions, or wait;
//  4. report: an Event when the decision changes, status.lastOperation, metrics.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := r.now()
	log := logr.FromContextOrDiscard(ctx)

	sts := &appsv1.StatefulSet{}
	if err := r.cfg.Reader.Get(ctx, req.NamespacedName, sts); err != nil {
		if apierrors.IsNotFound(err) {
			// The StatefulSet is named after its Etcd: drop the cluster's member connections.
			r.cfg.Members.Forget(clusterKey(req.Namespace, req.Name))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isManagedOnDelete(sts) {
		r.cfg.Members.Forget(clusterKey(req.Namespace, req.Name))
		return ctrl.Result{}, nil
	}
	etcd, err := r.owningEtcd(ctx, sts)
	if err != nil || etcd == nil {
		return ctrl.Result{}, err
	}
	if membership.ScaleInProgress(etcd) {
		// One change at a time: the membership controller yields to a rollout between its steps.
		log.V(1).Info("Membership change in progress; not replacing pods now")
		return ctrl.Result{RequeueAfter: r.cfg.RequeueInterval}, nil
	}
	pods, err := r.memberPods(ctx, sts)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Roles only matter when a participating pod is to be chosen; a plan without them tells
	// whether that is the case, so a settled cluster costs no member traffic.
	observed := rollout.Observe(sts, pods, nil)
	decision := rollout.Plan(observed)
	resolution := roles.Resolution{Source: roles.SourceNone}
	if needsRoles(decision) {
		leases := &coordinationv1.LeaseList{}
		if err := r.cfg.Reader.List(ctx, leases, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing member leases: %w", err)
		}
		resolution = r.resolveRoles(ctx, etcd, pods, resources.ControlledLeases(etcd, leases.Items))
		decision = rollout.Plan(rollout.Observe(sts, pods, resolution.Roles))
	}
	r.cfg.Metrics.DecisionLatency.Observe(r.now().Sub(start).Seconds())
	r.cfg.Metrics.OutdatedPods.WithLabelValues(etcd.Namespace, etcd.Name).Set(float64(countOutdated(observed)))

	log.V(1).Info("Rollout decision", "action", decision.Action, "rule", decision.Rule, "pods", decision.Pods,
		"reason", decision.Reason, "roleSource", resolution.Source)

	result := ctrl.Result{}
	switch decision.Action {
	case rollout.ActionDelete:
		if err := r.deletePod(ctx, pods, decision); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// The pod changed or went since we read it: decide again on fresh state.
				log.Info("Pod changed before deletion; deciding again", "pod", decision.Pods, "error", err.Error())
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
		r.cfg.Metrics.Deletions.WithLabelValues(string(decision.Rule)).Inc()
		result.RequeueAfter = r.cfg.RequeueInterval
	case rollout.ActionWait:
		r.cfg.Metrics.Waits.WithLabelValues(string(decision.Rule)).Inc()
		result.RequeueAfter = r.cfg.RequeueInterval
	}
	if err := r.report(ctx, etcd, sts, decision, resolution); err != nil {
		return result, err
	}
	return result, nil
}

// clusterKey names an Etcd's connections in the member client pool. The StatefulSet shares the
// Etcd's name, so it can be derived from either.
func clusterKey(namespace, etcdName string) string { return namespace + "/" + etcdName }

func needsRoles(d rollout.Decision) bool {
	switch d.Rule {
	case rollout.RuleParticipatingFollower, rollout.RuleParticipatingUnknownRole, rollout.RuleParticipatingLeader:
		return true
	}
	return false
}

// isManagedOnDelete is the controller's predicate: owned by an Etcd and set to OnDelete.
func isManagedOnDelete(sts *appsv1.StatefulSet) bool {
	return sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType && etcdOwner(sts) != nil
}

func etcdOwner(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Etcd" || ref.APIVersion != druidv1alpha1.GroupVersion.String() {
		return nil
	}
	return ref
}

func (r *Reconciler) owningEtcd(ctx context.Context, sts *appsv1.StatefulSet) (*druidv1alpha1.Etcd, error) {
	ref := etcdOwner(sts)
	etcd := &druidv1alpha1.Etcd{}
	if err := r.cfg.Client.Get(ctx, types.NamespacedName{Namespace: sts.Namespace, Name: ref.Name}, etcd); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if etcd.UID != ref.UID {
		return nil, nil
	}
	return etcd, nil
}

func (r *Reconciler) memberPods(ctx context.Context, sts *appsv1.StatefulSet) ([]corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("parsing selector of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	list := &corev1.PodList{}
	if err := r.cfg.Reader.List(ctx, list, client.InNamespace(sts.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing pods of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	var owned []corev1.Pod
	for _, pod := range list.Items {
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == sts.UID {
			owned = append(owned, pod)
		}
	}
	return owned, nil
}

func countOutdated(o rollout.Observed) int {
	n := 0
	for _, p := range o.Pods {
		if rollout.IsOutdated(p, o.UpdateRevision) {
			n++
		}
	}
	return n
}

// deletePod deletes the one pod of the decision. The preconditions make the delete fail if the
// pod was replaced or changed since it was planned on.
func (r *Reconciler) deletePod(ctx context.Context, pods []corev1.Pod, d rollout.Decision) error {
	if len(d.Pods) != 1 {
		return fmt.Errorf("planner returned %d pods to delete; exactly one is allowed", len(d.Pods))
	}
	var pod *corev1.Pod
	for i := range pods {
		if pods[i].Name == d.Pods[0] {
			pod = &pods[i]
		}
	}
	if pod == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), d.Pods[0])
	}
	uid, rv := pod.UID, pod.ResourceVersion
	err := r.cfg.Client.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted outdated pod", "pod", pod.Name, "rule", d.Rule, "reason", d.Reason)
	return nil
}

// resolveRoles asks the members (unless configured LeaseOnly) and cross-checks with the leases.
func (r *Reconciler) resolveRoles(ctx context.Context, etcd *druidv1alpha1.Etcd, pods []corev1.Pod, leases []coordinationv1.Lease) roles.Resolution {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	var reports []roles.MemberReport
	var queryErr error
	mode := r.cfg.RoleSource
	if mode != roles.ModeLeaseOnly {
		reports, queryErr = r.queryMembers(ctx, etcd, pods)
		if queryErr != nil {
			logr.FromContextOrDiscard(ctx).Info("Could not ask the members who leads; using member leases", "error", queryErr.Error())
		}
	}
	res := roles.Resolve(names, reports, leases, mode, r.now())
	if queryErr != nil {
		// Shown in the AllMembersUpdated message, so a TLS problem is visible where users look.
		res.Detail = fmt.Sprintf("members not asked: %v; %s", queryErr, res.Detail)
	}
	r.cfg.Metrics.RoleSource.WithLabelValues(string(res.Source)).Inc()
	if res.Mismatch {
		r.cfg.Metrics.RoleMismatches.WithLabelValues(etcd.Namespace, etcd.Name).Inc()
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, "LeaderMismatch", res.Detail)
	}
	return res
}

func (r *Reconciler) queryMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, pods []corev1.Pod) ([]roles.MemberReport, error) {
	creds, err := memberaccess.ClientTLS(ctx, r.cfg.Reader, etcd, r.cfg.DefaultClientTLS)
	if err != nil {
		r.cfg.Metrics.MemberClientErrors.WithLabelValues("tls").Inc()
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, "MemberClientTLSInvalid",
			fmt.Sprintf("cannot build the member client TLS configuration, falling back to member leases: %v", err))
		return nil, err
	}
	targets := memberaccess.Targets(etcd, pods)
	if len(targets) == 0 {
		return nil, fmt.Errorf("no member pod has an address")
	}
	cs, err := r.cfg.Members.Query(ctx, clusterKey(etcd.Namespace, etcd.Name), creds, targets)
	if err != nil {
		r.cfg.Metrics.MemberClientErrors.WithLabelValues("unreachable").Inc()
		return nil, err
	}
	return roles.ReportsFromClusterStatus(cs), nil
}

// report records the decision: status.lastOperation (which the status controller shows in the
// AllMembersUpdated message) and, when the decision changed, an Event on the Etcd.
func (r *Reconciler) report(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, d rollout.Decision, res roles.Resolution) error {
	description := fmt.Sprintf("%s [%s]", d.Reason, d.Rule)
	switch {
	case res.Source == roles.SourceDirect && d.Action == rollout.ActionDelete:
		description += " (roles: direct)"
	case res.Source != roles.SourceDirect && needsRoles(d):
		description += fmt.Sprintf(" (roles: %s: %s)", res.Source, res.Detail)
	}
	state := "Processing"
	if d.Action == rollout.ActionDone {
		state = "Succeeded"
	}
	prev := etcd.Status.LastOperation
	changed := prev == nil || prev.Type != status.OperationRollout || prev.RunID != sts.Status.UpdateRevision ||
		prev.Description != description || prev.State != state
	if !changed && d.Action != rollout.ActionDelete {
		return nil
	}
	if changed || d.Action == rollout.ActionDelete {
		eventType := corev1.EventTypeNormal
		if d.Rule == rollout.RuleOutOfBounds {
			eventType = corev1.EventTypeWarning
		}
		r.cfg.Recorder.Event(etcd, eventType, d.Rule.ConditionReason(), description)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Status.LastOperation = &druidv1alpha1.LastOperation{
		Type:           status.OperationRollout,
		State:          state,
		Description:    description,
		RunID:          sts.Status.UpdateRevision,
		LastUpdateTime: metav1.NewTime(r.now()),
	}
	if err := r.cfg.Client.Status().Patch(ctx, etcd, patch); err != nil {
		return fmt.Errorf("recording rollout decision on Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return nil
}
