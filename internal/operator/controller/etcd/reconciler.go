package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/render"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/specgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/updatestrategy"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// invalidInputRetry is how soon an Etcd with bad input (say, a Secret not yet created) is looked at
// again; Secrets are neither watched nor cached. Config.InvalidInputRetry overrides it.
const invalidInputRetry = 30 * time.Second

// lingeringLeaseRecheck is how soon the Lease of a removed member that still runs or votes is
// looked at again: pods are not watched by this reconciler.
const lingeringLeaseRecheck = 10 * time.Second

// Reconciler converges the objects an Etcd owns.
type Reconciler struct {
	client client.Client
	// apiReader reads from the API server, uncached (Config.SecretReader): the Secrets an Etcd
	// names, the member pods while the gate is off and the StatefulSet still OnDelete, and an
	// object of one of the Etcd's names the cache does not hold (apply).
	apiReader client.Reader
	recorder  record.EventRecorder
	settings  resources.Settings
	gateOn    bool
	// autoReconcile is etcd-druid's enableEtcdSpecAutoReconcile (internal/decide/specgate).
	autoReconcile bool
	// requireTLS refuses Etcds whose members would run on plain HTTP.
	requireTLS bool
	// waitForBackup: the PDB allows no eviction while BackupReady is False (Config.WaitForBackupReady).
	waitForBackup bool
	// fence: Config.MemberFence.
	fence *resources.MemberFence
	// pool and access reach the members (memberaccess.Cluster): their versions, who leads, their
	// database sizes, downgrade calls and a leadership move. A nil pool: what needs their word
	// waits (a downgrade, a volume change) and a lowered quota is not checked.
	pool   memberaccess.Pool
	access *memberaccess.Access
	// trustRecheck: how soon a settled Etcd with TLS is reconciled again to read its CA Secrets.
	trustRecheck time.Duration
	// trustChecked is when each Etcd's CA Secrets were last read (trustDue), by namespace/name.
	trustMu      sync.Mutex
	trustChecked map[string]time.Time
	// secretPropagation: Config.SecretPropagation, or the constant.
	secretPropagation time.Duration
	// invalidInputRetry: Config.InvalidInputRetry, or the constant.
	invalidInputRetry time.Duration
	// startGrace: Config.StartFailureGrace, or memberhealth.DefaultNotReadyGrace.
	startGrace time.Duration
}

var _ reconcile.Reconciler = &Reconciler{}

// Config is what the reconciler needs beyond the manager.
type Config struct {
	// SecretReader reads the TLS Secrets an Etcd names, straight from the API server (the
	// manager's APIReader). Through the cached client the first read would start an informer
	// listing and watching every Secret in reach; the operator is granted only get on Secrets.
	// Member pods are read through it too when the gate is off (see syncStatefulSet), so the
	// hand-over to RollingUpdate is decided on what the apiserver holds now, and an object of
	// one of the Etcd's names the cache does not hold (apply).
	SecretReader     client.Reader
	Gates            features.Gates
	MemberAgentImage string
	// MemberAgentInterval overrides the sidecar's renew interval (tests and demos shorten it).
	MemberAgentInterval string
	// SpecAutoReconcile is etcd-druid's controllers.etcd.enableEtcdSpecAutoReconcile: false, a
	// changed spec waits for the druid.gardener.cloud/operation=reconcile annotation. nil: true.
	SpecAutoReconcile *bool
	// RequireTLS is the operator's controllers.etcd.requireTLS.
	RequireTLS bool
	// BackupReach is the operator's backupStores: where an Etcd's store may be (Local roots, S3
	// endpoints); one elsewhere is ERR_BACKUP_STORE and, for Local, mounts nothing.
	BackupReach backupstore.Reach
	// MemberFence is the operator's memberNetworkPolicy: who may reach each Etcd's member
	// ports (resources.MemberNetworkPolicy). Nil: no NetworkPolicy is made, and those made
	// before are removed.
	MemberFence *resources.MemberFence
	// WaitForBackupReady is the operator's controllers.etcd.waitForBackupReady: the PDB then
	// allows no eviction while the Etcd's BackupReady is False (resources.DisruptionBudget).
	WaitForBackupReady bool
	// Members is the member connection pool, Access what dials them (the Etcd's client key pair,
	// read fresh: the answers decide what is rendered or ordered): for the version and volume
	// changes and the quota check. A nil Members: what needs their word waits. A nil Access is
	// built from SecretReader.
	Members memberaccess.Pool
	Access  *memberaccess.Access
	// TrustRecheck is how often the TLS Secrets of an Etcd are read again (observeTrust);
	// 0: defaultTrustRecheck.
	TrustRecheck time.Duration
	// SecretPropagation bounds how long the kubelet takes to refresh a changed Secret in the
	// pods (copiesSettled); 0: defaultSecretPropagation.
	SecretPropagation time.Duration
	// InvalidInputRetry overrides how soon an Etcd with bad input, or with backups that cannot
	// work, is looked at again (default 30s; tests shorten it, as they do MemberAgentInterval).
	InvalidInputRetry time.Duration
	// StartFailureGrace is how long a member pod on a downgrade's target may stay not Ready after
	// its creation before it counts as failing to start, which rolls the downgrade back
	// (internal/decide/versionchange): controllers.etcd.etcdMember.notReadyThreshold, the bound after
	// which a NotReady member is restarted; 0: memberhealth.DefaultNotReadyGrace. A container
	// the kubelet gives up on (ImagePullBackOff, CrashLoopBackOff, …) counts at once.
	StartFailureGrace time.Duration
}

