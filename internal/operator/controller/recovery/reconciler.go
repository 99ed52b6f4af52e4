package recovery

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// DefaultGrace is how long quorum must have been lost before a restore starts: long enough for
// a member that restarts or is rescheduled to come back with its data.
const DefaultGrace = 30 * time.Second

// Config holds the controller's dependencies.
type Config struct {
	Client   client.Client
	Reader   client.Reader
	Recorder record.EventRecorder
	Members  memberaccess.Pool
	// Access reaches the members: their client key pair, read fresh on every look, since
	// members not answering is what a lost quorum looks like, not a sign of a rotated key pair.
	// Nil reads it through Reader, with no operator-wide key pair.
	Access *memberaccess.Access
	// Reports says whether the members' reports on their Leases are authenticated now
	// (internal/operator/reportauth): a report proves a voter's data gone only then. Nil: they never are.
	Reports Reports
	// Grace is how long quorum must have been lost before a restore starts (DefaultGrace).
	Grace time.Duration
	// StepInterval is how soon a cluster without quorum or in recovery is looked at again;
	// SettledInterval how often a quorate one is.
	StepInterval, SettledInterval time.Duration
}

// Reports is the part of reportauth.Checker the controller uses: why a member's report proves
// nothing now ("" when it does).
type Reports interface {
	Unauthenticated(ctx context.Context) string
}

// noReports is Config.Reports left out: no report is authenticated.
type noReports struct{}

func (noReports) Unauthenticated(context.Context) string {
	return "nothing checks that an admission policy authenticates them"
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
	if cfg.Access == nil {
		cfg.Access = memberaccess.New(memberaccess.Config{Reader: cfg.Reader})
	}
	if cfg.Reports == nil {
		cfg.Reports = noReports{}
	}
	return &Reconciler{cfg: cfg, now: time.Now}
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
			r.cfg.Members.Forget(memberaccess.PoolKey(req.Namespace, req.Name, memberaccess.ForRecovery))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !etcd.DeletionTimestamp.IsZero() || takeover.Decide(etcd).Held {
		return ctrl.Result{}, nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.cfg.Reader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(sts, etcd) || sts.Spec.Replicas == nil || *sts.Spec.Replicas == 0 {
		return ctrl.Result{}, nil
	}
	pods, err := memberaccess.ReadMemberPods(ctx, r.cfg.Reader, sts)
	if err != nil {
		return ctrl.Result{}, err
	}
	leases, err := memberaccess.ReadMemberLeases(ctx, r.cfg.Reader, etcd)
	if err != nil {
		return ctrl.Result{}, err
	}
	var cs *memberaccess.ClusterStatus
	creds, credsErr := r.cfg.Access.FreshClientTLS(ctx, etcd)
	if tgts := memberaccess.Targets(etcd, pods); credsErr == nil && len(tgts) > 0 {
		if got, err := memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForRecovery, creds, tgts).Statuses(ctx); err == nil {
			cs = &got
		}
	}
	leases = resources.ControlledLeases(etcd, leases)
	r.removeForgedOrders(ctx, etcd, leases)
	o := Observe(etcd, pods, leases, cs, r.cfg.Grace, r.now())
	o.ProofUnauthenticated = r.cfg.Reports.Unauthenticated(ctx)
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
// bootstrapped) clusters costs no uncached read and no member query (NothingToRecover). The
// member Leases are read only when the Etcd's status alone does not call for a look.
func (r *Reconciler) nothingToRecover(ctx context.Context, req ctrl.Request) (bool, error) {
	etcd := &druidv1alpha1.Etcd{}
	if err := r.cfg.Client.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.cfg.Members.Forget(memberaccess.PoolKey(req.Namespace, req.Name, memberaccess.ForRecovery))
		}
		return true, client.IgnoreNotFound(err)
	}
	if err := r.acknowledgeIncompleteRestore(ctx, etcd); err != nil {
		return false, err
	}
	if etcd.Status.ClusterID != "" && statusCallsForLook(etcd) {
		return NothingToRecover(etcd, nil), nil
	}
	leases, err := memberaccess.ReadMemberLeases(ctx, r.cfg.Client, etcd)
	if err != nil {
		return false, err
	}
	return NothingToRecover(etcd, leases), nil
}

