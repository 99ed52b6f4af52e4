package membership

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Config holds the controller's dependencies.
type Config struct {
	// Client reads through the informer cache and writes; Reader reads uncached, before an
	// action is taken.
	Client client.Client
	Reader client.Reader
	// Access reaches the members: their client key pair, its Secrets read through a cache. Nil
	// reads them through Reader on every use, with no operator-wide key pair.
	Access   *memberaccess.Access
	Recorder record.EventRecorder
	Members  memberaccess.Pool
	// StepInterval is how soon a membership change in progress is looked at again;
	// SettledInterval how often a settled cluster is checked (superfluous members, lost data).
	StepInterval    time.Duration
	SettledInterval time.Duration
	// SuperfluousGrace is how long a member no pod of the Etcd stands for is left alone.
	SuperfluousGrace time.Duration
	// WaitForBackupReady is the operator's controllers.etcd.waitForBackupReady: a scale-in
	// waits while the Etcd's BackupReady is False (package backupgate).
	WaitForBackupReady bool
	// NotReadyGrace is how long a minority member stays NotReady before its pod is deleted so it
	// restarts (DEP-01 operator scenario 9: internal/decide/memberhealth; etcd-druid's
	// controllers.etcd.etcdMember.notReadyThreshold). memberhealth.DefaultNotReadyGrace when 0.
	NotReadyGrace time.Duration
}

// DefaultSuperfluousGrace is how long a member no pod of the Etcd stands for is left alone
// unless Config says otherwise.
const DefaultSuperfluousGrace = time.Minute

// Reconciler is the membership controller.
type Reconciler struct {
	cfg Config
	now func() time.Time

	// foreignSince remembers when a member that stands for no pod was first seen (by cluster key
	// and member ID). Losing it on a restart only restarts the grace period.
	mu           sync.Mutex
	foreignSince map[string]time.Time
	// seedMatched remembers, by cluster key and member ID, a seeded learner whose keyspace equalled
	// the leader's: from then on it follows the leader's log, so the comparison (a read of the
	// whole keyspace on two members) is not made again while etcd refuses the promotion until it
	// has caught up. Losing it on a restart only compares once more.
	seedMatched map[string]*membership.KeyspaceComparison
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler builds the controller.
func NewReconciler(cfg Config) *Reconciler {
	if cfg.StepInterval == 0 {
		cfg.StepInterval = 2 * time.Second
	}
	if cfg.SettledInterval == 0 {
		cfg.SettledInterval = 15 * time.Second
	}
	if cfg.SuperfluousGrace == 0 {
		cfg.SuperfluousGrace = DefaultSuperfluousGrace
	}
	if cfg.NotReadyGrace <= 0 {
		cfg.NotReadyGrace = memberhealth.DefaultNotReadyGrace
	}
	if cfg.Access == nil {
		cfg.Access = memberaccess.New(memberaccess.Config{Reader: cfg.Reader})
	}
	return &Reconciler{cfg: cfg, now: time.Now, foreignSince: map[string]time.Time{}, seedMatched: map[string]*membership.KeyspaceComparison{}}
}

// members reaches the member pods tgts with creds, under the controller's own connections in the
// pool: separate from the OnDelete controller's, whose target set differs while pods come and go.
func (r *Reconciler) members(etcd *druidv1alpha1.Etcd, tgts []memberaccess.Target, creds conductortls.ClientMaterial) *memberaccess.Cluster {
	return memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembership, creds, tgts)
}

// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile runs one membership step:
//  1. read the Etcd, its StatefulSet, pods and member Leases from the informer cache;
//  2. ask the members (status of each, the leader's member list) over mTLS; record the cluster
//     ID once the cluster has formed (from a member that answers, or else from a majority of
//     fresh member Leases: leaseClusterID), and its voters whenever its leader lists others;
//  3. plan (internal/decide/membership); when the plan is an action, or waits to know which voters the
//     leader hears, read the Etcd, StatefulSet, pods and Leases again uncached and plan again on
//     them, so no action is ever taken on a lagging informer; when that plan counts a quorum
//     (remove, promote, move leadership, add a learner), ask which voters the leader hears (hear)
//     and plan once more on that. A settled cluster (the plan waits or is done) costs no uncached
//     read and no linearizable read;
//  4. carry out at most one action;
//  5. report: the ScaleOperationInProgress condition and an Event per action or refusal;
//  6. once the plan is settled (done), restart a stuck member: restartStuck.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	view, err := r.read(ctx, r.cfg.Client, req.NamespacedName)
	if err != nil || view == nil || takeover.Decide(view.etcd).Held {
		return ctrl.Result{}, err
	}
	etcd := view.etcd

	tgts := memberaccess.Targets(etcd, view.pods)
	creds, cs, credsErr := r.askMembers(ctx, etcd, tgts)
	if etcd.Status.ClusterID == "" {
		if err := r.recordClusterID(ctx, etcd, cs, view.leases); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
	}
	if err := r.recordVoters(ctx, etcd, cs); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, err
	}

	decision := r.plan(view, cs, nil, nil, credsErr)
	if (decision.Action != membership.ActionWait && decision.Action != membership.ActionDone) || decision.Rule == membership.RuleHeardUnknown {
		// An action, or one the leader's view decides: decide again on what the apiserver holds
		// now.
		fresh, err := r.read(ctx, r.cfg.Reader, req.NamespacedName)
		if err != nil || fresh == nil {
			return ctrl.Result{}, err
		}
		view, etcd = fresh, fresh.etcd
		if freshTgts := memberaccess.Targets(etcd, view.pods); !sameTargets(tgts, freshTgts) {
			// Pods came or went since the cache saw them: ask the members those pods are.
			tgts = freshTgts
			creds, cs, credsErr = r.askMembers(ctx, etcd, tgts)
		}
		decision = r.plan(view, cs, nil, nil, credsErr)
		var heard map[uint64]bool
		if decision.Rule == membership.RuleHeardUnknown {
			// The step counts a quorum: on the voters the leader hears, never on those that
			// answered.
			heard = r.hear(ctx, etcd, tgts, creds, cs)
			decision = r.plan(view, cs, heard, nil, credsErr)
		}
		if decision.Rule == membership.RuleSeedUnverified && decision.Member != nil {
			// A seeded learner votes only with the leader's keyspace: compare them now.
			compared := r.compareSeed(ctx, etcd, creds, tgts, cs, decision.Member)
			decision = r.plan(view, cs, heard, map[uint64]*membership.KeyspaceComparison{decision.Member.ID: compared}, credsErr)
		}
	}
	sts := view.sts
	log.V(1).Info("Membership decision", "action", decision.Action, "rule", decision.Rule, "reason", decision.Reason)

	result := ctrl.Result{RequeueAfter: r.cfg.StepInterval, Priority: priority.For(true)}
	if decision.Action == membership.ActionDone || len(tgts) == 0 {
		// Settled, or no member to ask (no pod has an address yet: a pod event wakes us when
		// one has): a poll now and then, behind clusters with something to do.
		result = ctrl.Result{RequeueAfter: r.cfg.SettledInterval, Priority: priority.For(false)}
	}
	actErr := r.act(ctx, etcd, sts, tgts, creds, cs, decision)
	if actErr != nil {
		switch {
		case memberaccess.IsLearnerNotReady(actErr):
			// etcd refuses until the learner has ~90 % of the leader's log: ask again shortly,
			// not in a tight loop.
			decision = membership.Decision{Action: membership.ActionWait, Rule: RuleLearnerNotReady,
				Reason: fmt.Sprintf("learner %s has not caught up with the leader yet (etcd: %v); retrying", describe(decision.Member), actErr)}
			actErr = nil
		case memberaccess.IsUnhealthyCluster(actErr):
			// etcd's strict reconfiguration check: a voter (say, one just promoted) has not been
			// connected long enough. It passes within seconds.
			decision = membership.Decision{Action: membership.ActionWait, Rule: RuleClusterSettling,
				Reason: fmt.Sprintf("%s: etcd refused for now (%v); retrying", decision.Reason, actErr)}
			actErr = nil
		default:
			decision.Reason = fmt.Sprintf("%s: failed: %v", decision.Reason, actErr)
		}
	}
	if err := r.report(ctx, etcd, decision, actErr); err != nil {
		if apierrors.IsConflict(err) && actErr == nil {
			// Other writers patched the Etcd twice meanwhile (a rollout writes status too): the
			// decision is made again on the next copy, which their watch events bring.
			log.V(1).Info("Etcd changed while the decision was recorded; deciding again", "error", err.Error())
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, err
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	if decision.Action == membership.ActionDone {
		// Settled: only now may a stuck member's pod be deleted (DEP-01 operator scenario 9).
		if err := r.restartStuck(ctx, view, tgts, creds, cs); err != nil {
			return ctrl.Result{}, err
		}
	}
	return result, nil
}

// ageForeign sets SeenFor of members that stand for no pod and forgets those gone.
func (r *Reconciler) ageForeign(key string, members []membership.Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	seen := map[string]bool{}
	for i := range members {
		if members[i].Ordinal >= 0 {
			continue
		}
		k := key + "/" + strconv.FormatUint(members[i].ID, 16)
		seen[k] = true
		first, ok := r.foreignSince[k]
		if !ok {
			first = now
			r.foreignSince[k] = now
		}
		members[i].SeenFor = now.Sub(first)
	}
	for k := range r.foreignSince {
		if strings.HasPrefix(k, key+"/") && !seen[k] {
			delete(r.foreignSince, k)
		}
	}
}

// The controller's own waits, when etcd refuses a step the planner chose.
const (
	// RuleLearnerNotReady: etcd refused a promotion, the learner has not caught up.
	RuleLearnerNotReady membership.RuleID = membership.Planner + "/wait/learner-catching-up"
	// RuleClusterSettling: etcd refused a membership change while a voter is freshly connected.
	RuleClusterSettling membership.RuleID = membership.Planner + "/wait/cluster-settling"
)

func describe(m *membership.Member) string {
	if m == nil {
		return "?"
	}
	return fmt.Sprintf("%s (%x)", m.Name, m.ID)
}

// act carries out one decision. Each action is safe to repeat: a member already added, promoted
// or removed makes etcd refuse the repetition, which is treated as done.
func (r *Reconciler) act(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, tgts []memberaccess.Target, creds conductortls.ClientMaterial, cs *memberaccess.ClusterStatus, d membership.Decision) error {
	log := logr.FromContextOrDiscard(ctx)
	members := r.members(etcd, tgts, creds)
	switch d.Action {
	case membership.ActionSetReplicas:
		patch := client.MergeFromWithOptions(sts.DeepCopy(), client.MergeFromWithOptimisticLock{})
		n := int32(d.Replicas)
		sts.Spec.Replicas = &n
		if err := r.cfg.Client.Patch(ctx, sts, patch); err != nil {
			return fmt.Errorf("setting StatefulSet %s/%s replicas to %d: %w", sts.Namespace, sts.Name, n, err)
		}
	case membership.ActionAddLearner:
		peers := PeerURLs(etcd, sts, d.Ordinal)
		m, err := members.AddLearner(ctx, cs, peers)
		if err != nil && !memberaccess.IsPeerURLExist(err) {
			return err
		}
		log.Info("Added learner", "peerURLs", peers, "id", strconv.FormatUint(m.ID, 16))
	case membership.ActionPromote:
		if err := members.Promote(ctx, cs, d.Member.ID); err != nil {
			return err
		}
		log.Info("Promoted learner", "member", d.Member.Name)
	case membership.ActionRemove:
		if err := members.Remove(ctx, cs, d.Member.ID); err != nil && !memberaccess.IsMemberNotFound(err) {
			return err
		}
		log.Info("Removed member", "member", d.Member.Name, "id", strconv.FormatUint(d.Member.ID, 16))
		if d.Rule == membership.RuleSeedMismatch {
			// Its pod starts again: the init step finds the data of a removed member and moves it
			// aside (never deleted), and the learner added again joins unseeded.
			if err := r.deletePod(ctx, sts.Namespace, d.Member.Name); err != nil {
				return err
			}
			log.Info("Restarted the pod of a learner removed for a seed that is not the leader's data", "pod", d.Member.Name)
		}
	case membership.ActionUpdatePeerURL:
		if err := members.UpdatePeerURLs(ctx, cs, d.Member.ID, d.PeerURLs); err != nil {
			return err
		}
		log.Info("Updated peer URLs", "member", d.Member.Name, "peerURLs", d.PeerURLs)
	case membership.ActionMoveLeader:
		if err := members.MoveLeader(ctx, d.Member.Name, d.Target.ID); err != nil {
			return err
		}
		log.Info("Moved leadership", "from", d.Member.Name, "to", d.Target.Name)
	}
	return nil
}

// clusterView is one look at an Etcd and what the controller observes of it in Kubernetes.
type clusterView struct {
	etcd   *druidv1alpha1.Etcd
	sts    *appsv1.StatefulSet
	pods   []corev1.Pod
	leases []coordinationv1.Lease
}

// read reads the Etcd, its StatefulSet, pods and member Leases through reader (the cache or the
// apiserver). Nil means there is nothing to do: the Etcd is gone or being deleted, or its
// StatefulSet does not exist yet (its creation wakes us) or is not its own.
func (r *Reconciler) read(ctx context.Context, reader client.Reader, key types.NamespacedName) (*clusterView, error) {
	etcd := &druidv1alpha1.Etcd{}
	if err := reader.Get(ctx, key, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.cfg.Members.Forget(memberaccess.PoolKey(key.Namespace, key.Name, memberaccess.ForMembership))
		}
		return nil, client.IgnoreNotFound(err)
	}
	if !etcd.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	sts := &appsv1.StatefulSet{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(sts, etcd) {
		return nil, nil
	}
	pods, err := memberaccess.ReadMemberPods(ctx, reader, sts)
	if err != nil {
		return nil, err
	}
	leases, err := memberaccess.ReadMemberLeases(ctx, reader, etcd)
	if err != nil {
		return nil, err
	}
	return &clusterView{etcd: etcd, sts: sts, pods: pods, leases: leases}, nil
}

// askMembers asks the member pods tgts for their status over mTLS, with the Etcd's client key
// pair; nil status when there is no target or none answered. The error says why the key pair
// could not be built; the members not answering is no error (the plan waits).
func (r *Reconciler) askMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, tgts []memberaccess.Target) (conductortls.ClientMaterial, *memberaccess.ClusterStatus, error) {
	if len(tgts) == 0 {
		return conductortls.ClientMaterial{}, nil, nil
	}
	creds, err := r.cfg.Access.ClientTLS(ctx, etcd)
	if err != nil {
		return creds, nil, err
	}
	got, err := r.members(etcd, tgts, creds).Statuses(ctx)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("No member answered", "error", err.Error())
		// Perhaps the key pair or CA was rotated: read them again next time.
		r.cfg.Access.ForgetSecrets(etcd)
		return creds, nil, nil
	}
	r.cfg.Access.ForgetSecretsOnRefusal(etcd, got)
	return creds, &got, nil
}

