package copytask

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/copytask"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupcopy"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Config holds the controller's dependencies.
type Config struct {
	// Client reads the tasks and writes their status.
	Client client.Client
	// Secrets reads the stores' Secrets, uncached: the manager watches no Secret (nil: Client).
	Secrets client.Reader
	// Recorder, when set, gets an Event for every step.
	Recorder record.EventRecorder
	// Now is the clock (tests replace it).
	Now func() time.Time
	// Backoff bounds the retries of one store call in a copy (zero: backupstore.DefaultBackoff).
	Backoff backupstore.Backoff
	// Copies is how many copies run at once (0: 1); CopyPoll how often a task whose copy runs is
	// looked at again (0: DefaultCopyPoll).
	Copies   int
	CopyPoll time.Duration
	// Limits bound each copy (the largest object it takes).
	Limits backupcopy.Limits
	// Reach is where the stores the tasks name may be.
	Reach backupstore.Reach
	// OpenStore opens a store (nil: backupstore.New; tests wrap what it opens).
	OpenStore func(backupstore.Config) (backupstore.Store, error)
}

// DefaultCopyPoll is how often a task whose copy runs is looked at again.
const DefaultCopyPoll = 2 * time.Second

// Reconciler carries out EtcdCopyBackupsTasks.
type Reconciler struct {
	cfg    Config
	copies *copies
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Secrets == nil {
		cfg.Secrets = cfg.Client
	}
	if cfg.Backoff.Attempts == 0 {
		cfg.Backoff = backupstore.DefaultBackoff
	}
	if cfg.CopyPoll == 0 {
		cfg.CopyPoll = DefaultCopyPoll
	}
	if cfg.OpenStore == nil {
		cfg.OpenStore = backupstore.New
	}
	return &Reconciler{cfg: cfg, copies: newCopies(cfg.Copies)}
}

// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcdcopybackupstasks,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcdcopybackupstasks/status,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile takes one step of a task: observe (the task, its stores, the source's newest full
// snapshot while waiting for the final one), plan, copy when the plan says so and plan again with
// the outcome, record.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	task := &druidv1alpha1.EtcdCopyBackupsTask{}
	if err := r.cfg.Client.Get(ctx, req.NamespacedName, task); err != nil {
		if apierrors.IsNotFound(err) {
			r.copies.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading EtcdCopyBackupsTask %s: %w", req.NamespacedName, err)
	}
	if task.DeletionTimestamp != nil {
		r.copies.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	o, stores, err := r.observe(ctx, task)
	if err != nil {
		// A failed read is retried with the work queue's backoff; status.lastError says why
		// meanwhile, as etcd-druid records its reconcile errors there.
		r.recordError(ctx, task, err)
		return ctrl.Result{}, err
	}
	d := copytask.Plan(o)
	log.V(1).Info("EtcdCopyBackupsTask step", "rule", d.Rule, "action", d.Action, "message", d.Message)
	if d.Action == copytask.ActionNone {
		return ctrl.Result{}, nil
	}
	if d.Action != copytask.ActionCopy {
		// A copy the plan no longer asks for (the task finished or failed meanwhile) is dropped.
		r.copies.forget(req.NamespacedName)
	}
	if d.Action == copytask.ActionCopy {
		job := r.copies.job(req.NamespacedName, task.UID, task.Generation)
		if job == nil {
			f := filter(task, o.Now)
			if !r.copies.start(req.NamespacedName, task.UID, task.Generation, func(ctx context.Context) (backupcopy.Result, error) {
				return backupcopy.Run(ctx, stores.source, stores.target, f, r.cfg.Limits, r.cfg.Backoff, log)
			}) {
				log.V(1).Info("Every copy slot is taken; the task waits for one", "slots", r.cfg.Copies)
				return ctrl.Result{RequeueAfter: r.cfg.CopyPoll}, nil
			}
			r.event(task, corev1.EventTypeNormal, d)
			log.Info("Copying backups", "rule", d.Rule, "source", stores.source.String(), "target", stores.target.String())
			return ctrl.Result{RequeueAfter: r.cfg.CopyPoll}, nil
		}
		if !job.finished() {
			return ctrl.Result{RequeueAfter: r.cfg.CopyPoll}, nil
		}
		r.copies.forget(req.NamespacedName)
		o.Copy = &copytask.CopyOutcome{Summary: job.res.String()}
		if job.err != nil {
			o.Copy.Err, o.Copy.Permanent = job.err.Error(), backupcopy.Permanent(job.err)
		}
		o.Now = r.cfg.Now()
		d = copytask.Plan(o)
	}
	if err := r.record(ctx, task, o, d); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
}

// opened are a task's two stores, open.
type opened struct {
	source, target backupstore.Store
}

// observe reads what the planner decides on. The stores are opened unless the task finished;
// a spec or Secret they cannot be opened from is a problem for the planner, a failed read of the
// apiserver an error (the reconcile is retried).
func (r *Reconciler) observe(ctx context.Context, task *druidv1alpha1.EtcdCopyBackupsTask) (copytask.Observed, opened, error) {
	o := copytask.Observed{
		Generation: task.Generation, Created: task.CreationTimestamp.Time, Conditions: task.Status.Conditions, Now: r.cfg.Now(),
	}
	if w := task.Spec.WaitForFinalSnapshot; w != nil && w.Enabled {
		o.WaitForFinal = true
		if w.Timeout != nil {
			o.WaitTimeout = w.Timeout.Duration
		}
	}
	var s opened
	if copytask.Finished(task.Status.Conditions) {
		return o, s, nil
	}
	srcCfg, srcProblem, err := r.storeConfig(ctx, task.Namespace, task.Spec.SourceStore)
	if err != nil {
		return o, s, err
	}
	dstCfg, dstProblem, err := r.storeConfig(ctx, task.Namespace, task.Spec.TargetStore)
	if err != nil {
		return o, s, err
	}
	o.SourceProblem, o.TargetProblem = srcProblem, dstProblem
	if srcProblem == "" {
		if s.source, err = r.cfg.OpenStore(srcCfg); err != nil {
			o.SourceProblem = err.Error()
		}
	}
	if dstProblem == "" {
		if s.target, err = r.cfg.OpenStore(dstCfg); err != nil {
			o.TargetProblem = err.Error()
		}
	}
	if o.SourceProblem != "" || o.TargetProblem != "" {
		return o, s, nil
	}
	o.SameStore = srcCfg.Location() == dstCfg.Location()
	if o.WaitForFinal {
		objs, err := backupstore.Retrying(s.source, r.cfg.Backoff).List(ctx, snapshot.Dir)
		if err != nil {
			o.ReadError = err.Error()
			return o, s, nil
		}
		keys := make([]string, len(objs))
		for i, obj := range objs {
			keys[i] = obj.Key
		}
		snaps, _ := snapshot.ParseAll(keys)
		if full, ok := snapshot.LatestOfKind(snaps, snapshot.KindFull); ok {
			o.SourceFull = &full
		}
	}
	return o, s, nil
}

// storeConfig reads the Secret a StoreSpec names and builds the store's configuration. problem
// says what in the spec or the Secret keeps the store from being opened; err is a failed read.
func (r *Reconciler) storeConfig(ctx context.Context, namespace string, store druidv1alpha1.StoreSpec) (cfg backupstore.Config, problem string, err error) {
	var data map[string][]byte
	if ref := store.SecretRef; ref != nil && ref.Name != "" {
		// etcd-druid reads the Secret in the task's namespace whatever the reference says.
		key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
		secret := &corev1.Secret{}
		if err := r.cfg.Secrets.Get(ctx, key, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return backupstore.Config{}, fmt.Sprintf("Secret %s named in secretRef does not exist", key), nil
			}
			return backupstore.Config{}, "", fmt.Errorf("reading Secret %s: %w", key, err)
		}
		data = secret.Data
		if data == nil {
			data = map[string][]byte{}
		}
	}
	cfg, err = resources.StoreConfig(store, data, r.cfg.Reach, namespace)
	if err != nil {
		return backupstore.Config{}, err.Error(), nil
	}
	return cfg, "", nil
}