// NothingToRecover says the controller leaves the Etcd alone without asking its members: there is
// nothing to recover unless the cluster has bootstrapped (status.clusterID) and either its Ready
// condition says quorum is lost or a recovery is recorded (RecoveryInProgress True,
// status.recovery, or a restore order on a member Lease, which must be reported and removed even
// after quorum is back). A cluster that never formed is looked at only while a bootstrap from its
// backup is under way (status.recovery) or a member Lease says its member waits for one. `plan`
// asks it too, so it reports what the controller would do.
func NothingToRecover(etcd *druidv1alpha1.Etcd, leases []coordinationv1.Lease) bool {
	if etcd.Status.ClusterID == "" {
		return etcd.Status.Recovery == nil && !awaitsBootstrapFromBackup(leases)
	}
	if statusCallsForLook(etcd) {
		return false
	}
	for _, l := range leases {
		if l.Annotations[memberlease.AnnotationRestore] != "" {
			// A forged order, to report and remove.
			return false
		}
	}
	return true
}

// awaitsBootstrapFromBackup: a member Lease reports a member of a new cluster waiting to
// bootstrap from the backup. Only a reason to look: the planner weighs the report.
func awaitsBootstrapFromBackup(leases []coordinationv1.Lease) bool {
	for _, l := range leases {
		if r, ok := memberlease.ParseStartReport(l.Annotations); ok && r.Rule == memberlease.StartRuleBootstrapFromBackup {
			return true
		}
	}
	return false
}

// statusCallsForLook: the Etcd's status says quorum is lost or a recovery is under way.
func statusCallsForLook(etcd *druidv1alpha1.Etcd) bool {
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); c != nil &&
		c.Status == druidv1alpha1.ConditionFalse && c.Reason == etcdstatus.ReasonQuorumLost {
		return true
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress); c != nil &&
		c.Status == druidv1alpha1.ConditionTrue {
		return true
	}
	return etcd.Status.Recovery != nil
}

// removeForgedOrders reports and removes restore orders written on member Leases: the operator
// orders restores only in the Etcd's status, so whoever wrote one there (a member pod, a
// namespace user with Lease access) is not the operator. Nothing acts on them; removing them
// keeps the report to one Event each.
func (r *Reconciler) removeForgedOrders(ctx context.Context, etcd *druidv1alpha1.Etcd, leases []coordinationv1.Lease) {
	for _, l := range leases {
		raw := l.Annotations[memberlease.AnnotationRestore]
		if raw == "" {
			continue
		}
		r.cfg.Recorder.Eventf(etcd, corev1.EventTypeWarning, ReasonForgedRestoreOrder,
			"ignored a restore order written on Lease %s (%q): only the operator orders a restore, in the Etcd's status; the annotation is removed", l.Name, raw)
		if err := r.annotateLease(ctx, etcd.Namespace, l.Name, memberlease.AnnotationRestore, ""); err != nil {
			logr.FromContextOrDiscard(ctx).Info("Could not remove a forged restore order", "lease", l.Name, "error", err.Error())
		}
	}
}

// ReasonForgedRestoreOrder is the Event reason for a restore order found outside the status.
const ReasonForgedRestoreOrder = "ForgedRestoreOrderIgnored"

