package ondelete

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Config holds the controller's dependencies and settings.
type Config struct {
	// Client reads through the informer cache and writes (pod deletes, Etcd status); Reader
	// reads StatefulSets and pods uncached once a pod may be deleted, so every deletion is
	// decided on what the apiserver holds now, not on a lagging informer.
	Client client.Client
	Reader client.Reader
	// Access reaches the members: their client key pair, its Secrets read through a cache. Nil
	// reads them through Reader on every use, with no operator-wide key pair.
	Access   *memberaccess.Access
	Recorder record.EventRecorder
	Members  memberaccess.Pool
	Metrics  *Metrics
	// RoleSource is Auto (ask the members, fall back to leases) or LeaseOnly.
	RoleSource roles.SourcePolicy
	// RequeueInterval is how soon a waiting rollout is looked at again.
	RequeueInterval time.Duration
	// RejoinInterval is how soon a rollout waiting on a replaced member that runs but has not
	// served a linearizable read yet asks it again (Policy.RejoinByRead), through the rejoin
	// watch (rejoin.go), which then wakes the controller; default 50ms.
	RejoinInterval time.Duration
	// Clock reads the time Lease freshness is judged at; nil means time.Now. Tests replaying a
	// recorded state set it to when the state was recorded.
	Clock func() time.Time
	// Policy is the rollout policy beyond DEP-07 (leadership handover, catch-up gate,
	// quorum-headroom concurrency); the zero value is DEP-07 as written.
	Policy rollout.Policy
	// HandoverTimeout bounds a MoveLeader call and, separately, the wait until the members
	// confirm the new leader (default 5s each).
	HandoverTimeout time.Duration
}

// DefaultRejoinInterval paces the reads that show a replaced member back: a read of one key
// against only the members awaited, for the seconds they take to start, and only while a
// rollout waits on them. A member refusing connections fails such a read within a round trip.
const DefaultRejoinInterval = 50 * time.Millisecond

// rejoinPollWindow is how long after its etcd container started a replaced member is watched
// (rejoin.go): a member joins within seconds of starting. One that has run longer without
// serving is stuck, not starting, and is asked at the controller's usual pace.
const rejoinPollWindow = time.Minute

// startedWithin tells whether the etcd container of any pod named started less than window
// before now.
func startedWithin(pods []corev1.Pod, names []string, now time.Time, window time.Duration) bool {
	for i := range pods {
		if !slices.Contains(names, pods[i].Name) {
			continue
		}
		for _, s := range pods[i].Status.ContainerStatuses {
			if s.Name == resources.EtcdContainerName && s.State.Running != nil && now.Sub(s.State.Running.StartedAt.Time) < window {
				return true
			}
		}
	}
	return false
}

// rejoinReadTimeout bounds one round of those reads, so a member that hangs holds a reconcile
// worker no longer than that; the next round asks again.
const rejoinReadTimeout = time.Second

