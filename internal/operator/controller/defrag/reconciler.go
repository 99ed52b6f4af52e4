package defrag

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Event reasons.
const (
	EventDefragmented          = "Defragmented"
	EventDefragmentationFailed = "DefragmentationFailed"
	EventDefragmentationWait   = "DefragmentationWaiting"
	EventDefragmentationSkip   = "DefragmentationSkipped"
	EventDefragmentationDone   = "DefragmentationCompleted"
)

// Config holds the controller's dependencies.
type Config struct {
	Client   client.Client
	Reader   client.Reader // uncached reads of Secrets, pods and StatefulSets
	Recorder record.EventRecorder
	Members  memberaccess.Pool
	Metrics  *Metrics
	// Access reaches the members: their client key pair, read fresh for each step. Nil reads it
	// through Reader, with no operator-wide key pair.
	Access *memberaccess.Access
	// WaitInterval is how soon a waiting run looks again (default 10s).
	WaitInterval time.Duration
	// Now is the clock (tests replace it).
	Now func() time.Time
	// WaitForBackupReady is the operator's controllers.etcd.waitForBackupReady: a run waits
	// while the Etcd's BackupReady is False (package backupgate).
	WaitForBackupReady bool
}

// Reconciler runs defragmentation schedules.
type Reconciler struct {
	cfg Config

	mu   sync.Mutex
	runs map[types.NamespacedName]*schedule
}

// schedule is one Etcd's schedule and its run in progress.
type schedule struct {
	spec string
	cron cron.Schedule
	// lastRun is when the last run was due, or when the schedule was first seen.
	lastRun time.Time
	// active is set from the due time until the run ends.
	active  bool
	dueAt   time.Time
	handled map[string]bool
	// lastWait is the rule of the last wait reported, so an Event goes out once per change.
	lastWait defrag.RuleID
	// holding is set while this process may have left DefragmentationInProgress True (its
	// release failed): the next reconcile clears it at once rather than after the timeout.
	holding bool
}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.WaitInterval <= 0 {
		cfg.WaitInterval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Access == nil {
		cfg.Access = memberaccess.New(memberaccess.Config{Reader: cfg.Reader})
	}
	return &Reconciler{cfg: cfg, runs: map[types.NamespacedName]*schedule{}}
}

// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile takes one step of an Etcd's defragmentation schedule.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	etcd := &druidv1alpha1.Etcd{}
	if err := r.cfg.Client.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !etcd.DeletionTimestamp.IsZero() || takeover.Decide(etcd).Held {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	s := r.schedule(log, req.NamespacedName, etcd)
	// Reconciles of one Etcd never overlap and a member's defragmentation ends within its
	// reconcile, so a DefragmentationInProgress True found here is left over: by this process
	// when a release failed, or by an operator that stopped mid-call, whose call etcd ends
	// within the timeout.
	if wait, err := r.releaseLeftOver(ctx, etcd, s); err != nil || wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if s == nil {
		return ctrl.Result{}, nil
	}
	now := r.cfg.Now()
	if !s.active {
		next := s.cron.Next(s.lastRun)
		if now.Before(next) {
			return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
		}
		s.active, s.dueAt, s.handled, s.lastWait = true, next, map[string]bool{}, ""
		log.Info("Defragmentation run due", "schedule", s.spec, "due", next)
	}

	target, err := r.observe(ctx, etcd, s)
	if err != nil {
		log.Info("Cannot observe the cluster for defragmentation; trying again", "error", err.Error())
		r.reportWait(etcd, s, defrag.Decision{Rule: "defrag/wait/observe-failed", Reason: err.Error()})
		return ctrl.Result{RequeueAfter: r.cfg.WaitInterval}, nil
	}
	d := defrag.Plan(target.observed)
	log.V(1).Info("Defragmentation decision", "action", d.Action, "rule", d.Rule, "member", d.Member, "reason", d.Reason)
	r.cfg.Metrics.Decisions.WithLabelValues(etcd.Namespace, etcd.Name, string(d.Rule)).Inc()

	switch d.Action {
	case defrag.ActionWait:
		r.reportWait(etcd, s, d)
		return ctrl.Result{RequeueAfter: r.cfg.WaitInterval}, nil
	case defrag.ActionSkip:
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, EventDefragmentationSkip, fmt.Sprintf("%s [%s]", d.Reason, d.Rule))
		r.cfg.Metrics.Runs.WithLabelValues(etcd.Namespace, etcd.Name, "skipped").Inc()
		return r.endRun(s, now), nil
	case defrag.ActionDone:
		r.cfg.Recorder.Event(etcd, corev1.EventTypeNormal, EventDefragmentationDone, fmt.Sprintf("run due %s: %s [%s]", s.dueAt.UTC().Format(time.RFC3339), d.Reason, d.Rule))
		r.cfg.Metrics.Runs.WithLabelValues(etcd.Namespace, etcd.Name, "completed").Inc()
		return r.endRun(s, now), nil
	case defrag.ActionDefragment:
		r.defragment(ctx, etcd, s, target, d)
		// Look again before the next member: the one just done must be healthy first.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) endRun(s *schedule, now time.Time) ctrl.Result {
	s.active, s.lastRun, s.handled, s.lastWait = false, s.dueAt, nil, ""
	next := s.cron.Next(s.lastRun)
	if !next.After(now) {
		// Runs missed while this one went on are not made up: the next is from now.
		s.lastRun = now
		next = s.cron.Next(now)
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}
}