func sameTargets(a, b []memberaccess.Target) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// plan observes the view with what the members said and plans one step. heard is which voters
// the leader hears (hear), nil when not asked: then no step that counts a quorum is taken.
func (r *Reconciler) plan(v *clusterView, cs *memberaccess.ClusterStatus, heard map[uint64]bool, keyspaces map[uint64]*membership.KeyspaceComparison, credsErr error) membership.Decision {
	observed := Observe(v.etcd, v.sts, v.pods, v.leases, cs, r.cfg.WaitForBackupReady)
	observed.SuperfluousGrace = r.cfg.SuperfluousGrace
	observed = WithKeyspaces(WithHeard(observed, heard), keyspaces)
	r.ageForeign(memberaccess.PoolKey(v.etcd.Namespace, v.etcd.Name, memberaccess.ForMembership), observed.Members)
	d := membership.Plan(observed)
	if credsErr != nil && !observed.MembersKnown {
		d.Reason += fmt.Sprintf(" (member client TLS: %v)", credsErr)
	}
	return d
}

// hear asks which voters the leader hears (Hear) through the controller's pool.
func (r *Reconciler) hear(ctx context.Context, etcd *druidv1alpha1.Etcd, tgts []memberaccess.Target, creds conductortls.ClientMaterial, cs *memberaccess.ClusterStatus) map[uint64]bool {
	return Hear(ctx, r.members(etcd, tgts, creds), etcd, cs)
}