// NewReconciler builds the reconciler from explicit dependencies.
func NewReconciler(c client.Client, recorder record.EventRecorder, cfg Config) *Reconciler {
	strategy := appsv1.RollingUpdateStatefulSetStrategyType
	if cfg.Gates.Enabled(features.QuorumAwareUpdatesWithOnDelete) {
		strategy = appsv1.OnDeleteStatefulSetStrategyType
	}
	access := cfg.Access
	if access == nil && cfg.Members != nil {
		access = memberaccess.New(memberaccess.Config{Reader: cfg.SecretReader})
	}
	return &Reconciler{
		client:            c,
		apiReader:         cfg.SecretReader,
		recorder:          recorder,
		gateOn:            cfg.Gates.Enabled(features.QuorumAwareUpdatesWithOnDelete),
		autoReconcile:     cfg.SpecAutoReconcile == nil || *cfg.SpecAutoReconcile,
		requireTLS:        cfg.RequireTLS,
		waitForBackup:     cfg.WaitForBackupReady,
		fence:             cfg.MemberFence,
		pool:              cfg.Members,
		access:            access,
		trustRecheck:      cmp.Or(cfg.TrustRecheck, defaultTrustRecheck),
		trustChecked:      map[string]time.Time{},
		secretPropagation: cmp.Or(cfg.SecretPropagation, defaultSecretPropagation),
		invalidInputRetry: cmp.Or(max(cfg.InvalidInputRetry, 0), invalidInputRetry),
		startGrace:        cmp.Or(max(cfg.StartFailureGrace, 0), memberhealth.DefaultNotReadyGrace),
		settings: resources.Settings{
			UpdateStrategy:      strategy,
			MemberAgentImage:    cfg.MemberAgentImage,
			MemberAgentInterval: cfg.MemberAgentInterval,
			BackupReach:         cfg.BackupReach,
		},
	}
}

