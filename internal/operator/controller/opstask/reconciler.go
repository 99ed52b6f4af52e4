package opstask

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/opstask"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Config holds the controller's dependencies.
type Config struct {
	Client client.Client
	// Reader lists the namespace's tasks uncached at admission, so that one admitted a moment
	// ago counts (nil: Client).
	Reader client.Reader
	// Recorder, when set, gets an Event for every state transition.
	Recorder record.EventRecorder
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// Reconciler carries out EtcdOpsTasks.
type Reconciler struct {
	cfg Config
}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Reader == nil {
		cfg.Reader = cfg.Client
	}
	return &Reconciler{cfg: cfg}
}

// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcdopstasks,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcdopstasks/status,verbs=update
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile reads, decides, acts and records one step of a task.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	observed, err := r.observe(ctx, req.NamespacedName)
	if err != nil || observed == nil || takeover.Decide(observed.Etcd).Held {
		// A task of an Etcd druid manages is druid's to carry out.
		return ctrl.Result{}, err
	}
	d := opstask.Decide(*observed)
	task := &observed.Task
	log.V(1).Info("EtcdOpsTask step", "rule", d.Rule, "action", d.Action, "reason", d.Reason)
	switch d.Action {
	case opstask.ActionTransition:
		updated := task.DeepCopy()
		updated.Status = opstask.NextStatus(task.Status, d, observed.Now)
		if err := r.cfg.Client.Status().Update(ctx, updated); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording EtcdOpsTask %s %s (%s): %w", req.NamespacedName, d.State, d.Rule, err)
		}
		log.Info("EtcdOpsTask "+string(d.State), "rule", d.Rule, "reason", d.Reason)
		r.event(task, d)
		// The next step follows from the update's watch event; a requeue covers a missed one.
		return ctrl.Result{RequeueAfter: opstask.Poll}, nil
	case opstask.ActionRequest:
		if err := r.request(ctx, observed.Etcd, task, d); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("On-demand snapshot requested", "rule", d.Rule, "annotation", d.LeaseAnnotation, "request", d.Request)
	case opstask.ActionDelete:
		uid := task.UID
		if err := r.cfg.Client.Delete(ctx, task, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting EtcdOpsTask %s after its TTL: %w", req.NamespacedName, err)
		}
		log.Info("EtcdOpsTask deleted", "rule", d.Rule, "reason", d.Reason)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
}

// observe reads what the planner decides on; nil when the task is gone.
func (r *Reconciler) observe(ctx context.Context, key types.NamespacedName) (*opstask.Observed, error) {
	c := r.cfg.Client
	o := &opstask.Observed{Now: r.cfg.Now()}
	if err := c.Get(ctx, key, &o.Task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading EtcdOpsTask %s: %w", key, err)
	}
	if o.Task.DeletionTimestamp != nil {
		return nil, nil
	}
	// The other tasks count only at admission.
	if s := o.Task.Status.State; s == nil || *s == druidv1alpha1.TaskStatePending {
		var tasks druidv1alpha1.EtcdOpsTaskList
		if err := r.cfg.Reader.List(ctx, &tasks, client.InNamespace(key.Namespace)); err != nil {
			return nil, fmt.Errorf("listing the EtcdOpsTasks of namespace %s: %w", key.Namespace, err)
		}
		o.Others = tasks.Items
	}
	if name := o.Task.Spec.EtcdName; name != nil && *name != "" {
		etcd := &druidv1alpha1.Etcd{}
		switch err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: *name}, etcd); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading Etcd %s/%s of EtcdOpsTask %s: %w", key.Namespace, *name, key.Name, err)
		case etcd.DeletionTimestamp == nil:
			o.Etcd, o.BackupEnabled = etcd, resources.BackupEnabled(etcd)
		}
	}
	if o.Etcd != nil {
		lease := &coordinationv1.Lease{}
		switch err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: leaseName(o.Etcd, &o.Task)}, lease); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading the snapshot Lease of EtcdOpsTask %s: %w", key, err)
		default:
			record := memberlease.ParseSnapshotLease(lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Annotations)
			o.Lease = &record
		}
	}
	return o, nil
}

func leaseName(etcd *druidv1alpha1.Etcd, task *druidv1alpha1.EtcdOpsTask) string {
	if opstask.Kind(task) == druidv1alpha1.OnDemandSnapshotTypeDelta {
		return memberlease.DeltaSnapshotLeaseName(etcd)
	}
	return memberlease.FullSnapshotLeaseName(etcd)
}

// request writes the task's request on the snapshot Lease (a merge patch of one annotation).
func (r *Reconciler) request(ctx context.Context, etcd *druidv1alpha1.Etcd, task *druidv1alpha1.EtcdOpsTask, d opstask.Decision) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{d.LeaseAnnotation: d.Request}}})
	if err != nil {
		return fmt.Errorf("encoding the snapshot request: %w", err)
	}
	lease := &coordinationv1.Lease{}
	lease.Namespace, lease.Name = etcd.Namespace, leaseName(etcd, task)
	if err := r.cfg.Client.Patch(ctx, lease, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("writing the snapshot request of EtcdOpsTask %s/%s on Lease %s: %w", task.Namespace, task.Name, lease.Name, err)
	}
	return nil
}

func (r *Reconciler) event(task *druidv1alpha1.EtcdOpsTask, d opstask.Decision) {
	if r.cfg.Recorder == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if d.ErrorCode != "" {
		kind = corev1.EventTypeWarning
	}
	r.cfg.Recorder.Event(task, kind, d.Rule.CamelCase(), d.Reason)
}
