package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	etcdcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/etcd"
	membershipcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/ondelete"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/metricsserving"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Options are the inputs beyond the configuration file.
type Options struct {
	Config              *configv1alpha1.OperatorConfiguration
	Gates               features.Gates
	MemberAgentImage    string
	MemberAgentInterval string
	// TrustRecheck is how often the TLS Secrets of an Etcd are read again for a change (0: the
	// Etcd reconciler's default; tests and demos shorten it).
	TrustRecheck time.Duration
	// SecretPropagation bounds how long the kubelet takes to refresh a changed Secret in the pods
	// (etcd.Config.SecretPropagation; 0: its default). The node simulator is quicker.
	SecretPropagation time.Duration
	// InvalidInputRetry overrides how soon the Etcd controller looks again at an Etcd with bad
	// input (etcd.Config.InvalidInputRetry; 0: its default). Tests shorten it.
	InvalidInputRetry time.Duration
	Logger            logr.Logger
	// Registry receives the controllers' metrics (the manager's metrics.Registry in production).
	Registry prometheus.Registerer
	// AllowSeveralInProcess lets tests run more than one operator in a process; controller-runtime
	// otherwise rejects a second controller of the same name.
	AllowSeveralInProcess bool
}

// eventSpamLimits is how many Events of one type (Normal, Warning) the manager sends about one
// object before it sends only one per QPS period. client-go's defaults (25, then one per 5
// minutes) drop most of a five-member rollout's steps, or two rollouts' within minutes: the
// per-step Events (LeadershipHandedOver, member replaced, learner promoted) are what a user reads
// to follow one. The apiserver still gets at most about a hundred Events per Etcd at once.
var eventSpamLimits = record.CorrelatorOptions{BurstSize: 100, QPS: 1. / 10}

// stopEvents shuts the manager's Event broadcaster down when the manager stops, on every replica
// (leader or not): a broadcaster the manager was given is not stopped by it.
type stopEvents struct{ broadcaster record.EventBroadcaster }

func (s stopEvents) Start(ctx context.Context) error {
	<-ctx.Done()
	s.broadcaster.Shutdown()
	return nil
}

func (stopEvents) NeedLeaderElection() bool { return false }

// Operator is a manager with every controller registered, and the member client pool it owns.
type Operator struct {
	Manager ctrl.Manager
	Pool    *memberaccess.ConnectionPool
}

// NewScheme holds every type the operator reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := druidv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// Leader election takes a Lease in leaderElection.resourceNamespace and records its changes as
// Events there. These rules go to their own Role in that namespace (chart files/rbac/leader-election).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// secretCacheTTL bounds how long a member client key pair read from its Secrets is used before
// it is read again.
const secretCacheTTL = 10 * time.Minute