// RBAC: exactly the calls below. Owned objects are read through the cache (get, list, watch) and
// written only when they differ from the desired state (create, update); the garbage collector
// deletes them with the Etcd, so only member Leases of removed members are deleted here.
// patch: only to remove the druid.gardener.cloud/operation annotation once its order is carried
// out (consumeOrder).
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/status,verbs=patch
// SetControllerReference sets blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
// admission plugin allows only to those who may update the owner's finalizers.
// +kubebuilder:rbac:groups=druid.gardener.cloud,resources=etcds/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// patch on owned objects: only to mirror the protection annotation (syncProtection).
// +kubebuilder:rbac:groups="",resources=serviceaccounts;configmaps;services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch
// The member-agent Role grants patch on member Leases; RBAC lets the operator create that Role only
// if it holds patch there itself (no escalate verb).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch
// delete: the member NetworkPolicy of an Etcd once memberNetworkPolicy is turned off (syncNetworkPolicy).
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch
// Pods are listed uncached to decide when a StatefulSet may leave OnDelete, while a downgrade is
// under way to find a member that fails to start on its target (observe), and during a
// volume change or with the StatefulSet missing to know which claims they mount (the cache keeps
// no pod spec); from the cache to know whether a move to TLS has rolled out and whether a removed
// member's pod is gone.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile brings an Etcd's objects to their desired state, in five parts, each its own
// function:
//
//  1. gate: an Etcd etcd-druid manages is left alone (internal/decide/takeover); a spec not to be
//     applied now (internal/decide/specgate) leaves everything but the PDB's health as it is;
//  2. observe, once (observe.go): the StatefulSet, what each change starts from, the members
//     asked at most once and only when a change needs their word, the TLS material when due;
//  3. decide, purely (internal/decide/render): the TLS transport stage, the update strategy, the
//     version, volume and trust changes, the refusals and how soon to look again; `plan` prints
//     the same decision;
//  4. record: the changes' conditions, and the input's problems (the spec, the Secrets it names,
//     a refusal, a lowered quota a member's database exceeds): with any, nothing is written, so a
//     bad edit never deletes or restarts a member;
//  5. act, in order (steps): the downgrade call, then ServiceAccount, member-agent Role and
//     RoleBinding, ConfigMap, Services, member and snapshot Leases, PodDisruptionBudget, member
//     TLS Secret, StatefulSet (leadership moved, claims grown and the StatefulSet recreated first
//     for a volume change), NetworkPolicy. An object that exists under one of these names but is
//     not controlled by this Etcd is never adopted: it is left as it is and reported
//     (ERR_FOREIGN_OBJECT, a ForeignObject Event), the other objects are still converged so every
//     such object is reported at once, and the steps that need all before them wait until they
//     are ours; the reconcile then retries with backoff. Then observedGeneration is recorded and
//     lastErrors cleared, and the soonest recheck asked (render.Soonest) is the requeue.
//
// The StatefulSet's spec.updateStrategy.type is written on every pass from the feature gate, so a
// gate flip (config change + restart) flips it on the next reconcile, deleting no pod; except that
// a gate turned off mid-rollout keeps OnDelete until the step in flight has finished
// (internal/decide/updatestrategy).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	etcd := &druidv1alpha1.Etcd{}
	if err := r.client.Get(ctx, req.NamespacedName, etcd); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetTrust(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !etcd.DeletionTimestamp.IsZero() {
		// Owned objects go with the Etcd through their owner references.
		return ctrl.Result{}, nil
	}
	if held := takeover.Decide(etcd); held.Held {
		// Nothing is written, the protection mark included: the objects are druid's.
		log.Info("Etcd left alone", "rule", held.Rule, "reason", held.Reason)
		r.recorder.Event(etcd, corev1.EventTypeWarning, held.Rule.CamelCase(), held.Reason)
		return ctrl.Result{}, nil
	}
	if err := r.syncProtection(ctx, etcd); err != nil {
		return ctrl.Result{}, err
	}
	gate := specgate.Decide(etcd, r.autoReconcile)
	if !gate.Apply {
		log.Info("Spec not applied", "rule", gate.Rule, "reason", gate.Reason)
		r.recorder.Event(etcd, corev1.EventTypeNormal, gate.Rule.CamelCase(), gate.Reason)
		// The PDB follows the members' health, not the spec: it keeps doing so meanwhile.
		return ctrl.Result{}, r.followHealthOnly(ctx, etcd)
	}

	o, err := r.observe(ctx, etcd)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := render.Plan(o.Observed)

	if c, ok := d.Change(render.PartVersion); ok {
		if err := r.recordChange(ctx, etcd, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	if problems := r.problems(ctx, etcd, o, d); len(problems) > 0 {
		return ctrl.Result{RequeueAfter: r.invalidInputRetry}, r.recordProblems(ctx, etcd, d, problems)
	}
	// Before the StatefulSet is touched: a recreation is recorded as under way before it is made.
	if c, ok := d.Change(render.PartVolume); ok {
		if err := r.recordChange(ctx, etcd, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.reportIgnoredFields(ctx, etcd)
	r.reportPlaintext(ctx, etcd)
	var warnings []resources.Problem
	if !secretsValidated(etcd) {
		// The backup Secret too is read only when the spec changed or a problem was recorded
		// (see secretsValidated).
		warnings = r.checkBackupStore(ctx, etcd)
	}
	for _, p := range warnings {
		log.Info("Backup store unusable; the cluster is reconciled without working backups", "code", p.Code, "problem", p.Message)
		r.recorder.Event(etcd, corev1.EventTypeWarning, EventReasonInvalidBackupStore, p.Message)
	}

	r.actOnVersion(ctx, etcd, o, d.Version)
	pass, err := r.act(ctx, etcd, o, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.reportTransportMove(ctx, etcd, d.Transport)

	again := append([]render.Recheck{}, d.Rechecks...)
	if pass.leasesLingering {
		again = append(again, render.Recheck{After: lingeringLeaseRecheck, Why: "lingering Lease"})
	}
	if resources.UsesTLS(etcd) {
		// TLS Secrets are not watched: read again for a change (observeTrust), soon while one is
		// carried out.
		again = append(again, render.Recheck{After: r.trustRequeue(etcd), Why: "TLS Secrets"})
	}
	if len(warnings) > 0 {
		// Converged, with backups that cannot work: say so, and look again (Secrets are not
		// watched).
		again = append(again, render.Recheck{After: r.invalidInputRetry, Why: "warnings"})
	}
	next := render.Soonest(again)
	if next.After > 0 {
		log.V(1).Info("Looking again without an event", "after", next.After, "why", next.Why)
	}
	result := ctrl.Result{RequeueAfter: next.After}
	if err := r.writeOutcome(ctx, etcd, warnings, true); err != nil {
		return result, err
	}
	return result, r.consumeOrder(ctx, etcd, gate)
}

// refusalCodes are the lastErrors codes of the changes a planner refuses.
var refusalCodes = map[render.Part]string{
	render.PartTransport: resources.ErrTransportChange,
	render.PartVersion:   resources.ErrVersionChange,
	render.PartVolume:    resources.ErrVolumeChange,
}

// problems are what stops the pass: the input's (validate) and the changes refused.
func (r *Reconciler) problems(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d render.Decision) []resources.Problem {
	problems := r.validate(ctx, etcd, o)
	for _, refused := range d.Refusals {
		problems = append(problems, resources.Problem{Code: refusalCodes[refused.Part], Message: refused.Reason})
	}
	return problems
}

// recordProblems reports the problems that stop the pass (an Event each, lastErrors), leaving the
// Etcd's objects as they are.
func (r *Reconciler) recordProblems(ctx context.Context, etcd *druidv1alpha1.Etcd, d render.Decision, problems []resources.Problem) error {
	for _, p := range problems {
		logr.FromContextOrDiscard(ctx).Info("Etcd input is invalid; leaving its objects as they are", "code", p.Code, "problem", p.Message)
		r.recorder.Event(etcd, corev1.EventTypeWarning, "InvalidSpec", p.Message)
	}
	// A refused volume change is the condition's to say too; a change held back by another
	// problem is not under way, so it is not recorded as such.
	if c, ok := d.Change(render.PartVolume); ok && d.Volume.Refused {
		if err := r.recordChange(ctx, etcd, c); err != nil {
			return err
		}
	}
	return r.recordOutcome(ctx, etcd, problems)
}

// passResult is what the acts found that the requeue depends on.
type passResult struct {
	// leasesLingering: a Lease beyond spec.replicas is kept for a member still a voter or whose
	// pod still exists (neither is an event of this controller).
	leasesLingering bool
}

// step is one act of a pass.
type step struct {
	name string
	fn   func(context.Context, *druidv1alpha1.Etcd) error
	// needsAllBefore: the step relies on every object synced before it, so it waits until they
	// are ours: the RoleBinding grants the ServiceAccount's holder our Leases, the pods mount the
	// ConfigMap and the member TLS Secret, run as the ServiceAccount and renew the Leases.
	needsAllBefore bool
	// members: the step starts or changes the members, so it waits while they are held back
	// (an Etcd that joins an existing cluster, existingcluster.go).
	members bool
}

// act carries out the decision, one step after the other (the table below is the order).
func (r *Reconciler) act(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d render.Decision) (passResult, error) {
	log := logr.FromContextOrDiscard(ctx)
	var pass passResult
	settings := r.settings
	settings.UpdateStrategy = d.Strategy.Type
	settings.Transport = &d.Transport.Render
	settings.EtcdImage = d.Version.Render
	settings.DowngradeSource, settings.DowngradeFailedTarget = d.Version.Source, d.Version.FailedTarget
	settings.DataVolume = d.Volume.Name
	steps := []step{
		{name: "ServiceAccount", fn: r.syncServiceAccount},
		{name: "MemberAgentRBAC", fn: r.syncMemberAgentRBAC, needsAllBefore: true},
		{name: "ConfigMap", fn: func(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
			return r.syncConfigMap(ctx, etcd, d.Transport.Render)
		}},
		{name: "Services", fn: r.syncServices},
		{name: "MemberLeases", fn: func(ctx context.Context, etcd *druidv1alpha1.Etcd) (err error) {
			pass.leasesLingering, err = r.syncMemberLeases(ctx, etcd)
			return err
		}},
		{name: "SnapshotLeases", fn: r.syncSnapshotLeases},
		{name: "PodDisruptionBudget", fn: r.syncPodDisruptionBudget},
		{name: "MemberTLSSecret", needsAllBefore: true, members: true, fn: func(ctx context.Context, etcd *druidv1alpha1.Etcd) (err error) {
			settings.TrustTemplate, err = r.actOnTrust(ctx, etcd, o, d)
			return err
		}},
		{name: "StatefulSet", needsAllBefore: true, members: true, fn: func(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
			return r.syncStatefulSet(ctx, etcd, o, d, settings)
		}},
		// After the StatefulSet, which does not need it: a foreign object under its name is
		// reported, and holds no member back. The pods it fences take seconds to start.
		{name: "NetworkPolicy", fn: r.syncNetworkPolicy},
	}
	var foreign []resources.Problem
	membersBack := r.holdsMembersBack(ctx, etcd, o)
	for _, step := range steps {
		if step.needsAllBefore && len(foreign) > 0 {
			log.Info("Not syncing a step while objects it needs belong to something else", "step", step.name)
			continue
		}
		if step.members && membersBack {
			continue
		}
		err := step.fn(ctx, etcd)
		var foreignErr *foreignObjectError
		switch {
		case errors.As(err, &foreignErr):
			log.Info("Leaving an object this Etcd does not control as it is", "step", step.name, "problem", foreignErr.Error())
			r.recorder.Event(etcd, corev1.EventTypeWarning, "ForeignObject", foreignErr.Error())
			foreign = append(foreign, resources.Problem{Code: resources.ErrForeignObject, Message: foreignErr.Error()})
		case err != nil:
			err = fmt.Errorf("syncing %s of Etcd %s/%s: %w", step.name, etcd.Namespace, etcd.Name, err)
			problem := resources.Problem{Code: "ERR_SYNC_" + step.name, Message: err.Error()}
			if recErr := r.recordOutcome(ctx, etcd, append(foreign, problem)); recErr != nil {
				log.Error(recErr, "Recording the sync error on the Etcd status failed")
			}
			return pass, err
		}
	}
	if len(foreign) > 0 {
		if err := r.recordOutcome(ctx, etcd, foreign); err != nil {
			return pass, err
		}
		// Deleting the foreign object is no event of ours (it has no owner reference to this
		// Etcd), so only a retry notices it: the error makes the retries back off.
		return pass, fmt.Errorf("Etcd %s/%s: %d object(s) under its names belong to something else: %s",
			etcd.Namespace, etcd.Name, len(foreign), foreign[0].Message)
	}
	return pass, nil
}

// consumeOrder removes the druid.gardener.cloud/operation=reconcile annotation once the spec it
// ordered is applied, as etcd-druid does: the next change waits for a new order.
func (r *Reconciler) consumeOrder(ctx context.Context, etcd *druidv1alpha1.Etcd, gate specgate.Decision) error {
	if !gate.ConsumeOrder {
		return nil
	}
	remove := map[string]any{}
	for _, a := range specgate.OrderAnnotations(etcd) {
		remove[a] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": remove}})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, etcd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("removing the reconcile order %v after applying the spec: %w", specgate.OrderAnnotations(etcd), err)
	}
	return nil
}

func (r *Reconciler) validate(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation) []resources.Problem {
	problems := resources.ValidateSpec(etcd)
	problems = append(problems, resources.ValidateTransport(etcd, r.requireTLS)...)
	if !secretsValidated(etcd) {
		problems = append(problems, r.validateSecrets(ctx, etcd)...)
	}
	if len(problems) == 0 {
		problems = r.checkQuotaAgainstDB(etcd, o)
	}
	return problems
}

// validateSecrets reads the TLS Secrets the Etcd names, uncached, and checks them.
func (r *Reconciler) validateSecrets(ctx context.Context, etcd *druidv1alpha1.Etcd) []resources.Problem {
	var problems []resources.Problem
	for _, want := range resources.RequiredSecrets(etcd) {
		secret := &corev1.Secret{}
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: want.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			problems = append(problems, resources.Problem{Code: resources.ErrSecretMissing,
				Message: fmt.Sprintf("reading Secret %s/%s: %v", etcd.Namespace, want.Name, err)})
			continue
		}
		problems = append(problems, resources.ValidateSecret(etcd.Namespace, want, secret)...)
	}
	return problems
}

// secretsValidated tells whether the TLS Secrets this generation of the Etcd names were already
// read and found valid: the Etcd reconciler recorded the generation as observed with no error,
// which it does only after validate passed. What validation checks depends on the Secrets' names
// (spec, so the generation), so reading them again to validate is skipped. Two reads remain: the
// CA bundles, whose content restarts the members when it changes (observeTrust, every trustRecheck),
// and the Local backup provider's hostPath key, read at every StatefulSet sync of an Etcd with
// that provider alone (localBackupRoot).
//
// Why not a cache: the operator may only get Secrets (least privilege, no list or watch), so
// it cannot learn cheaply that one changed; an uncached read per reconcile costs five GETs per
// Etcd, on every restart of the manager for the whole fleet. A changed spec, a recorded error or
// a new generation reads them again; a Secret broken later is reported by what uses it (the
// members fail their TLS handshake, the controllers that dial them record it).
func secretsValidated(etcd *druidv1alpha1.Etcd) bool {
	s := etcd.Status
	return s.ObservedGeneration != nil && *s.ObservedGeneration == etcd.Generation && len(s.LastErrors) == 0
}

// recordOutcome writes the status fields this reconciler owns (etcdstatus.WriterEtcd:
// observedGeneration, lastErrors) with one merge patch.
func (r *Reconciler) recordOutcome(ctx context.Context, etcd *druidv1alpha1.Etcd, problems []resources.Problem) error {
	return r.writeOutcome(ctx, etcd, problems, len(problems) == 0)
}

func (r *Reconciler) writeOutcome(ctx context.Context, etcd *druidv1alpha1.Etcd, problems []resources.Problem, converged bool) error {
	now := metav1.Now()
	return etcdstatus.Patch(ctx, r.client, etcd, etcdstatus.WriterEtcd, func(s *druidv1alpha1.EtcdStatus) {
		var lastErrors []druidv1alpha1.LastError
		for _, p := range problems {
			observedAt := now
			// A problem still there keeps when it was first seen: a retry rewrites nothing.
			for _, prev := range s.LastErrors {
				if prev.Code == p.Code && prev.Description == p.Message {
					observedAt = prev.ObservedAt
				}
			}
			lastErrors = append(lastErrors, druidv1alpha1.LastError{Code: p.Code, Description: p.Message, ObservedAt: observedAt})
		}
		s.LastErrors = lastErrors
		if converged {
			generation := etcd.Generation
			s.ObservedGeneration = &generation
		}
	})
}

// apply creates obj or updates it with mutate, owned by the Etcd. It never adopts: an object that
// already exists and is not controlled by this Etcd (by UID; a deleted Etcd of the same name
// counts as another) is left untouched and a *foreignObjectError returned. Taking it over would
// overwrite what its owner put there, and garbage collection would delete it with the Etcd.
//
// An object that already holds what mutate writes is not sent at all (resources.UpToDate, with
// the hash of desired, what mutate writes, recorded on the object): a reconcile with nothing to
// change, such as every reconcile of a fleet after an operator restart, writes nothing. The
// object is read from the informer cache, as before.
func (r *Reconciler) apply(ctx context.Context, etcd *druidv1alpha1.Etcd, obj client.Object, desired any, mutate func()) error {
	hash, err := resources.DesiredHash(desired)
	if err != nil {
		return err
	}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		mutate()
		resources.SetAppliedHash(obj, hash)
		// Created already marked, so an unprotected Etcd's new object is never protected.
		resources.MarkProtection(etcd, obj)
		if err := controllerutil.SetControllerReference(etcd, obj, r.client.Scheme()); err != nil {
			return err
		}
		err := r.client.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			// The cache holds only the pods and Leases the operator made (operator.cacheOptions):
			// one of this name it does not see is someone else's; read uncached to say whose.
			found := obj.DeepCopyObject().(client.Object)
			if getErr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), found); getErr == nil && !metav1.IsControlledBy(found, etcd) {
				return r.foreignObject(found)
			}
		}
		return err
	}
	if !metav1.IsControlledBy(obj, etcd) {
		return r.foreignObject(obj)
	}
	before := obj.DeepCopyObject()
	mutate()
	resources.SetAppliedHash(obj, hash)
	if resources.UpToDate(before, obj) {
		return nil
	}
	return r.client.Update(ctx, obj)
}