func (r *Reconciler) reportWait(etcd *druidv1alpha1.Etcd, s *schedule, d defrag.Decision) {
	if s.lastWait == d.Rule {
		return
	}
	s.lastWait = d.Rule
	r.cfg.Recorder.Event(etcd, corev1.EventTypeNormal, EventDefragmentationWait, fmt.Sprintf("%s [%s]", d.Reason, d.Rule))
}

// schedule returns the Etcd's schedule state, creating or updating it from the spec; nil when
// the Etcd has no schedule.
func (r *Reconciler) schedule(log logr.Logger, key types.NamespacedName, etcd *druidv1alpha1.Etcd) *schedule {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.runs[key]
	spec := etcd.Spec.Etcd.DefragmentationSchedule
	if spec == nil || *spec == "" {
		delete(r.runs, key)
		return nil
	}
	if s != nil && s.spec == *spec {
		return s
	}
	parsed, err := resources.DefragmentationSchedule(etcd)
	if err != nil {
		if s != nil {
			log.Info("Defragmentation schedule invalid; keeping the previous one", "invalid", *spec, "kept", s.spec, "error", err.Error())
		}
		return s
	}
	if s == nil {
		s = &schedule{lastRun: r.cfg.Now()}
		r.runs[key] = s
	}
	s.spec, s.cron = *spec, parsed
	return s
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, key)
	r.cfg.Metrics.Forget(key)
}

// observation is one look at the cluster, with what is needed to act on it.
type observation struct {
	observed defrag.Observed
	members  *memberaccess.Cluster
	status   map[string]memberaccess.MemberStatus
}

func (r *Reconciler) observe(ctx context.Context, etcd *druidv1alpha1.Etcd, s *schedule) (observation, error) {
	sts := &appsv1.StatefulSet{}
	if err := r.cfg.Reader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts); err != nil {
		return observation{}, fmt.Errorf("reading the StatefulSet: %w", err)
	}
	pods, err := memberaccess.ReadLabelledPods(ctx, r.cfg.Reader, etcd)
	if err != nil {
		return observation{}, err
	}
	creds, err := r.cfg.Access.FreshClientTLS(ctx, etcd)
	if err != nil {
		return observation{}, fmt.Errorf("member client TLS: %w", err)
	}
	members := memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembers, creds, memberaccess.Targets(etcd, pods))
	cs, err := members.Statuses(ctx)
	if err != nil {
		// Unreachable members are observed as such; the planner waits for them.
		logr.FromContextOrDiscard(ctx).V(1).Info("Member query failed", "error", err.Error())
	}
	out := observation{members: members, status: StatusByMember(cs)}
	out.observed = Observe(etcd, sts, pods, out.status, s.handled, r.cfg.WaitForBackupReady)
	return out, nil
}

// StatusByMember indexes the members' answers by member name; a member that was not asked is
// absent, which Observe takes as not reachable.
func StatusByMember(cs memberaccess.ClusterStatus) map[string]memberaccess.MemberStatus {
	status := make(map[string]memberaccess.MemberStatus, len(cs.Members))
	for _, m := range cs.Members {
		status[m.Name] = m
	}
	return status
}

// Observe turns the StatefulSet, its pods and what the members said into the planner's input for
// a run in progress (Due), with the members this run already handled; waitForBackupReady is the
// operator's switch (package backupgate). It reads nothing itself, so `plan` runs the very same
// observation on a saved state and saved member answers.
func Observe(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pods []corev1.Pod, status map[string]memberaccess.MemberStatus, handled map[string]bool, waitForBackupReady bool) defrag.Observed {
	rolled := rollout.Observe(sts, pods, nil)
	o := defrag.Observed{Due: true, Desired: int(etcd.Spec.Replicas), Handled: handled, Operations: operation.Of(etcd),
		Backup: backupgate.Of(etcd, waitForBackupReady)}
	var revisions []operation.Pod
	for _, p := range rolled.Pods {
		revisions = append(revisions, operation.Pod{Revision: p.Revision, Terminating: p.Terminating})
		st := status[p.Name]
		o.Members = append(o.Members, defrag.Member{
			Name:        p.Name,
			Ready:       p.Participating,
			Reachable:   st.Reachable,
			Leader:      st.IsLeader(),
			Learner:     st.IsLearner,
			DBSize:      st.DBSize,
			DBSizeInUse: st.DBSizeInUse,
		})
	}
	o.RolloutInFlight = operation.RolloutInFlight(rolled.UpdateRevision, revisions)
	specReplicas := int32(1)
	if sts.Spec.Replicas != nil {
		specReplicas = *sts.Spec.Replicas
	}
	o.ScaleInFlight = specReplicas != etcd.Spec.Replicas || sts.Status.Replicas != specReplicas
	return o
}