// Hear asks which voters the leader hears, as the leader sees it, by member ID: the member that
// answered as leader in cs, and each other voter that serves a linearizable read now. A
// linearizable read is a ReadIndex the leader must confirm, so a voter the leader does not hear
// cannot serve one, though it still answers a status request (cut off from the leader on the
// peer network, its client port open). The reads go out concurrently, each bounded by the
// pool's call timeout. A voter no pod address stands for is not heard, nor is any voter when no
// member answered as leader. The map is never nil: nil is "not asked" to WithHeard. It is
// exported for `plan`, which asks live members the same question.
func Hear(ctx context.Context, members *memberaccess.Cluster, etcd *druidv1alpha1.Etcd, cs *memberaccess.ClusterStatus) map[uint64]bool {
	heard := map[uint64]bool{}
	if cs == nil {
		return heard
	}
	leader, ok := cs.Leader()
	if !ok {
		return heard
	}
	heard[leader.ID] = true
	ids := map[string]uint64{}
	var names []string
	for _, m := range cs.MemberList {
		// Targets are pods; a member that stands for none is asked nothing and counts as not
		// heard, as a member of no pod always did.
		pod, ordinal := memberPod(etcd, m)
		if m.IsLearner || m.ID == leader.ID || ordinal < 0 ||
			!slices.ContainsFunc(members.Targets(), func(t memberaccess.Target) bool { return t.Name == pod }) {
			continue
		}
		ids[pod] = m.ID
		names = append(names, pod)
	}
	if len(names) == 0 {
		return heard
	}
	served, err := members.LinearizableReads(ctx, names)
	for _, name := range served {
		heard[ids[name]] = true
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Voters that served no linearizable read are not counted as heard by the leader",
			"leader", leader.Name, "asked", names, "served", served, "error", err.Error())
	}
	return heard
}