// New creates the manager and registers its controllers: etcd, status, ondelete, membership,
// defragmentation, recovery, EtcdOpsTask and, when enabled, EtcdCopyBackupsTask.
func New(restCfg *rest.Config, o Options) (*Operator, error) {
	cfg := o.Config
	scheme, err := NewScheme()
	if err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	metrics, err := metricsserving.Options(cfg.MetricsBindAddress, cfg.MetricsCertDir)
	if err != nil {
		return nil, err
	}
	le := cfg.LeaderElection
	events := record.NewBroadcasterWithCorrelatorOptions(eventSpamLimits)
	mgr, err := ctrl.NewManager(withClientConnection(restCfg, cfg.ClientConnection), ctrl.Options{
		Scheme: scheme,
		Logger: o.Logger,
		Cache:  cacheOptions(cfg.WatchNamespaces),
		// Secrets are never cached, even if some code path reads them through the cached client:
		// an informer would list and watch every Secret in reach and hold them all in memory.
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 metrics,
		EventBroadcaster:        events, //nolint:staticcheck // the only way to set the spam filter; stopped with the manager (stopEvents)
		HealthProbeBindAddress:  cfg.HealthProbeBindAddress,
		LeaderElection:          le.Enabled,
		LeaderElectionID:        le.ResourceName,
		LeaderElectionNamespace: le.ResourceNamespace,
		// The binary exits as soon as the manager stopped (cmd/etcd-conductor), so the Lease can
		// be given up then: the next manager (a rolling update of the Deployment) leads at once
		// instead of after the Lease expired.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durationOrNil(le.LeaseDuration.Duration),
		RenewDeadline:                 durationOrNil(le.RenewDeadline.Duration),
		RetryPeriod:                   durationOrNil(le.RetryPeriod.Duration),
		Controller: ctrlconfig.Controller{
			SkipNameValidation: &o.AllowSeveralInProcess,
			// Clusters with work in flight go ahead of restart no-ops and periodic checks
			// (internal/operator/priority). It is controller-runtime's default; written out so
			// an upgrade that changed it would not silently put a rollout behind a whole fleet.
			UsePriorityQueue: ptr.To(true),
		},
	})
	if err != nil {
		events.Shutdown()
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.Add(stopEvents{events}); err != nil {
		events.Shutdown()
		return nil, fmt.Errorf("adding the Event broadcaster's stop: %w", err)
	}
	recorder := mgr.GetEventRecorderFor("etcd-conductor") //nolint:staticcheck // core/v1 Events, shown by kubectl describe
	pool := memberaccess.NewPool(memberaccess.PoolOptions{Logger: o.Logger.WithName("etcdclient")})
	if err := registerPoolMetrics(o.Registry, pool); err != nil {
		pool.Close()
		return nil, err
	}
	// One way to the members for every controller: the key pairs Etcds name are read at most
	// every secretCacheTTL (or again when the members refuse them) and built once.
	access := memberaccess.New(memberaccess.Config{Reader: mgr.GetAPIReader(), SecretTTL: secretCacheTTL,
		DefaultClientTLS: defaultClientTLS(cfg.MemberClientTLS), StatefulSets: mgr.GetClient()})

	// controllers.etcd.waitForBackupReady: voluntary disruptions wait while BackupReady is False
	// (internal/decide/backupgate); left out (a configuration not passed through Decode), true.
	waitForBackup := ptr.Deref(cfg.Controllers.Etcd.WaitForBackupReady, true)
	var unknownGrace, notReadyGrace time.Duration
	if m := cfg.Controllers.Etcd.EtcdMember; m != nil {
		unknownGrace, notReadyGrace = m.UnknownThreshold.Duration, m.NotReadyThreshold.Duration
	}
	etcdReconciler := etcdcontroller.NewReconciler(mgr.GetClient(), recorder, etcdcontroller.Config{
		SecretReader:        mgr.GetAPIReader(),
		Gates:               o.Gates,
		MemberAgentImage:    o.MemberAgentImage,
		MemberAgentInterval: o.MemberAgentInterval,
		TrustRecheck:        o.TrustRecheck,
		SecretPropagation:   o.SecretPropagation,
		SpecAutoReconcile:   cfg.Controllers.Etcd.EnableEtcdSpecAutoReconcile,
		RequireTLS:          ptr.Deref(cfg.Controllers.Etcd.RequireTLS, false),
		BackupReach:         cfg.BackupStores.Reach(),
		MemberFence:         memberFence(cfg.MemberNetworkPolicy),
		WaitForBackupReady:  waitForBackup,
		Members:             pool,
		Access:              access,
		InvalidInputRetry:   o.InvalidInputRetry,
		StartFailureGrace:   notReadyGrace,
	})
	if err := etcdReconciler.RegisterWithManager(mgr, cfg.Controllers.Etcd.ConcurrentSyncs); err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering etcd controller: %w", err)
	}
	statusMetrics, err := status.NewMetrics(o.Registry)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering status metrics: %w", err)
	}
	var statusResync time.Duration
	if p := cfg.Controllers.Etcd.EtcdStatusSyncPeriod; p != nil {
		statusResync = p.Duration
	}
	if err := status.NewReconciler(mgr.GetClient(), statusMetrics).WithResync(statusResync).WithUnknownGrace(unknownGrace).RegisterWithManager(mgr, cfg.Controllers.Etcd.ConcurrentSyncs); err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering status controller: %w", err)
	}

	onDeleteMetrics, err := ondelete.NewMetrics(o.Registry)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering ondelete metrics: %w", err)
	}
	rolloutPolicy := RolloutPolicy(cfg.Controllers.OnDelete)
	rolloutPolicy.WaitForBackupReady = waitForBackup
	onDelete := ondelete.NewReconciler(ondelete.Config{
		Client:          mgr.GetClient(),
		Reader:          mgr.GetAPIReader(),
		Access:          access,
		Recorder:        recorder,
		Members:         pool,
		Metrics:         onDeleteMetrics,
		RoleSource:      roles.SourcePolicy(cfg.Controllers.OnDelete.MemberRoleSource),
		RequeueInterval: cfg.Controllers.OnDelete.RequeueInterval.Duration,
		Policy:          rolloutPolicy,
		HandoverTimeout: cfg.Controllers.OnDelete.Handover.Timeout.Duration,
	})
	if err := onDelete.RegisterWithManager(mgr, cfg.Controllers.OnDelete.ConcurrentSyncs); err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering ondelete controller: %w", err)
	}
	members := membershipcontroller.NewReconciler(membershipcontroller.Config{
		Client:             mgr.GetClient(),
		Reader:             mgr.GetAPIReader(),
		Access:             access,
		Recorder:           recorder,
		Members:            pool,
		WaitForBackupReady: waitForBackup,
		// DEP-01 scenario 9: a minority member NotReady this long has its pod deleted.
		NotReadyGrace: notReadyGrace,
	})
	if err := members.RegisterWithManager(mgr, cfg.Controllers.Etcd.ConcurrentSyncs); err != nil {
		pool.Close()
		return nil, fmt.Errorf("registering membership controller: %w", err)
	}
	if err := registerDefrag(mgr, o, recorder, pool, access); err != nil {
		pool.Close()
		return nil, err
	}
	if err := registerRecovery(mgr, o, recorder, pool, access); err != nil {
		pool.Close()
		return nil, err
	}
	if err := registerOpsTasks(mgr, o, recorder); err != nil {
		pool.Close()
		return nil, err
	}
	if err := registerCopyTasks(mgr, o, recorder); err != nil {
		pool.Close()
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		pool.Close()
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		pool.Close()
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	return &Operator{Manager: mgr, Pool: pool}, nil
}