// defragment runs one member's defragmentation and reports it. A failure marks the member
// handled for this run (it is not retried until the next run) and the planner's health rules
// hold the run until the member is healthy again.
func (r *Reconciler) defragment(ctx context.Context, etcd *druidv1alpha1.Etcd, s *schedule, o observation, d defrag.Decision) {
	log := logr.FromContextOrDiscard(ctx)
	timeout := resources.DefragTimeout(etcd)
	before := o.status[d.Member].DBSize
	log.Info("Defragmenting member", "member", d.Member, "rule", d.Rule, "timeout", timeout, "dbSize", before, "reason", d.Reason)

	// The defragmenting member serves nothing but may look ready until its probe times out: the
	// condition tells every other controller to take no member away meanwhile.
	if held, err := r.hold(ctx, etcd, s, d, timeout); err != nil || held != nil {
		if held != nil {
			r.cfg.Metrics.Decisions.WithLabelValues(etcd.Namespace, etcd.Name, string(held.Rule)).Inc()
			r.reportWait(etcd, s, *held)
			log.Info("Defragmentation held: another operation started meanwhile", "member", d.Member, "rule", held.Rule, "reason", held.Reason)
			return
		}
		log.Info("Defragmentation not started: its condition could not be set; trying again", "member", d.Member, "error", err.Error())
		return
	}
	defer r.release(ctx, etcd, s, d.Member)
	start := r.cfg.Now()
	err := o.members.Defragment(ctx, d.Member, timeout)
	took := r.cfg.Now().Sub(start)
	s.handled[d.Member] = true
	s.lastWait = ""
	if err != nil {
		r.cfg.Metrics.Defragmentations.WithLabelValues(etcd.Namespace, etcd.Name, "failed").Inc()
		r.cfg.Metrics.Duration.WithLabelValues("failed").Observe(took.Seconds())
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, EventDefragmentationFailed,
			fmt.Sprintf("member %s: %v after %s (timeout %s) [%s]", d.Member, err, took.Round(time.Millisecond), timeout, d.Rule))
		log.Error(err, "Defragmentation failed", "member", d.Member)
		return
	}
	after := int64(-1)
	if cs, qerr := o.members.Statuses(ctx); qerr == nil || len(cs.Members) > 0 {
		for _, m := range cs.Members {
			if m.Name == d.Member && m.Reachable {
				after = m.DBSize
			}
		}
	}
	r.cfg.Metrics.Defragmentations.WithLabelValues(etcd.Namespace, etcd.Name, "succeeded").Inc()
	r.cfg.Metrics.Duration.WithLabelValues("succeeded").Observe(took.Seconds())
	r.cfg.Metrics.DBSize.WithLabelValues(etcd.Namespace, etcd.Name, d.Member, "before").Set(float64(before))
	afterText := "unknown (member did not answer)"
	if after >= 0 {
		r.cfg.Metrics.DBSize.WithLabelValues(etcd.Namespace, etcd.Name, d.Member, "after").Set(float64(after))
		if before > after {
			r.cfg.Metrics.Reclaimed.WithLabelValues(etcd.Namespace, etcd.Name).Add(float64(before - after))
		}
		afterText = fmt.Sprintf("%d bytes", after)
	}
	r.cfg.Recorder.Event(etcd, corev1.EventTypeNormal, EventDefragmented,
		fmt.Sprintf("member %s: db %d bytes -> %s in %s [%s]", d.Member, before, afterText, took.Round(time.Millisecond), d.Rule))
	log.Info("Defragmented member", "member", d.Member, "before", before, "after", after, "duration", took)
}

// leftOverMargin is how long past its timeout a defragmentation another process started is
// taken to be over: etcd ends the call by then, and the member has been probed since.
const leftOverMargin = 10 * time.Second