// Observe puts together what the planner decides on: the recorded voters with the evidence of
// their current pods, the member pods (pods controlled by the StatefulSet), the member Leases
// the Etcd controls, and what the members said (cs nil: none answered), with the controller's
// grace and clock. It reads nothing itself, so `plan` runs the very same observation on a saved
// state and saved member answers.
func Observe(etcd *druidv1alpha1.Etcd, pods []corev1.Pod, leases []coordinationv1.Lease, cs *memberaccess.ClusterStatus, grace time.Duration, now time.Time) recovery.Observed {
	o := recovery.Observed{
		Desired:           int(etcd.Spec.Replicas),
		Grace:             grace,
		RecordedClusterID: etcd.Status.ClusterID,
		BackupConfigured:  backupConfigured(etcd),
		NewToken:          fmt.Sprintf("%s-%s-restored-%d", etcd.Namespace, etcd.Name, now.Unix()),
	}
	if req := etcd.Status.Recovery; req != nil {
		// The order names the etcd member (the init step knows itself by that name), the
		// planner the pod; a name of no pod is kept as it is and matches no pod.
		member, ok := resources.PodOfMember(etcd, req.Member)
		if !ok {
			member = req.Member
		}
		o.InProgress = &recovery.State{Member: member, PodUID: req.PodUID, Token: req.Token, OldClusterID: req.OldClusterID}
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); c != nil &&
		c.Status == druidv1alpha1.ConditionFalse && c.Reason == etcdstatus.ReasonQuorumLost {
		o.QuorumLost, o.QuorumLostFor = true, now.Sub(c.LastTransitionTime.Time)
	}
	// Leases are named as their etcd members; the planner knows members by pod.
	leaseOf := map[string]*coordinationv1.Lease{}
	for i := range leases {
		if pod, ok := resources.PodOfMember(etcd, leases[i].Name); ok {
			leaseOf[pod] = &leases[i]
		}
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
			o.LeaderID = strconv.FormatUint(leader.ID, 16)
		}
	}
	podOf := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if _, ok := resources.OrdinalOf(etcd, p.Name); !ok {
			continue
		}
		podOf[p.Name] = p
		o.Pods = append(o.Pods, podEvidence(etcd, p, leaseOf[p.Name], clusterOf[p.Name]))
	}
	for _, rv := range etcd.Status.Voters {
		// Voters are recorded under their etcd member names. One that maps to no pod has no pod
		// to prove anything: it keeps its own name, and no evidence.
		pod, ok := resources.PodOfMember(etcd, rv.Name)
		if !ok {
			o.Voters = append(o.Voters, voterEvidence(rv, rv.Name, nil, nil, "", etcd.Status.ClusterID))
			continue
		}
		o.Voters = append(o.Voters, voterEvidence(rv, pod, podOf[pod], leaseOf[pod], clusterOf[pod], etcd.Status.ClusterID))
	}
	return o
}

// voterEvidence is what the current pod of a recorded voter proves. Without data means: the
// init step of this very pod incarnation, still running, reported an empty data dir. Holding
// data means: its etcd answered as a member of the recorded cluster, or its init step found
// valid data. Anything else (no pod, a pod that has not reported, etcd down or crash-looping, an
// older incarnation's report) proves nothing either way.
func voterEvidence(rv druidv1alpha1.RecordedVoter, name string, pod *corev1.Pod, lease *coordinationv1.Lease, clusterID, recordedClusterID string) recovery.Voter {
	v := recovery.Voter{Name: name, ID: rv.ID}
	if pod == nil {
		v.State = "no pod"
		return v
	}
	v.PodUID = string(pod.UID)
	report, reported := currentReport(pod, lease)
	switch {
	case clusterID != "":
		v.State = "etcd answers as a member of cluster " + clusterID
		v.HasData = clusterID == recordedClusterID
	case reported:
		v.State = fmt.Sprintf("init step found %s data: %s", report.Data, startDecision(lease))
		v.DataGone = report.Data == memberlease.DataEmpty
		v.HasData = report.Data == memberlease.DataValid
	case initRunning(pod):
		v.State = "init step of this pod has not reported yet (its volume may hold data)"
	case containerRunning(pod.Status.ContainerStatuses, resources.EtcdContainerName):
		v.State = "etcd runs but does not answer (its volume may hold data)"
	default:
		v.State = "pod down (its volume may hold data)"
	}
	return v
}