// Reconciler is the OnDelete controller.
type Reconciler struct {
	cfg Config
	now func() time.Time
	// failures remembers failed handovers by pod UID, should recording them on the pod fail
	// (handover.go): the bound on attempts holds either way.
	failures handoverFailures
	// handedOver remembers when a handover was last confirmed, by cluster (handover.go).
	handedOver handoverTimes
	// rejoin wakes the controller when a replaced member the rollout waits on serves.
	rejoin *rejoinWatch
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.RequeueInterval == 0 {
		cfg.RequeueInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.HandoverTimeout == 0 {
		cfg.HandoverTimeout = 5 * time.Second
	}
	if cfg.RejoinInterval == 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	if cfg.Access == nil {
		cfg.Access = memberaccess.New(memberaccess.Config{Reader: cfg.Reader})
	}
	r := &Reconciler{cfg: cfg, now: cfg.Clock, failures: handoverFailures{byCluster: map[string]map[types.UID]failedRecord{}}}
	r.rejoin = newRejoinWatch(cfg.RejoinInterval, func(sts types.NamespacedName, outcome string) {
		// The StatefulSet has its Etcd's namespace and name (resources.StatefulSetName).
		cfg.Metrics.RejoinWatches.WithLabelValues(sts.Namespace, sts.Name, outcome).Inc()
	})
	return r
}

// RBAC: the StatefulSet and pods are watched through the cache and, while a pod may be deleted,
// read fresh (get, list), as are the leases; the Etcd is read from the cache; the client key pair
// is read from its Secrets by name (get only, never listed; memberaccess.Access); the pods of
// one decision (one, or a batch within the quorum's headroom) are deleted.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile runs one step of a quorum-safe rollout:
//  1. read the StatefulSet, its owning Etcd and its pods from the informer cache; when that view
//     holds a pod the controller could delete (outdated and not terminating), read the
//     StatefulSet and pods again uncached and go on with those, so a deletion is only ever
//     decided on what the apiserver holds now. A cluster whose cached view has no such pod
//     (settled, or only waiting for pods to come back) costs no uncached read: a lagging cache
//     can only hide a pod to delete, and the event that updates it reconciles again;
//  2. decide (internal/operator/decision, the pipeline `plan` runs too): plan, and when the choice is
//     among participating members, read the member leases, ask the members over mTLS, resolve
//     roles (internal/decide/roles) and plan again (internal/decide/rollout);
//  3. carry out the decision: delete the pod (or the batch of followers), with UID and
//     resourceVersion preconditions; or move leadership off the leader and confirm it
//     (handover.go); or wait;
//  4. report: an Event when the decision changes, status.lastOperation, metrics.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := r.now()
	log := logr.FromContextOrDiscard(ctx)

	sts, etcd, pods, err := r.read(ctx, r.cfg.Client, req)
	if err != nil || sts == nil || takeover.Decide(etcd).Held {
		return ctrl.Result{}, err
	}
	if deletable(sts, pods) {
		if sts, etcd, pods, err = r.readFresh(ctx, req, sts); err != nil || sts == nil {
			return ctrl.Result{}, err
		}
	}
	pods = r.failures.apply(etcdKey(etcd), pods)
	outcome, err := decision.Decide(ctx, decision.State{Etcd: etcd, StatefulSet: sts, Pods: pods},
		roleInputs{r: r}, r.cfg.RoleSource, r.cfg.Policy, r.now())
	if err != nil {
		return ctrl.Result{}, err
	}
	d, resolution := outcome.Decision, outcome.Resolution
	if outcome.RolesResolved {
		r.recordResolution(ctx, etcd, outcome)
	}
	r.cfg.Metrics.DecisionLatency.Observe(r.now().Sub(start).Seconds())
	r.cfg.Metrics.OutdatedPods.WithLabelValues(etcd.Namespace, etcd.Name).Set(float64(countOutdated(outcome.Observed)))

	log.V(1).Info("Rollout decision", "action", d.Action, "rule", d.Rule, "pods", d.Pods, "handoverTo", d.HandoverTo,
		"reason", d.Reason, "roleSource", resolution.Source)
	r.recordRejoinReads(ctx, etcd, outcome)
	r.observeLags(etcd, outcome)
	if outcome.RejoinPending() && startedWithin(outcome.Pods, outcome.AwaitingRejoin, r.now(), rejoinPollWindow) {
		// Whatever this reconcile does, the rollout's next step waits on these members: the
		// watch wakes the controller as soon as one serves. Each reconcile extends it, so it
		// outlives the requeue below while the wait lasts.
		r.watchRejoin(ctx, etcd, sts, outcome)
	}

	result := ctrl.Result{Priority: priority.For(inFlight(d))}
	if d.Action == rollout.ActionDelete || d.Action == rollout.ActionHandover {
		// Deciding may have taken a while (members asked over the network): another operation
		// may have started meanwhile. Asked again on what the apiserver holds now, the same rule
		// answers, so a hold is reported like any other wait.
		held, err := r.heldByOperation(ctx, sts, outcome.Observed)
		if err != nil {
			return ctrl.Result{}, err
		}
		if held != nil {
			log.Info("Deletion held: another operation started while deciding", "pods", d.Pods, "rule", held.Rule, "reason", held.Reason)
			d = *held
		}
	}
	switch d.Action {
	case rollout.ActionDelete:
		if err := r.deletePods(ctx, outcome.Pods, d); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// The pod changed or went since we read it: decide again on fresh state.
				log.Info("Pod changed before deletion; deciding again", "pods", d.Pods, "error", err.Error())
				return ctrl.Result{Requeue: true, Priority: priority.For(true)}, nil
			}
			return ctrl.Result{}, err
		}
		r.recordLeaderDeletions(etcd, outcome)
		r.cfg.Metrics.Deletions.WithLabelValues(etcd.Namespace, etcd.Name, string(d.Rule)).Add(float64(len(d.Pods)))
		r.cfg.Metrics.BatchSize.Observe(float64(len(d.Pods)))
		result.RequeueAfter = r.cfg.RequeueInterval
	case rollout.ActionHandover:
		// Either way the next decision is made on what the members say now: after a confirmed
		// handover the old leader is a follower and goes next; after a failure the count on
		// its pod tells the planner how many attempts are left.
		if r.handover(ctx, etcd, outcome) {
			result.Requeue = true
		} else {
			result.RequeueAfter = r.cfg.RequeueInterval
		}
	case rollout.ActionWait:
		r.cfg.Metrics.Waits.WithLabelValues(etcd.Namespace, etcd.Name, string(d.Rule)).Inc()
		result.RequeueAfter = r.cfg.RequeueInterval
	}
	if err := r.report(ctx, etcd, sts, d, resolution); err != nil {
		return result, err
	}
	return result, nil
}