// recordClusterID writes status.clusterID once the cluster has formed: from now on members
// without data join, never bootstrap (the Etcd reconciler turns ETCD_INITIAL_CLUSTER_STATE to
// "existing"). The ID is the one a member answering the operator reports or, when none does (no
// network path from the operator to the members), the one a majority of spec.replicas' fresh
// member Leases report (leaseClusterID, which says why that can only stop a bootstrap). Nothing
// is written while neither knows it.
func (r *Reconciler) recordClusterID(ctx context.Context, etcd *druidv1alpha1.Etcd, cs *memberaccess.ClusterStatus, leases []coordinationv1.Lease) error {
	id, source := clusterID(cs), "a member answered the operator"
	if id == "" {
		var from []string
		id, from = leaseClusterID(etcd, leases, r.now())
		source = fmt.Sprintf("no member answered the operator; the member Leases of %s report it", strings.Join(from, ", "))
	}
	if id == "" {
		return nil
	}
	if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.ClusterID = id
	}); err != nil {
		return fmt.Errorf("recording cluster ID: %w", err)
	}
	r.cfg.Recorder.Eventf(etcd, corev1.EventTypeNormal, "ClusterBootstrapped", "etcd cluster %s formed (%s); members without data now join it", id, source)
	return nil
}

// report sets the ScaleOperationInProgress condition and emits an Event for every action and
// for every change of what the controller waits on. The condition goes through etcdstatus.Patch,
// which sends nothing when it is already as decided.
func (r *Reconciler) report(ctx context.Context, etcd *druidv1alpha1.Etcd, d membership.Decision, actErr error) error {
	condStatus := druidv1alpha1.ConditionFalse
	if d.InProgress() || d.Rule == RuleLearnerNotReady || d.Rule == RuleClusterSettling {
		condStatus = druidv1alpha1.ConditionTrue
	}
	reason := d.Rule.CamelCase()
	message := fmt.Sprintf("%s [%s]", d.Reason, d.Rule)
	prev := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress)
	acted := d.Action != membership.ActionWait && d.Action != membership.ActionDone
	if acted || prev == nil || prev.Reason != reason {
		eventType := corev1.EventTypeNormal
		if actErr != nil || isRefusal(d.Rule) {
			eventType = corev1.EventTypeWarning
		}
		r.cfg.Recorder.Event(etcd, eventType, reason, message)
	}
	cond := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress, Status: condStatus,
		Reason: reason, Message: message, LastUpdateTime: metav1.NewTime(r.now())}
	if err := r.setCondition(ctx, etcd, cond); err != nil {
		return fmt.Errorf("recording membership decision: %w", err)
	}
	return nil
}

// setCondition writes one of this controller's conditions. On a conflict (the cached copy lags,
// or another writer patched meanwhile) it writes it at once on a fresh copy rather than at the
// next poll: the OnDelete controller waits on ScaleOperationInProgress, and a pod deleted for
// MemberRestart would otherwise go unrecorded (the next pass finds the member no longer stuck).
func (r *Reconciler) setCondition(ctx context.Context, etcd *druidv1alpha1.Etcd, cond druidv1alpha1.Condition) error {
	set := func(s *druidv1alpha1.EtcdStatus) { s.Conditions = etcdstatus.SetCondition(s.Conditions, cond) }
	err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterMembership, set)
	if apierrors.IsConflict(err) {
		fresh := &druidv1alpha1.Etcd{}
		if err = r.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(etcd), fresh); err == nil {
			err = etcdstatus.Patch(ctx, r.cfg.Client, fresh, etcdstatus.WriterMembership, set)
		}
	}
	return err
}

func isRefusal(r membership.RuleID) bool {
	switch r {
	case membership.RulePromoteUnsafe, membership.RuleReplaceUnsafe, membership.RuleRemoveUnsafe,
		membership.RuleAddUnsafe, membership.RuleNoLeaderTarget, membership.RuleSeedMismatch:
		return true
	}
	return false
}