// podEvidence is what a member pod is and what its current incarnation proved: the same proof
// rules as a voter's (voterEvidence), for a new Etcd that may start from its backup.
func podEvidence(etcd *druidv1alpha1.Etcd, p *corev1.Pod, lease *coordinationv1.Lease, clusterID string) recovery.Pod {
	ordinal, _ := resources.OrdinalOf(etcd, p.Name)
	out := recovery.Pod{
		Name: p.Name, UID: string(p.UID), Ordinal: ordinal, ClusterID: clusterID, StartDecision: startDecision(lease),
		EtcdRunning: containerRunning(p.Status.ContainerStatuses, resources.EtcdContainerName),
		NoSpace:     noSpace(p, lease),
		PastInit:    p.DeletionTimestamp == nil && initSucceeded(p),
	}
	report, ok := currentReport(p, lease)
	switch {
	case clusterID != "":
		out.State = "etcd answers as a member of cluster " + clusterID
	case ok:
		out.State = fmt.Sprintf("init step found %s data: %s", report.Data, startDecision(lease))
		out.ProvedEmpty = report.Data == memberlease.DataEmpty
		out.AwaitsBackup = out.ProvedEmpty && report.Rule == memberlease.StartRuleBootstrapFromBackup
		out.HasData = report.Data == memberlease.DataValid
	case initRunning(p):
		out.State = "init step of this pod has not reported yet"
	case out.EtcdRunning:
		out.State = "etcd runs but does not answer"
	default:
		out.State = "pod down"
	}
	return out
}

// currentReport is the init step's start report when this very pod incarnation wrote it and its
// init step still runs: the only report that proves anything about the pod's data dir now.
func currentReport(p *corev1.Pod, lease *coordinationv1.Lease) (memberlease.StartReport, bool) {
	if lease == nil || !initRunning(p) {
		return memberlease.StartReport{}, false
	}
	report, ok := memberlease.ParseStartReport(lease.Annotations)
	return report, ok && report.PodUID == string(p.UID)
}

// noSpace is the space shortage the init step of this very pod reported for its restore (nil:
// none, or a report of another incarnation).
func noSpace(pod *corev1.Pod, lease *coordinationv1.Lease) *recovery.SpaceShortage {
	if lease == nil {
		return nil
	}
	report, ok := memberlease.ParseStartReport(lease.Annotations)
	if !ok || report.PodUID != string(pod.UID) || report.NoSpace == nil {
		return nil
	}
	return &recovery.SpaceShortage{Dir: report.NoSpace.Dir, Need: report.NoSpace.Need, Free: report.NoSpace.Free}
}

func startDecision(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.Annotations[memberlease.AnnotationStartDecision]
}

// backupConfigured: spec.backup names a store provider.
func backupConfigured(e *druidv1alpha1.Etcd) bool {
	b := e.Spec.Backup
	return b != nil && b.Store != nil && b.Store.Provider != nil && string(*b.Store.Provider) != ""
}

func initRunning(p *corev1.Pod) bool {
	return containerRunning(p.Status.InitContainerStatuses, resources.MemberInitContainerName)
}

// initSucceeded: the pod's init step ended with success, so the kubelet runs (and restarts) its
// etcd on what the step left and never runs the step again for this incarnation.
func initSucceeded(p *corev1.Pod) bool {
	s := containerState(p.Status.InitContainerStatuses, resources.MemberInitContainerName)
	return s.Terminated != nil && s.Terminated.ExitCode == 0
}

func containerRunning(statuses []corev1.ContainerStatus, name string) bool {
	return containerState(statuses, name).Running != nil
}

// containerState is the named container's state; the zero state (none of running, waiting,
// terminated) when the kubelet has not reported it.
func containerState(statuses []corev1.ContainerStatus, name string) corev1.ContainerState {
	for _, s := range statuses {
		if s.Name == name {
			return s.State
		}
	}
	return corev1.ContainerState{}
}