// read reads the StatefulSet and its pods through reader (the cache or the apiserver) and the
// owning Etcd from the cache. A nil StatefulSet means there is nothing to do: it is gone, not
// managed with OnDelete, or has no Etcd owner.
func (r *Reconciler) read(ctx context.Context, reader client.Reader, req ctrl.Request) (*appsv1.StatefulSet, *druidv1alpha1.Etcd, []corev1.Pod, error) {
	sts := &appsv1.StatefulSet{}
	if err := reader.Get(ctx, req.NamespacedName, sts); err != nil {
		if apierrors.IsNotFound(err) {
			// The StatefulSet is named after its Etcd: drop the cluster's member connections
			// and its series.
			r.rejoin.stop(req.NamespacedName)
			r.cfg.Members.Forget(memberaccess.PoolKey(req.Namespace, req.Name, memberaccess.ForMembers))
			r.cfg.Metrics.Forget(req.NamespacedName)
		}
		return nil, nil, nil, client.IgnoreNotFound(err)
	}
	if !isManagedOnDelete(sts) {
		r.rejoin.stop(req.NamespacedName)
		r.cfg.Members.Forget(memberaccess.PoolKey(req.Namespace, req.Name, memberaccess.ForMembers))
		r.cfg.Metrics.Forget(req.NamespacedName)
		return nil, nil, nil, nil
	}
	etcd, err := memberaccess.ReadOwningEtcd(ctx, r.cfg.Client, sts)
	if err != nil || etcd == nil {
		return nil, nil, nil, err
	}
	pods, err := memberaccess.ReadMemberPods(ctx, reader, sts)
	if err != nil {
		return nil, nil, nil, err
	}
	return sts, etcd, pods, nil
}

// readFresh reads what read does, through the apiserver, asking for the StatefulSet and its pods
// at once: a StatefulSet's selector cannot change, so the cached one lists the pods. Every reconcile of a
// rollout in flight reads this way, on a machine busy starting members, so the two round trips
// in a row were a visible part of each step. A StatefulSet replaced, gone or no longer OnDelete
// since the cache saw it is read again the plain way, which sorts those out.
func (r *Reconciler) readFresh(ctx context.Context, req ctrl.Request, cached *appsv1.StatefulSet) (*appsv1.StatefulSet, *druidv1alpha1.Etcd, []corev1.Pod, error) {
	var pods []corev1.Pod
	var podsErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		pods, podsErr = memberaccess.ReadMemberPods(ctx, r.cfg.Reader, cached)
	}()
	sts := &appsv1.StatefulSet{}
	stsErr := r.cfg.Reader.Get(ctx, req.NamespacedName, sts)
	<-listed
	if stsErr != nil || sts.UID != cached.UID || !isManagedOnDelete(sts) {
		return r.read(ctx, r.cfg.Reader, req)
	}
	if podsErr != nil {
		return nil, nil, nil, podsErr
	}
	etcd, err := memberaccess.ReadOwningEtcd(ctx, r.cfg.Client, sts)
	if err != nil || etcd == nil {
		return nil, nil, nil, err
	}
	return sts, etcd, pods, nil
}

// deletable tells whether a view holds a pod the controller could delete: one not at the
// update revision and not terminating. Without an update revision no pod is outdated.
func deletable(sts *appsv1.StatefulSet, pods []corev1.Pod) bool {
	o := rollout.Observe(sts, pods, nil)
	if o.UpdateRevision == "" {
		return false
	}
	for _, p := range o.Pods {
		if rollout.IsOutdated(p, o.UpdateRevision) && !p.Terminating {
			return true
		}
	}
	return false
}