// foreignObjectError reports an object that carries one of the Etcd's names but is not its own.
type foreignObjectError struct {
	kind, namespace, name string
	// controller is its controller reference ("Kind name uid …"), or "" when it has none.
	controller string
}

func (e *foreignObjectError) Error() string {
	owner := "it has no controller"
	if e.controller != "" {
		owner = "it is controlled by " + e.controller
	}
	return fmt.Sprintf("%s %s/%s exists and is not controlled by this Etcd (%s); it is left unchanged: delete or rename it so the Etcd can create its own",
		e.kind, e.namespace, e.name, owner)
}

func (r *Reconciler) foreignObject(obj client.Object) *foreignObjectError {
	e := &foreignObjectError{kind: fmt.Sprintf("%T", obj), namespace: obj.GetNamespace(), name: obj.GetName()}
	if gvk, err := apiutil.GVKForObject(obj, r.client.Scheme()); err == nil {
		e.kind = gvk.Kind
	}
	if ref := metav1.GetControllerOf(obj); ref != nil {
		e.controller = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	return e
}

func (r *Reconciler) syncServiceAccount(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	desired := resources.ServiceAccount(etcd)
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
	return r.apply(ctx, etcd, obj, desired, func() { obj.Labels = desired.Labels })
}

func (r *Reconciler) syncMemberAgentRBAC(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	role := resources.MemberAgentRole(etcd)
	roleObj := role.DeepCopy()
	if err := r.apply(ctx, etcd, roleObj, role, func() { roleObj.Labels = role.Labels; roleObj.Rules = role.Rules }); err != nil {
		return err
	}
	binding := resources.MemberAgentRoleBinding(etcd)
	bindingObj := binding.DeepCopy()
	return r.apply(ctx, etcd, bindingObj, binding, func() {
		bindingObj.Labels = binding.Labels
		bindingObj.RoleRef = binding.RoleRef // immutable, and never changes for an Etcd
		bindingObj.Subjects = binding.Subjects
	})
}

func (r *Reconciler) syncConfigMap(ctx context.Context, etcd *druidv1alpha1.Etcd, stages transport.Stages) error {
	desired := resources.ConfigMap(etcd, stages)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
	return r.apply(ctx, etcd, obj, desired, func() { obj.Labels = desired.Labels; obj.Data = desired.Data })
}

func (r *Reconciler) syncServices(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	for _, desired := range []*corev1.Service{resources.PeerService(etcd), resources.ClientService(etcd)} {
		obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
		err := r.apply(ctx, etcd, obj, desired, func() {
			obj.Labels = desired.Labels
			// Merged, not replaced: others (kubectl, cloud controllers) annotate Services too.
			obj.Annotations = resources.MergeAnnotations(obj.Annotations, desired.Annotations)
			obj.Spec.TrafficDistribution = desired.Spec.TrafficDistribution
			// clusterIP is allocated by the apiserver and immutable: keep what it chose.
			if obj.Spec.ClusterIP == "" || desired.Spec.ClusterIP == corev1.ClusterIPNone {
				obj.Spec.ClusterIP = desired.Spec.ClusterIP
			}
			obj.Spec.Type = desired.Spec.Type
			obj.Spec.Selector = desired.Spec.Selector
			obj.Spec.Ports = desired.Spec.Ports
			obj.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// syncMemberLeases creates a Lease per desired member and removes those of members scaled away.
// Only labels and the duration are reconciled: holderIdentity and renewTime belong to the agents.
// syncMemberLeases creates the wanted members' Leases and deletes those no member uses any more;
// lingering is true while a Lease beyond spec.replicas is kept for a member still a voter or
// whose pod still exists (neither is an event of this controller: the caller looks again).
func (r *Reconciler) syncMemberLeases(ctx context.Context, etcd *druidv1alpha1.Etcd) (lingering bool, err error) {
	for _, pod := range resources.PodNames(etcd) {
		desired := resources.MemberLease(etcd, pod)
		obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
		if err := r.apply(ctx, etcd, obj, desired, func() {
			obj.Labels = desired.Labels
			obj.Spec.LeaseDurationSeconds = desired.Spec.LeaseDurationSeconds
		}); err != nil {
			return false, err
		}
	}
	leases := &coordinationv1.LeaseList{}
	if err := r.client.List(ctx, leases, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return false, fmt.Errorf("listing member leases: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return false, fmt.Errorf("listing member pods: %w", err)
	}
	var leaseNames, podNames []string
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases.Items {
		if l := &leases.Items[i]; metav1.IsControlledBy(l, etcd) {
			leaseNames = append(leaseNames, l.Name)
			byName[l.Name] = l
		}
	}
	for i := range pods.Items {
		podNames = append(podNames, pods.Items[i].Name)
	}
	// A removed member's Lease goes only once the member has left the cluster and its pod is
	// gone: until then it still says how the member is.
	unused := resources.MemberLeasesUnused(etcd, leaseNames, podNames)
	for _, name := range unused {
		if err := r.client.Delete(ctx, byName[name]); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting lease %s of a removed member: %w", name, err)
		}
	}
	return len(leaseNames)-len(unused) > len(resources.PodNames(etcd)), nil
}

func (r *Reconciler) syncPodDisruptionBudget(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	desired := resources.PodDisruptionBudget(etcd, r.waitForBackup)
	obj := desired.DeepCopy()
	obj.Spec = desired.Spec
	return r.apply(ctx, etcd, obj, desired, func() {
		obj.Labels = desired.Labels
		obj.Spec.MinAvailable = desired.Spec.MinAvailable
		obj.Spec.Selector = desired.Spec.Selector
		obj.Spec.UnhealthyPodEvictionPolicy = desired.Spec.UnhealthyPodEvictionPolicy
	})
}

// syncNetworkPolicy fences the Etcd's member ports as the operator is configured to (r.fence),
// or, configured not to, deletes the fence it made before (only one this Etcd controls).
func (r *Reconciler) syncNetworkPolicy(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	if r.fence == nil {
		obj := &networkingv1.NetworkPolicy{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: etcd.Namespace, Name: resources.MemberNetworkPolicyName(etcd)}, obj)
		if err != nil || !metav1.IsControlledBy(obj, etcd) {
			return client.IgnoreNotFound(err)
		}
		if err := r.client.Delete(ctx, obj, client.Preconditions{UID: &obj.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NetworkPolicy %s, memberNetworkPolicy being off: %w", obj.Name, err)
		}
		return nil
	}
	desired := resources.MemberNetworkPolicy(etcd, *r.fence)
	obj := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
	return r.apply(ctx, etcd, obj, desired, func() {
		obj.Labels = desired.Labels
		obj.Spec = desired.Spec
	})
}

// followHealthOnly brings an existing PDB's minAvailable (and unhealthyPodEvictionPolicy) to
// the members' health while the spec is not applied; its labels and selector, which follow the
// spec, are left as they are, and no PDB is created.
func (r *Reconciler) followHealthOnly(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	desired := resources.PodDisruptionBudget(etcd, r.waitForBackup)
	obj := &policyv1.PodDisruptionBudget{}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(desired), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, etcd) {
		return nil
	}
	before := obj.DeepCopy()
	obj.Spec.MinAvailable = desired.Spec.MinAvailable
	obj.Spec.UnhealthyPodEvictionPolicy = desired.Spec.UnhealthyPodEvictionPolicy
	if equality.Semantic.DeepEqual(before.Spec, obj.Spec) {
		return nil
	}
	return r.client.Update(ctx, obj)
}

// syncStatefulSet converges the StatefulSet to the decision d, rendered with settings, on the
// observation o it was made on: the strategy hold recorded first, then, for a volume change,
// leadership moved to the ordinal replaced last, the claims grown and the StatefulSet recreated
// without its pods; then it is written, and a hold that ended cleared.
func (r *Reconciler) syncStatefulSet(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d render.Decision, settings resources.Settings) error {
	strategy := d.Strategy
	holdBefore := ""
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeUpdateStrategyHeld); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		holdBefore = c.Message
	}
	if strategy.Held() {
		// Recorded before the StatefulSet is written: the OnDelete controller reads it afresh
		// right before each deletion and starts no step while it holds (package operation).
		if err := r.recordStrategyHold(ctx, etcd, strategy); err != nil {
			return err
		}
	}
	var err error
	if settings.LocalBackupRoot, err = r.localBackupRoot(ctx, etcd); err != nil {
		return err
	}
	r.moveLeaderFirst(ctx, etcd, o, d.Volume)
	// The claims grow first: should the apiserver refuse, the StatefulSet still asks for what they
	// hold.
	if err := r.expandClaims(ctx, etcd, d.Volume); err != nil {
		return err
	}
	if d.Volume.Recreate && o.sts != nil {
		if err := r.recreateStatefulSet(ctx, etcd, o.sts); err != nil {
			return err
		}
	}
	desired, err := resources.StatefulSet(etcd, settings)
	if err != nil {
		return err
	}
	obj := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
	before := ""
	// Replicas and the fields immutable after creation are written only at creation: a change of
	// spec.replicas alone is the membership controller's to carry out and rewrites nothing here.
	written := struct {
		Labels, Annotations map[string]string
		Template            corev1.PodTemplateSpec
		UpdateStrategy      appsv1.StatefulSetUpdateStrategy
	}{desired.Labels, desired.Annotations, desired.Spec.Template, desired.Spec.UpdateStrategy}
	if err := r.apply(ctx, etcd, obj, written, func() {
		before = string(obj.Spec.UpdateStrategy.Type)
		resources.ApplyMutableStatefulSetSpec(obj, desired)
		// Where releases before the condition recorded the hold.
		delete(obj.Annotations, resources.AnnotationLegacyUpdateStrategyHold)
	}); err != nil {
		return err
	}
	if !strategy.Held() && holdBefore != "" {
		// Cleared only now that the StatefulSet is switched: until then the OnDelete controller
		// must keep holding.
		if err := r.recordStrategyHold(ctx, etcd, strategy); err != nil {
			return err
		}
	}
	r.reportStrategyHold(ctx, etcd, holdBefore, strategy)
	r.reportStrategyChange(ctx, etcd, before, string(desired.Spec.UpdateStrategy.Type))
	return nil
}

// observeStrategy is what internal/decide/updatestrategy decides on. The member pods (memberPods,
// uncached) are read only when the gate is off and the StatefulSet still OnDelete: everything
// else is decided by the gate alone.
func (r *Reconciler) observeStrategy(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, memberPods func() ([]corev1.Pod, error)) (updatestrategy.Input, error) {
	in := updatestrategy.Input{GateOn: r.gateOn}
	if sts == nil {
		return in, nil
	}
	in.Current = sts.Spec.UpdateStrategy.Type
	if in.GateOn || in.Current != appsv1.OnDeleteStatefulSetStrategyType {
		return in, nil
	}
	c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeUpdateStrategyHeld)
	in.HoldRecorded = c != nil && c.Status == druidv1alpha1.ConditionTrue
	in.UpdateRevision = sts.Status.UpdateRevision
	in.Name, in.Replicas = sts.Name, ptr.Deref(sts.Spec.Replicas, 0)
	pods, err := memberPods()
	if err != nil {
		return updatestrategy.Input{}, err
	}
	for i := range pods {
		p := &pods[i]
		in.Pods = append(in.Pods, updatestrategy.Pod{Name: p.Name, Revision: p.Labels[appsv1.StatefulSetRevisionLabel],
			Terminating: !p.DeletionTimestamp.IsZero(), Ready: etcdstatus.PodReady(p)})
	}
	return in, nil
}

// recordStrategyHold sets UpdateStrategyHeld from d: True with its reason while the StatefulSet is
// kept on OnDelete, False once it is not. The status patch's optimistic lock makes a write
// decided on a stale Etcd fail (and the reconcile retry) rather than overwrite another's.
func (r *Reconciler) recordStrategyHold(ctx context.Context, etcd *druidv1alpha1.Etcd, d updatestrategy.Decision) error {
	now := metav1.Now()
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeUpdateStrategyHeld, Status: druidv1alpha1.ConditionFalse,
		Reason: d.Rule.CamelCase(), Message: d.Reason, LastTransitionTime: now, LastUpdateTime: now}
	if d.Held() {
		c.Status = druidv1alpha1.ConditionTrue
	}
	if err := etcdstatus.Patch(ctx, r.client, etcd, etcdstatus.WriterEtcd, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, c)
	}); err != nil {
		return fmt.Errorf("recording the update strategy hold: %w", err)
	}
	return nil
}

// reportStrategyHold logs and records an Event when a hold starts or its reason changes.
func (r *Reconciler) reportStrategyHold(ctx context.Context, etcd *druidv1alpha1.Etcd, before string, d updatestrategy.Decision) {
	if !d.Held() || before == d.Reason {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("Keeping the StatefulSet on OnDelete until the rollout step in flight has finished",
		"gate", features.QuorumAwareUpdatesWithOnDelete, "rule", d.Rule, "reason", d.Reason)
	r.recorder.Event(etcd, corev1.EventTypeNormal, d.Rule.CamelCase(), d.Reason)
}

func (r *Reconciler) reportStrategyChange(ctx context.Context, etcd *druidv1alpha1.Etcd, before, after string) {
	if before == "" || before == after {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("StatefulSet update strategy switched by feature gate",
		"gate", features.QuorumAwareUpdatesWithOnDelete, "from", before, "to", after)
	r.recorder.Eventf(etcd, corev1.EventTypeNormal, "UpdateStrategyChanged",
		"StatefulSet update strategy changed from %s to %s (feature gate %s); no pod was deleted",
		before, after, features.QuorumAwareUpdatesWithOnDelete)
}