// filter is the task's choice of backups for the copy.
func filter(task *druidv1alpha1.EtcdCopyBackupsTask, now time.Time) backupcopy.Filter {
	f := backupcopy.Filter{Now: now}
	if n := task.Spec.MaxBackups; n != nil {
		v := int(*n)
		f.MaxBackups = &v
	}
	if days := task.Spec.MaxBackupAge; days != nil {
		v := int(*days)
		f.MaxBackupAgeDays = &v
	}
	return f
}

// record writes the status the decision leaves, when it differs, and the decision's Event. A
// task deleted meanwhile is no error.
func (r *Reconciler) record(ctx context.Context, task *druidv1alpha1.EtcdCopyBackupsTask, o copytask.Observed, d copytask.Decision) error {
	log := ctrl.LoggerFrom(ctx)
	first := task.Status.ObservedGeneration == nil
	status := copytask.NextStatus(task.Status, task.Generation, d, o.Now)
	if !equality.Semantic.DeepEqual(status, task.Status) {
		updated := task.DeepCopy()
		updated.Status = status
		if err := r.cfg.Client.Status().Update(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("recording EtcdCopyBackupsTask %s/%s (%s): %w", task.Namespace, task.Name, d.Rule, err)
		}
	}
	switch d.Action {
	case copytask.ActionSucceed:
		log.Info("EtcdCopyBackupsTask succeeded", "rule", d.Rule, "message", d.Message)
		r.event(task, corev1.EventTypeNormal, d)
	case copytask.ActionFail:
		log.Info("EtcdCopyBackupsTask failed", "rule", d.Rule, "message", d.Message)
		r.event(task, corev1.EventTypeWarning, d)
	case copytask.ActionRetry:
		log.Info("EtcdCopyBackupsTask will try again", "rule", d.Rule, "message", d.Message, "after", d.RequeueAfter)
		r.event(task, corev1.EventTypeWarning, d)
	case copytask.ActionWait:
		// Once: the wait is polled every few seconds, and its Event would be counted up each time.
		if first {
			r.event(task, corev1.EventTypeNormal, d)
		}
	}
	return nil
}

// recordError writes err as the unfinished task's lastError; a failure to write it is only
// logged: the reconcile is retried for err anyway.
func (r *Reconciler) recordError(ctx context.Context, task *druidv1alpha1.EtcdCopyBackupsTask, err error) {
	if copytask.Finished(task.Status.Conditions) || ptr.Deref(task.Status.LastError, "") == err.Error() {
		return
	}
	updated := task.DeepCopy()
	updated.Status.LastError = ptr.To(err.Error())
	if uerr := r.cfg.Client.Status().Update(ctx, updated); uerr != nil {
		ctrl.LoggerFrom(ctx).Info("Could not record lastError", "error", uerr.Error())
	}
}

func (r *Reconciler) event(task *druidv1alpha1.EtcdCopyBackupsTask, kind string, d copytask.Decision) {
	if r.cfg.Recorder == nil {
		return
	}
	r.cfg.Recorder.Event(task, kind, d.Rule.CamelCase(), d.Message)
}
