// Package recovery holds the recovery controller (DEP-01 operator scenario 10): when quorum has
// been lost beyond a grace period and a majority of the members reports no data, it asks one
// member without data to restore the backup as a new single-member cluster, records the new
// cluster ID, replaces the pods still running the old cluster, and leaves growing back to
// spec.replicas to the membership controller (learners). internal/recovery decides; this
// package observes and acts, one step per reconcile.
//
// The recovery under way is recorded in the restore request on the restoring member's Lease
// (memberagent.AnnotationRestore), so an operator restart resumes it and the operator needs no
// write access to the Etcd's spec or metadata; every step is an Event and the
// RecoveryInProgress condition.
package recovery

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/memberagent"
	"github.com/etcd-conductor/etcd-conductor/internal/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// DefaultGrace is how long quorum must have been lost before a restore starts: long enough for
// a member that restarts or is rescheduled to come back with its data.
const DefaultGrace = 30 * time.Second

// Members is the part of the member client pool the controller uses.
type Members interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error)
	Forget(cluster string)
}

// Config holds the controller's dependencies.
type Config struct {
	Client           client.Client
	Reader           client.Reader
	Recorder         record.EventRecorder
	Members          Members
	DefaultClientTLS func() (conductortls.ClientMaterial, error)
	// Grace is how long quorum must have been lost before a restore starts (DefaultGrace).
	Grace time.Duration
	// StepInterval is how soon a cluster without quorum or in recovery is looked at again;
	// SettledInterval how often a quorate one is.
	StepInterval, SettledInterval time.Duration
}

// Reconciler is the recovery controller.
type Reconciler struct {
	cfg Config
	now func() time.Time
}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.StepInterval == 0 {
		cfg.StepInterval = 2 * time.Second
	}
	if cfg.SettledInterval == 0 {
		cfg.SettledInterval = 15 * time.Second
	}
	return &Reconciler{cfg: cfg, now: time.Now}
}

func clusterKey(etcd *druidv1alpha1.Etcd) string {
	return etcd.Namespace + "/" + etcd.Name + "/recovery"
}

// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile observes the Etcd, its pods, member Leases and members, plans one recovery step and
// carries it out.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	if quiet, err := r.nothingToRecover(ctx, req); err != nil || quiet {
		return ctrl.Result{RequeueAfter: r.cfg.SettledInterval}, err
	}
	etcd := &druidv1alpha1.Etcd{}
	if err := r.cfg.Reader.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.cfg.Members.Forget(req.Namespace + "/" + req.Name + "/recovery")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !etcd.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.cfg.Reader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(sts, etcd) || sts.Spec.Replicas == nil || *sts.Spec.Replicas == 0 {
		return ctrl.Result{}, nil
	}
	pods, err := decision.ReadMemberPods(ctx, r.cfg.Reader, sts)
	if err != nil {
		return ctrl.Result{}, err
	}
	leases, err := decision.ReadMemberLeases(ctx, r.cfg.Reader, etcd)
	if err != nil {
		return ctrl.Result{}, err
	}
	var cs *etcdclient.ClusterStatus
	creds, credsErr := memberaccess.ClientTLS(ctx, r.cfg.Reader, etcd, r.cfg.DefaultClientTLS)
	if tgts := memberaccess.Targets(etcd, pods); credsErr == nil && len(tgts) > 0 {
		if got, err := r.cfg.Members.Query(ctx, clusterKey(etcd), creds, tgts); err == nil {
			cs = &got
		}
	}
	o, err := r.observe(etcd, sts, pods, leases, cs)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := recovery.Plan(o)
	log.V(1).Info("Recovery decision", "action", d.Action, "rule", d.Rule, "reason", d.Reason)
	actErr := r.act(ctx, etcd, o, &d)
	if apierrors.IsConflict(actErr) {
		// The Etcd changed since it was read (the status controller writes often): decide again
		// on fresh state, without reporting a failure.
		return ctrl.Result{Requeue: true}, nil
	}
	if actErr != nil {
		d.Reason = fmt.Sprintf("%s: failed: %v", d.Reason, actErr)
	}
	if err := r.report(ctx, etcd, d, actErr); err != nil {
		return ctrl.Result{}, err
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	if o.QuorumLost || o.InProgress != nil || d.Action != recovery.ActionNone {
		return ctrl.Result{RequeueAfter: r.cfg.StepInterval}, nil
	}
	return ctrl.Result{RequeueAfter: r.cfg.SettledInterval}, nil
}