// inFlight tells whether a rollout is under way (a pod outdated, terminating or missing), for the
// work queue's priority; what excludes other operations is package operation.
func inFlight(d rollout.Decision) bool {
	return d.Action != rollout.ActionDone
}

// heldByOperation asks the planner's operation and backup rules (rollout.HeldByOperation) again on the Etcd
// and the StatefulSet as the apiserver holds them now; nil means nothing holds the deletion. A
// StatefulSet replaced or no longer OnDelete since it was read is being handed to RollingUpdate:
// the Etcd reconciler clears its hold only once it has switched it, so that is a hold too.
func (r *Reconciler) heldByOperation(ctx context.Context, sts *appsv1.StatefulSet, o rollout.Observed) (*rollout.Decision, error) {
	fresh := &appsv1.StatefulSet{}
	if err := r.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(sts), fresh); err != nil {
		return nil, fmt.Errorf("re-reading StatefulSet %s/%s before a deletion: %w", sts.Namespace, sts.Name, err)
	}
	etcd, err := memberaccess.ReadOwningEtcd(ctx, r.cfg.Reader, fresh)
	if err != nil {
		return nil, fmt.Errorf("re-reading the Etcd of StatefulSet %s/%s before a deletion: %w", sts.Namespace, sts.Name, err)
	}
	ops := operation.Of(etcd)
	if fresh.UID != sts.UID || !isManagedOnDelete(fresh) {
		ops = append(ops, operation.InFlight{Kind: operation.KindStrategyHold, Holder: "Etcd reconciler",
			Detail: "the StatefulSet was replaced or is no longer OnDelete"})
	}
	d, held := rollout.HeldByOperation(o.WithOperations(ops).WithBackup(backupgate.Of(etcd, o.Policy.WaitForBackupReady)))
	if !held {
		return nil, nil
	}
	return &d, nil
}

// isManagedOnDelete is the controller's predicate: owned by an Etcd and set to OnDelete.
func isManagedOnDelete(sts *appsv1.StatefulSet) bool {
	return sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType && memberaccess.EtcdOwner(sts) != nil
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

// deletePods deletes the pods of the decision, a batch's at once: the planner has already
// counted them all against the quorum's headroom, and one after the other would hold the
// batch's last member back by the others' round trips. The preconditions make a delete fail
// if the pod was replaced or changed since it was planned on; the pods of a batch deleted
// despite another's failure stay deleted, and the next decision sees them go.
func (r *Reconciler) deletePods(ctx context.Context, pods []corev1.Pod, d rollout.Decision) error {
	if len(d.Pods) == 0 {
		return fmt.Errorf("planner decided to delete without naming a pod")
	}
	errs := make([]error, len(d.Pods))
	var wg sync.WaitGroup
	for i, name := range d.Pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.deletePod(ctx, pods, name, d)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Reconciler) deletePod(ctx context.Context, pods []corev1.Pod, name string, d rollout.Decision) error {
	pod := resources.FindPod(pods, name)
	if pod == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	uid, rv := pod.UID, pod.ResourceVersion
	err := r.cfg.Client.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted outdated pod", "pod", pod.Name, "rule", d.Rule, "reason", d.Reason)
	return nil
}

// roleInputs reads what role resolution needs, for decision.Decide: the member Leases (uncached)
// and the members themselves through the pool, with the Etcd's client TLS material.
type roleInputs struct{ r *Reconciler }

func (in roleInputs) MemberLeases(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	return memberaccess.ReadMemberLeases(ctx, in.r.cfg.Reader, etcd)
}

func (in roleInputs) AskMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target) ([]roles.MemberReport, error) {
	r := in.r
	creds, err := r.cfg.Access.ClientTLS(ctx, etcd)
	if err != nil {
		r.cfg.Metrics.MemberClientErrors.WithLabelValues(etcd.Namespace, etcd.Name, "tls").Inc()
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, "MemberClientTLSInvalid",
			fmt.Sprintf("cannot build the member client TLS configuration, falling back to member leases: %v", err))
		return nil, err
	}
	if len(targets) == 0 {
		return nil, memberaccess.ErrNoMemberAddress
	}
	cs, err := memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembers, creds, targets).Statuses(ctx)
	if err != nil {
		r.cfg.Metrics.MemberClientErrors.WithLabelValues(etcd.Namespace, etcd.Name, "unreachable").Inc()
		// Perhaps the key pair or CA was rotated: read them again next time.
		r.cfg.Access.ForgetSecrets(etcd)
		return nil, err
	}
	r.cfg.Access.ForgetSecretsOnRefusal(etcd, cs)
	return decision.ReportsFromClusterStatus(etcd, cs), nil
}