func (r *Reconciler) act(ctx context.Context, etcd *druidv1alpha1.Etcd, o recovery.Observed, d *recovery.Decision) error {
	log := logr.FromContextOrDiscard(ctx)
	now := r.now().UTC()
	switch d.Action {
	case recovery.ActionStart:
		s := *d.State
		order := &druidv1alpha1.RecoveryRequest{Member: resources.MemberNameOf(etcd, s.Member), PodUID: s.PodUID, Token: s.Token, OldClusterID: s.OldClusterID, Reason: d.Reason,
			StartedAt: ptr.To(metav1.NewTime(now))}
		if d.Rule == recovery.RuleStart {
			// A new cluster bootstrapping from its backup (RuleBootstrapFromBackup) lost no
			// quorum.
			order.QuorumLostAt = ptr.To(metav1.NewTime(now.Add(-s.QuorumLostFor)))
		}
		// The order is the record: written into the status, where only the operator writes, on
		// the version of the Etcd it was decided on.
		if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterRecovery, func(st *druidv1alpha1.EtcdStatus) {
			st.Recovery = order
		}); err != nil {
			return fmt.Errorf("ordering %s to restore: %w", s.Member, err)
		}
		log.Info("Ordered a member to restore from the backup", "member", s.Member, "pod", s.PodUID, "token", s.Token)
	case recovery.ActionCallOff:
		if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterRecovery, func(st *druidv1alpha1.EtcdStatus) {
			st.Recovery = nil
		}); err != nil {
			return fmt.Errorf("calling the restore off: %w", err)
		}
	case recovery.ActionRecordClusterID:
		// What the restore rebuilt, as its init step reported it: a fall-back to an older full
		// snapshot or revisions not restored belong in the condition, not only on a Lease.
		var restored string
		lease := &coordinationv1.Lease{}
		if err := r.cfg.Client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.MemberNameOf(etcd, o.InProgress.Member)}, lease); err == nil {
			restored = memberlease.RestoreResult(startDecision(lease))
		}
		incomplete := restoreIncomplete(etcd, d.ClusterID, restored, now)
		// The restored member is the new cluster's one voter until the membership controller
		// records more.
		voters := []druidv1alpha1.RecordedVoter{{Name: resources.MemberNameOf(etcd, o.LeaderName), ID: o.LeaderID}}
		if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
			s.ClusterID, s.Voters = d.ClusterID, voters
			if incomplete != nil {
				s.Conditions = etcdstatus.SetCondition(s.Conditions, *incomplete)
			}
		}); err != nil {
			return fmt.Errorf("recording the new cluster ID %s: %w", d.ClusterID, err)
		}
		if incomplete != nil {
			r.cfg.Recorder.Event(etcd, corev1.EventTypeWarning, ReasonRestoreStoppedEarly, incomplete.Message)
		}
		// DEP-01: a full snapshot of the restored cluster, so later restores start from it and
		// not from the old cluster's chain. Asked on the full snapshot Lease, where the leading
		// member-agent takes requests.
		if backupConfigured(etcd) {
			if err := r.annotateLease(ctx, etcd.Namespace, memberlease.FullSnapshotLeaseName(etcd), memberlease.AnnotationFullSnapshotRequest, "restored-"+o.InProgress.Token); err != nil {
				return fmt.Errorf("requesting a full snapshot of the restored cluster: %w", err)
			}
		}
		d.Reason += "; a full snapshot of it is requested"
		if restored != "" {
			d.Reason += "; " + restored
		}
	case recovery.ActionReplacePod:
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: d.Pod}}
		if err := r.cfg.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", d.Pod, err)
		}
	case recovery.ActionFinish:
		if lostAt := etcd.Status.Recovery.QuorumLostAt; lostAt != nil {
			d.Reason += fmt.Sprintf("; quorum was lost for %s until the restored member led", now.Sub(lostAt.Time).Round(time.Second))
		}
		return etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
			s.Recovery = nil
		})
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
		// A restore ordered or called off, a pod replaced and a restore that does not fit its
		// volume are what a person must learn of, and Warnings are rate-limited apart from the
		// many Normal waits on the same Etcd.
		if actErr != nil || d.Rule == recovery.RuleNoBackup || d.Rule == recovery.RuleStart || d.Rule == recovery.RuleCallOff || d.Rule == recovery.RuleReplaceOldPod ||
			d.Rule == recovery.RuleRestoreNoSpace {
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
	if err := etcdstatus.Patch(ctx, r.cfg.Client, fresh, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, c)
	}); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer changed the conditions since the read: the next pass writes it.
			return nil
		}
		return fmt.Errorf("recording the recovery decision on Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return nil
}