// nothingToRecover decides from the informer cache alone, so that a fleet of healthy (or never
// bootstrapped) clusters costs no uncached read and no member query: there is nothing to recover
// unless the cluster has bootstrapped (status.clusterID) and either its Ready condition says
// quorum is lost or a recovery is recorded (RecoveryInProgress True, or a restore request on a
// member Lease, which must be finished and cleared even after quorum is back).
func (r *Reconciler) nothingToRecover(ctx context.Context, req ctrl.Request) (bool, error) {
	etcd := &druidv1alpha1.Etcd{}
	if err := r.cfg.Client.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.cfg.Members.Forget(req.Namespace + "/" + req.Name + "/recovery")
		}
		return true, client.IgnoreNotFound(err)
	}
	if etcd.Status.ClusterID == "" {
		return true, nil
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); c != nil &&
		c.Status == druidv1alpha1.ConditionFalse && c.Reason == status.ReasonQuorumLost {
		return false, nil
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress); c != nil &&
		c.Status == druidv1alpha1.ConditionTrue {
		return false, nil
	}
	leases, err := decision.ReadMemberLeases(ctx, r.cfg.Client, etcd)
	if err != nil {
		return false, err
	}
	for _, l := range leases {
		if l.Annotations[memberagent.AnnotationRestore] != "" {
			return false, nil
		}
	}
	return true, nil
}

func (r *Reconciler) observe(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pods []corev1.Pod, leases []coordinationv1.Lease, cs *etcdclient.ClusterStatus) (recovery.Observed, error) {
	now := r.now()
	o := recovery.Observed{
		Replicas:          int(*sts.Spec.Replicas),
		Grace:             r.cfg.Grace,
		RecordedClusterID: etcd.Status.ClusterID,
		BackupConfigured:  backupConfigured(etcd),
		NewToken:          fmt.Sprintf("%s-%s-restored-%d", etcd.Namespace, etcd.Name, now.Unix()),
	}
	for _, l := range leases {
		raw := l.Annotations[memberagent.AnnotationRestore]
		if raw == "" {
			continue
		}
		var req memberagent.RestoreRequest
		if err := json.Unmarshal([]byte(raw), &req); err != nil {
			return o, fmt.Errorf("annotation %s of Lease %s/%s is unreadable (%q): %w", memberagent.AnnotationRestore, l.Namespace, l.Name, raw, err)
		}
		o.InProgress = &recovery.State{Member: req.Member, Token: req.Token, OldClusterID: req.OldClusterID, QuorumLostAt: req.QuorumLostAt, StartedAt: req.StartedAt}
		break
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); c != nil &&
		c.Status == druidv1alpha1.ConditionFalse && c.Reason == status.ReasonQuorumLost {
		o.QuorumLost, o.QuorumLostFor = true, now.Sub(c.LastTransitionTime.Time)
	}
	decisions := map[string]string{}
	for _, l := range leases {
		decisions[l.Name] = l.Annotations[memberagent.AnnotationStartDecision]
	}
	clusterOf := map[string]string{}
	if cs != nil {
		for _, m := range cs.Members {
			if m.Reachable && m.ClusterID != 0 {
				clusterOf[m.Name] = strconv.FormatUint(m.ClusterID, 16)
			}
		}
		if leader, ok := cs.Leader(); ok {
			o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = true, leader.Name, strconv.FormatUint(leader.ClusterID, 16)
		}
	}
	for _, p := range pods {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		ordinal, ok := resources.OrdinalOf(etcd, p.Name)
		if !ok {
			continue
		}
		decision := decisions[p.Name]
		o.Pods = append(o.Pods, recovery.Pod{
			Name: p.Name, Ordinal: ordinal, StartDecision: decision, ClusterID: clusterOf[p.Name],
			// Still in its init step, which found no data and no leader.
			NoData:      initRunning(&p) && strings.HasPrefix(decision, memberagent.StartRuleClusterUnknown+":"),
			EtcdRunning: containerRunning(p.Status.ContainerStatuses, resources.EtcdContainerName),
		})
	}
	return o, nil
}

// backupConfigured: spec.backup names a store provider.
func backupConfigured(e *druidv1alpha1.Etcd) bool {
	b := e.Spec.Backup
	return b != nil && b.Store != nil && b.Store.Provider != nil && string(*b.Store.Provider) != ""
}

func initRunning(p *corev1.Pod) bool {
	return containerRunning(p.Status.InitContainerStatuses, resources.MemberInitContainerName)
}

func containerRunning(statuses []corev1.ContainerStatus, name string) bool {
	for _, s := range statuses {
		if s.Name == name {
			return s.State.Running != nil
		}
	}
	return false
}