func (in roleInputs) ServeReads(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target, names []string) ([]string, error) {
	r := in.r
	creds, err := r.cfg.Access.ClientTLS(ctx, etcd)
	if err != nil {
		// AskMembers reports a broken key pair when roles are needed; readiness still works.
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rejoinReadTimeout)
	defer cancel()
	return memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembers, creds, targets).LinearizableReads(ctx, names)
}

// recordRejoinReads counts the reads that asked replaced members whether they are back, by
// outcome: served (the member counted as participating before its readiness probe said so) or
// not yet.
func (r *Reconciler) recordRejoinReads(ctx context.Context, etcd *druidv1alpha1.Etcd, o decision.Outcome) {
	if len(o.Unheard) > 0 {
		logr.FromContextOrDiscard(ctx).Info("Members a failed handover went to did not serve a linearizable read; deletions wait for them",
			"unheard", o.Unheard, "error", fmt.Sprint(o.RejoinErr))
	}
	if len(o.AwaitingRejoin) == 0 {
		return
	}
	r.cfg.Metrics.RejoinReads.WithLabelValues(etcd.Namespace, etcd.Name, "served").Add(float64(len(o.Rejoined)))
	r.cfg.Metrics.RejoinReads.WithLabelValues(etcd.Namespace, etcd.Name, "not-yet").Add(float64(len(o.AwaitingRejoin) - len(o.Rejoined)))
	if len(o.Rejoined) > 0 {
		logr.FromContextOrDiscard(ctx).V(1).Info("Replaced members served a linearizable read before their readiness probe passed",
			"members", o.Rejoined)
	}
	if o.RejoinErr != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Replaced members not back yet", "awaiting", o.AwaitingRejoin, "error", o.RejoinErr.Error())
	}
}

// recordResolution logs, counts and reports a role resolution the decision depended on.
func (r *Reconciler) recordResolution(ctx context.Context, etcd *druidv1alpha1.Etcd, o decision.Outcome) {
	if o.MemberQueryErr != nil {
		logr.FromContextOrDiscard(ctx).Info("Could not ask the members who leads; using member leases", "error", o.MemberQueryErr.Error())
	}
	res := o.Resolution
	r.cfg.Metrics.RoleSource.WithLabelValues(etcd.Namespace, etcd.Name, string(res.Source)).Inc()
	if res.Mismatch && r.handedOver.within(etcdKey(etcd), r.now(), leaseCatchUp) {
		// Our own handover moved leadership since the agents last renewed their Leases: the
		// disagreement is that delay, not a fault worth a Warning.
		logr.FromContextOrDiscard(ctx).V(1).Info("Member Leases not yet renewed since the handover", "detail", res.Detail)
		return
	}
	if res.Mismatch {
		r.cfg.Metrics.RoleMismatches.WithLabelValues(etcd.Namespace, etcd.Name).Inc()
		r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, "LeaderMismatch", res.Detail)
	}
}

// report records the decision: status.lastOperation (which the status controller turns into the
// AllMembersUpdated condition's reason and message) and, when the decision changed or a pod was
// deleted, an Event on the Etcd.
func (r *Reconciler) report(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, d rollout.Decision, res roles.Resolution) error {
	op := etcdstatus.RolloutOperation(d, res, decision.NeedsRoles(d), sts.Status.UpdateRevision, metav1.NewTime(r.now()))
	changed := !etcdstatus.SameRolloutOperation(etcd.Status.LastOperation, op)
	if !changed && d.Action != rollout.ActionDelete {
		return nil
	}
	eventType := corev1.EventTypeNormal
	if d.Rule == rollout.RuleOutOfBounds {
		eventType = corev1.EventTypeWarning
	}
	r.cfg.Recorder.Event(etcd, eventType, d.Rule.CamelCase(), op.Description)
	if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterOnDelete, func(s *druidv1alpha1.EtcdStatus) {
		s.LastOperation = &op
	}); err != nil {
		return fmt.Errorf("recording rollout decision: %w", err)
	}
	return nil
}