// RolloutPolicy turns the OnDelete controller's configuration into the planner's policy. Fields
// left unset (a configuration not passed through Decode) take the planner's defaults.
func RolloutPolicy(c configv1alpha1.OnDeleteControllerConfiguration) rollout.Policy {
	p := rollout.DefaultPolicy()
	if c.Handover.Enabled != nil {
		p.Handover = *c.Handover.Enabled
	}
	if c.Handover.MaxAttempts > 0 {
		p.HandoverAttempts = c.Handover.MaxAttempts
	}
	if c.MaxAppliedIndexLag != nil {
		p.CatchUp = *c.MaxAppliedIndexLag >= 0
		p.MaxAppliedIndexLag = uint64(max(*c.MaxAppliedIndexLag, 0))
	}
	if c.MaxConcurrentMemberUpdates > 0 {
		p.MaxConcurrent = c.MaxConcurrentMemberUpdates
	}
	if c.RejoinByRead != nil {
		p.RejoinByRead = *c.RejoinByRead
	}
	return p
}

// withClientConnection returns a copy of restCfg with the configured client-side rate limit
// (clientConnection.qps and burst), which every client of the manager shares.
func withClientConnection(restCfg *rest.Config, c configv1alpha1.ClientConnectionConfiguration) *rest.Config {
	out := rest.CopyConfig(restCfg)
	out.QPS = c.QPS
	out.Burst = c.Burst
	return out
}

