package status

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// DefaultResync is how often an Etcd is looked at again without an event: member leases expire
// with time rather than with an event. etcd-druid's controllers.etcd.etcdStatusSyncPeriod sets it.
const DefaultResync = 5 * time.Second

// Reconciler writes Etcd status.
type Reconciler struct {
	client  client.Client
	metrics *Metrics
	now     func() time.Time
	resync  time.Duration
	// unknownGrace: how long a member stays Unknown before it turns NotReady (Inputs.UnknownGrace).
	unknownGrace time.Duration
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler builds the status reconciler; metrics may be nil (no series are kept).
func NewReconciler(c client.Client, metrics *Metrics) *Reconciler {
	return &Reconciler{client: c, metrics: metrics, now: time.Now, resync: DefaultResync, unknownGrace: DefaultUnknownGrace}
}

// WithUnknownGrace sets how long a member stays Unknown (its Lease expired) before it turns
// NotReady with reason UnknownGracePeriodExceeded (DefaultUnknownGrace when d is not positive).
// etcd-druid's controllers.etcd.etcdMember.unknownThreshold sets it.
func (r *Reconciler) WithUnknownGrace(d time.Duration) *Reconciler {
	if d > 0 {
		r.unknownGrace = d
	}
	return r
}

// WithResync sets how often an Etcd is looked at again without an event (DefaultResync when d
// is not positive).
func (r *Reconciler) WithResync(d time.Duration) *Reconciler {
	if d > 0 {
		r.resync = d
	}
	return r
}

// RBAC: everything is read through the cache; only the status is written.
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch

// Reconcile reads the Etcd, its StatefulSet, pods and leases, computes the status (Compute) and
// writes the fields it owns (etcdstatus.WriterStatus) with one merge patch. It keeps the health
// and data-aside metrics at what it computed and the member Leases report, and deletes them when
// the Etcd is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	etcd := &druidv1alpha1.Etcd{}
	if err := r.client.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if takeover.Decide(etcd).Held {
		// Druid writes this status.
		return ctrl.Result{}, nil
	}
	observed, err := r.observe(ctx, etcd)
	if err != nil {
		return ctrl.Result{}, err
	}
	computed := Compute(observed)
	r.metrics.recordAside(req.NamespacedName, AsideReports(etcd, observed.Leases))
	r.metrics.record(req.NamespacedName, HealthOf(observed, computed))

	if err := etcdstatus.Patch(ctx, r.client, etcd, etcdstatus.WriterStatus, func(s *druidv1alpha1.EtcdStatus) {
		s.Members = computed.Members
		// Merged by type, keeping the order and the conditions other writers own
		// (ScaleOperationInProgress belongs to the membership controller).
		computedTypes := map[druidv1alpha1.ConditionType]bool{}
		for _, c := range computed.Conditions {
			computedTypes[c.Type] = true
			s.Conditions = etcdstatus.SetCondition(s.Conditions, c)
		}
		// A condition of this controller it computed none of now (the backup conditions, once
		// backups are turned off) goes rather than stays behind, stale.
		s.Conditions = slices.DeleteFunc(s.Conditions, func(c druidv1alpha1.Condition) bool {
			return etcdstatus.WriterStatus.OwnsCondition(c.Type) && !computedTypes[c.Type]
		})
		s.Replicas = computed.Replicas
		s.ReadyReplicas = computed.ReadyReplicas
		s.CurrentReplicas = computed.CurrentReplicas
		s.Ready = computed.Ready
		s.Selector = computed.Selector
		s.DataAside = computed.DataAside
		s.PeerUrlTLSEnabled = computed.PeerUrlTLSEnabled
		s.ClusterSize = computed.ClusterSize
	}); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer patched the Etcd after the cached copy was read: the watch event of
			// that patch brings the fresh copy. Expected while a rollout or scaling writes status
			// too, so it is no reconcile error; the requeue is in case the event came first.
			logr.FromContextOrDiscard(ctx).V(1).Info("Etcd changed since read; writing status again on the fresh copy", "error", err.Error())
			return ctrl.Result{Requeue: true, Priority: priority.For(false)}, nil
		}
		return ctrl.Result{}, err
	}
	// The resync only notices Leases expiring; changes that matter come as events, ahead of it.
	return ctrl.Result{RequeueAfter: r.resync, Priority: priority.For(false)}, nil
}

func (r *Reconciler) observe(ctx context.Context, etcd *druidv1alpha1.Etcd) (Inputs, error) {
	o := Inputs{Etcd: etcd, Now: r.now(), UnknownGrace: r.unknownGrace}
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return o, fmt.Errorf("reading StatefulSet: %w", err)
	default:
		o.StatefulSet = sts
	}
	selector := client.MatchingLabels(resources.SelectorLabels(etcd))
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(etcd.Namespace), selector); err != nil {
		return o, fmt.Errorf("listing member pods: %w", err)
	}
	o.Pods = pods.Items
	leases := &coordinationv1.LeaseList{}
	if err := r.client.List(ctx, leases, client.InNamespace(etcd.Namespace), selector); err != nil {
		return o, fmt.Errorf("listing member leases: %w", err)
	}
	o.Leases = resources.ControlledLeases(etcd, leases.Items)
	if resources.BackupEnabled(etcd) {
		snapLeases := &coordinationv1.LeaseList{}
		if err := r.client.List(ctx, snapLeases, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SnapshotLeaseLabels(etcd))); err != nil {
			return o, fmt.Errorf("listing snapshot leases: %w", err)
		}
		controlled := resources.ControlledLeases(etcd, snapLeases.Items)
		o.FullSnapshotLease = snapshotLease(controlled, memberlease.FullSnapshotLeaseName(etcd))
		o.DeltaSnapshotLease = snapshotLease(controlled, memberlease.DeltaSnapshotLeaseName(etcd))
	}
	return o, nil
}