// hold sets DefragmentationInProgress before member d.Member is defragmented, on the Etcd as the
// apiserver holds it now and with the status patch's optimistic lock: an operation another
// controller started since the decision, a BackupReady turned False, or a status written
// meanwhile, stops it here. It returns the planner's wait when another operation is in flight or
// the backup gate holds.
func (r *Reconciler) hold(ctx context.Context, etcd *druidv1alpha1.Etcd, s *schedule, d defrag.Decision, timeout time.Duration) (*defrag.Decision, error) {
	fresh, err := r.readFresh(ctx, etcd)
	if err != nil {
		return nil, err
	}
	if others := operation.Of(fresh).Except(operation.KindDefragmentation); len(others) > 0 {
		return &defrag.Decision{Action: defrag.ActionWait, Rule: operation.WaitRule(defrag.Planner, others[0].Kind),
			Reason: fmt.Sprintf("waiting for the %s to finish before defragmenting %s", others.Describe(), d.Member)}, nil
	}
	if g := backupgate.Of(fresh, r.cfg.WaitForBackupReady); g.Holds {
		return &defrag.Decision{Action: defrag.ActionWait, Rule: defrag.RuleBackupNotReady,
			Reason: g.Waiting("defragmenting " + d.Member)}, nil
	}
	if err := r.writeCondition(ctx, fresh, druidv1alpha1.ConditionTrue, d.Rule.CamelCase(),
		fmt.Sprintf("defragmenting member %s (timeout %s)", d.Member, timeout)); err != nil {
		return nil, err
	}
	s.holding = true
	return nil, nil
}

// release clears DefragmentationInProgress once member's defragmentation has returned. A release
// that fails leaves holding set, and the next reconcile clears it (releaseLeftOver).
func (r *Reconciler) release(ctx context.Context, etcd *druidv1alpha1.Etcd, s *schedule, member string) {
	fresh, err := r.readFresh(ctx, etcd)
	if err == nil {
		err = r.writeCondition(ctx, fresh, druidv1alpha1.ConditionFalse, "Idle", fmt.Sprintf("member %s defragmented", member))
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).Info("Could not clear DefragmentationInProgress; the next reconcile does", "error", err.Error())
		return
	}
	if s != nil {
		s.holding = false
	}
}

// releaseLeftOver clears a DefragmentationInProgress no defragmentation of this process is
// under: at once when this process set it, otherwise once the defragmentation it marks must be
// over (the Etcd's timeout and a margin since it was set). Until then it returns how long to
// wait: the run goes on only once no other member can be blocked.
func (r *Reconciler) releaseLeftOver(ctx context.Context, etcd *druidv1alpha1.Etcd, s *schedule) (time.Duration, error) {
	c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeDefragmentationInProgress)
	if c == nil || c.Status != druidv1alpha1.ConditionTrue {
		return 0, nil
	}
	// The cache may not show this process's own release yet: only the apiserver's copy tells a
	// left-over condition from a cleared one.
	fresh, err := r.readFresh(ctx, etcd)
	if err != nil {
		return 0, err
	}
	c = druidv1alpha1.FindCondition(fresh.Status.Conditions, druidv1alpha1.ConditionTypeDefragmentationInProgress)
	if c == nil || c.Status != druidv1alpha1.ConditionTrue {
		return 0, nil
	}
	if s == nil || !s.holding {
		if left := c.LastTransitionTime.Add(resources.DefragTimeout(etcd) + leftOverMargin).Sub(r.cfg.Now()); left > 0 {
			return left, nil
		}
	}
	if err := r.writeCondition(ctx, fresh, druidv1alpha1.ConditionFalse, "Idle", "no defragmentation is under way"); err != nil {
		return 0, err
	}
	if s != nil {
		s.holding = false
	}
	return 0, nil
}

// readFresh reads etcd as the apiserver holds it now: whether another operation is in flight,
// and the copy a condition is written on under the status patch's optimistic lock.
func (r *Reconciler) readFresh(ctx context.Context, etcd *druidv1alpha1.Etcd) (*druidv1alpha1.Etcd, error) {
	fresh := &druidv1alpha1.Etcd{}
	if err := r.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(etcd), fresh); err != nil {
		return nil, fmt.Errorf("re-reading Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return fresh, nil
}

// writeCondition sets DefragmentationInProgress on fresh.
func (r *Reconciler) writeCondition(ctx context.Context, fresh *druidv1alpha1.Etcd, status druidv1alpha1.ConditionStatus, reason, message string) error {
	now := metav1.NewTime(r.cfg.Now())
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeDefragmentationInProgress, Status: status,
		Reason: reason, Message: message, LastTransitionTime: now, LastUpdateTime: now}
	return etcdstatus.Patch(ctx, r.cfg.Client, fresh, etcdstatus.WriterDefrag, func(st *druidv1alpha1.EtcdStatus) {
		st.Conditions = etcdstatus.SetCondition(st.Conditions, c)
	})
}