// cacheOptions limits the informers to the watched namespaces, when any are configured, so that
// Roles in those namespaces are all the manager needs. Cached objects carry no managedFields:
// nothing here reads them, and they are a large share of every cached object (a fleet's pods,
// StatefulSets and Etcds), copied on every cached read and marked by every GC cycle; a
// restart's burst of reconciles then waits less on the garbage collector. Updates of an object
// read from the cache send no managedFields, which the apiserver takes as "keep them".
//
// Pods are cached as metadata and status only (memberPodView): no controller reads a member pod's
// spec, and at 1,000 Etcds the cached pod specs were half the manager's live heap.
// memberFence is the operator's memberNetworkPolicy as the Etcd reconciler renders it; nil when
// none is wanted.
func memberFence(c *configv1alpha1.MemberNetworkPolicyConfiguration) *resources.MemberFence {
	if c == nil || !c.Enabled {
		return nil
	}
	return &resources.MemberFence{ClientFrom: c.ClientFrom, MetricsFrom: c.MetricsFrom}
}

func cacheOptions(watchNamespaces []string) cache.Options {
	// Only the pods and Leases the operator made (every one carries the managed-by label) are
	// cached: the manager's memory follows its Etcds, not the cluster's pods and Leases (every
	// node's heartbeat Lease, every controller's). An object of one of an Etcd's names without
	// the label is no member's; the Etcd reconciler finds it when it tries to create its own
	// (apply: AlreadyExists) and reports it as foreign.
	ours := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagerName})
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:           {Label: ours, Transform: memberPodView},
			&coordinationv1.Lease{}: {Label: ours},
			// Other controllers and tenants write NetworkPolicies too; only each Etcd's fence is ours.
			&networkingv1.NetworkPolicy{}: {Label: ours},
		},
	}
	if len(watchNamespaces) == 0 {
		return opts
	}
	namespaces := make(map[string]cache.Config, len(watchNamespaces))
	for _, ns := range watchNamespaces {
		namespaces[ns] = cache.Config{}
	}
	opts.DefaultNamespaces = namespaces
	return opts
}

// CacheOptions are the manager's informer cache options (cacheOptions): exported for the scope
// benchmark (make bench-scope), which runs the same cache without its label selectors beside the
// manager to show what the selectors save.
func CacheOptions(watchNamespaces []string) cache.Options { return cacheOptions(watchNamespaces) }

// memberPodView is what the manager keeps of a pod: its metadata without managedFields, and its
// status. Controllers read labels, owners, annotations, deletion and readiness; writes to a pod
// are merge patches of its annotations and deletions with UID and resourceVersion
// preconditions, so the missing spec is never sent back.
func memberPodView(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName, Hostname: pod.Spec.Hostname, Subdomain: pod.Spec.Subdomain}
	return pod, nil
}

// defaultClientTLS reads the operator-wide key pair on every use, so a rotated Secret mounted into
// the manager pod is picked up without a restart.
func defaultClientTLS(files *configv1alpha1.MemberClientTLS) func() (conductortls.ClientMaterial, error) {
	if files == nil {
		return nil
	}
	return func() (conductortls.ClientMaterial, error) {
		return conductortls.LoadFiles(files.CAFile, files.CertFile, files.KeyFile)
	}
}

func durationOrNil(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// registerPoolMetrics exposes how many member connections the pool holds: a fleet's cost in file
// descriptors and memory grows with it, and the fleet benchmark reports it.
func registerPoolMetrics(reg prometheus.Registerer, pool *memberaccess.ConnectionPool) error {
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "etcd_conductor", Name: "member_clients",
		Help: "Member clients (gRPC connections) the operator's pool holds open."},
		func() float64 { return float64(pool.Members()) })
	if err := reg.Register(open); err != nil {
		return fmt.Errorf("registering pool metrics: %w", err)
	}
	return nil
}