func (r *Reconciler) act(ctx context.Context, etcd *druidv1alpha1.Etcd, o recovery.Observed, d *recovery.Decision) error {
	log := logr.FromContextOrDiscard(ctx)
	now := r.now().UTC()
	switch d.Action {
	case recovery.ActionStart:
		s := *d.State
		req, err := json.Marshal(memberagent.RestoreRequest{Member: s.Member, Token: s.Token, Reason: d.Reason, OldClusterID: s.OldClusterID,
			StartedAt: now.Format(time.RFC3339Nano), QuorumLostAt: now.Add(-o.QuorumLostFor).Format(time.RFC3339Nano)})
		if err != nil {
			return err
		}
		// The request is the record: written once, on the member's own Lease.
		if err := r.annotateLease(ctx, etcd.Namespace, s.Member, memberagent.AnnotationRestore, string(req)); err != nil {
			return err
		}
		log.Info("Asked a member to restore from the backup", "member", s.Member, "token", s.Token)
	case recovery.ActionRecordClusterID:
		if err := status.Patch(ctx, r.cfg.Client, etcd, status.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
			s.ClusterID = d.ClusterID
		}); err != nil {
			return fmt.Errorf("recording the new cluster ID %s: %w", d.ClusterID, err)
		}
		// DEP-01: a full snapshot of the restored cluster, so later restores start from it and
		// not from the old cluster's chain. Asked on the full snapshot Lease, where the leading
		// member-agent takes requests.
		if backupConfigured(etcd) {
			if err := r.annotateLease(ctx, etcd.Namespace, resources.FullSnapshotLeaseName(etcd), backup.AnnotationFullSnapshotRequest, "restored-"+o.InProgress.Token); err != nil {
				return fmt.Errorf("requesting a full snapshot of the restored cluster: %w", err)
			}
		}
		d.Reason += "; a full snapshot of it is requested"
	case recovery.ActionReplacePod:
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: d.Pod}}
		if err := r.cfg.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", d.Pod, err)
		}
	case recovery.ActionFinish:
		if lostAt, err := time.Parse(time.RFC3339Nano, o.InProgress.QuorumLostAt); err == nil {
			d.Reason += fmt.Sprintf("; quorum was lost for %s until the restored member led", now.Sub(lostAt).Round(time.Second))
		}
		return r.annotateLease(ctx, etcd.Namespace, o.InProgress.Member, memberagent.AnnotationRestore, "")
	}
	return nil
}

// annotateLease writes (value "" removes) an annotation on one of the Etcd's Leases.
func (r *Reconciler) annotateLease(ctx context.Context, namespace, name, key, value string) error {
	var v any = value
	if value == "" {
		v = nil
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := r.cfg.Client.Patch(ctx, lease, client.RawPatch(types.MergePatchType, raw)); err != nil && !(value == "" && apierrors.IsNotFound(err)) {
		return fmt.Errorf("writing %s on Lease %s/%s: %w", key, namespace, name, err)
	}
	return nil
}

// report sets the RecoveryInProgress condition and emits an Event for every action and every
// change of what the controller waits on. A cluster that never needed a recovery gets neither.
func (r *Reconciler) report(ctx context.Context, etcd *druidv1alpha1.Etcd, d recovery.Decision, actErr error) error {
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
	if d.Rule == recovery.RuleNotNeeded && prev == nil {
		return nil
	}
	cond := druidv1alpha1.ConditionFalse
	if d.InProgress() {
		cond = druidv1alpha1.ConditionTrue
	}
	reason := d.Rule.CamelCase()
	message := fmt.Sprintf("%s [%s]", d.Reason, d.Rule)
	// A wait's message counts the seconds since quorum was lost: rewriting it on every pass
	// would be a status write every StepInterval for nothing. It is written when the rule or
	// the status changes, or an action was taken; lastUpdateTime says as of when.
	acted := d.Action != recovery.ActionWait && d.Action != recovery.ActionNone
	changed := prev == nil || prev.Status != cond || prev.Reason != reason || (acted && prev.Message != message)
	if acted || (changed && (prev == nil || prev.Reason != reason)) {
		eventType := corev1.EventTypeNormal
		if actErr != nil || d.Rule == recovery.RuleNoBackup || d.Rule == recovery.RuleStart || d.Rule == recovery.RuleReplaceOldPod {
			eventType = corev1.EventTypeWarning
		}
		r.cfg.Recorder.Event(etcd, eventType, reason, message)
	}
	if !changed {
		return nil
	}
	// Re-read: act may have patched the Etcd (annotation, status) since it was read.
	fresh := &druidv1alpha1.Etcd{}
	if err := r.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(etcd), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	now := metav1.NewTime(r.now())
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeRecoveryInProgress, Status: cond, Reason: reason, Message: message,
		LastUpdateTime: now, LastTransitionTime: now}
	if err := status.Patch(ctx, r.cfg.Client, fresh, status.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = status.SetCondition(s.Conditions, c)
	}); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer changed the conditions since the read: the next pass writes it.
			return nil
		}
		return fmt.Errorf("recording the recovery decision on Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return nil
}
