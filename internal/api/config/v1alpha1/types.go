package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

const (
	// APIVersion is the apiVersion an OperatorConfiguration file must carry.
	APIVersion = "config.druid.gardener.cloud/v1alpha1"
	// Kind is the kind an OperatorConfiguration file must carry.
	Kind = "OperatorConfiguration"
)

// OperatorConfiguration configures the manager.
type OperatorConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// ClientConnection configures the manager's connection to the apiserver.
	ClientConnection ClientConnectionConfiguration `json:"clientConnection,omitempty"`
	// LeaderElection configures leader election between manager replicas.
	LeaderElection LeaderElectionConfiguration `json:"leaderElection,omitempty"`
	// Controllers configures each controller.
	Controllers ControllerConfiguration `json:"controllers,omitempty"`
	// FeatureGates enables or disables features by name.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// MemberClientTLS is a fallback client key pair for an Etcd whose clientUrlTls names none. An
	// Etcd's own pair wins: every Etcd with client TLS must name one (its member-agent needs it),
	// so the operator talks to members with the pair the Etcd names.
	MemberClientTLS *MemberClientTLS `json:"memberClientTLS,omitempty"`
	// MetricsBindAddress is where Prometheus metrics are served over HTTPS to authenticated and
	// authorized clients (default :8443, "0" disables).
	MetricsBindAddress string `json:"metricsBindAddress,omitempty"`
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint, re-read when they change.
	// Empty: a self-signed certificate is generated at start-up.
	MetricsCertDir string `json:"metricsCertDir,omitempty"`
	// WatchNamespaces restricts the manager to Etcds (and everything they own) in these
	// namespaces; its cache then watches only them, so Roles there suffice. Empty: every namespace.
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
	// HealthProbeBindAddress is where /healthz and /readyz are served (default :8081).
	HealthProbeBindAddress string `json:"healthProbeBindAddress,omitempty"`
	// MemberReports says how the operator tells a member's report on its Lease (an empty data
	// dir: the proof a restore is ordered on) from a forgery. etcd-conductor's own key.
	MemberReports MemberReportsConfiguration `json:"memberReports,omitempty"`
	// BackupStores says where the backup stores an Etcd or an EtcdCopyBackupsTask names may be
	// (etcd-conductor's own; etcd-druid takes any).
	BackupStores BackupStoresConfiguration `json:"backupStores,omitempty"`
	// MemberNetworkPolicy fences every Etcd's member ports with a NetworkPolicy the operator makes
	// in the Etcd's namespace (etcd-conductor's own). Left out: none is made.
	MemberNetworkPolicy *MemberNetworkPolicyConfiguration `json:"memberNetworkPolicy,omitempty"`

	// etcd-druid's keys with no field of etcd-conductor's own (druid_types.go), so that its
	// files load: server.metrics becomes metricsBindAddress unless that is set; the rest are
	// accepted and ignored (Ignored says which and why).

	// Server is etcd-druid's webhook server and metrics endpoint.
	Server *ServerConfiguration `json:"server,omitempty"`
	// Webhooks is etcd-druid's admission webhooks.
	Webhooks *WebhookConfiguration `json:"webhooks,omitempty"`
	// Logging is etcd-druid's log level and format.
	Logging *LogConfiguration `json:"logging,omitempty"`
	// LogConfiguration: druid's own files carry this key (its chart and its test configuration),
	// druid ignores it: its field is logging.
	LogConfiguration *LogConfiguration `json:"logConfiguration,omitempty"`
}

// ClientConnectionConfiguration is the client-side rate limit of the manager's requests to the
// apiserver (etcd-druid's clientConnection.qps and burst). Reads from informers cost nothing
// here; writes and uncached reads do. controller-runtime's own default, 20 QPS, leaves a fleet
// of hundreds of Etcds waiting on the limiter after a restart or a fleet-wide change.
type ClientConnectionConfiguration struct {
	// QPS is the sustained rate of requests per second (default 100).
	QPS float32 `json:"qps,omitempty"`
	// Burst is how many requests may go at once above QPS (default 150; at least QPS).
	Burst int `json:"burst,omitempty"`
	// ContentType and AcceptContentTypes are etcd-druid's wire format to the apiserver, accepted
	// and ignored: the manager's clients keep controller-runtime's.
	ContentType        *string `json:"contentType,omitempty"`
	AcceptContentTypes *string `json:"acceptContentTypes,omitempty"`
	// AcceptContentType: druid's own files carry this key (its chart writes it when the value
	// is set), druid ignores it: its field is acceptContentTypes.
	AcceptContentType *string `json:"acceptContentType,omitempty"`
}

// Client connection defaults: enough for a fleet of a thousand Etcds to be gone through in
// seconds, and well within what an apiserver's default max-in-flight (400 reads, 200 writes)
// serves.
const (
	DefaultClientQPS   = 100
	DefaultClientBurst = 150
)

// LeaderElectionConfiguration configures leader election.
type LeaderElectionConfiguration struct {
	Enabled           bool            `json:"enabled,omitempty"`
	ResourceNamespace string          `json:"resourceNamespace,omitempty"`
	ResourceName      string          `json:"resourceName,omitempty"`
	LeaseDuration     metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline     metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod       metav1.Duration `json:"retryPeriod,omitempty"`
	// ResourceLock is etcd-druid's kind of lock object. etcd-conductor (as client-go today)
	// takes a coordination.k8s.io Lease, so "leases" is the one value accepted.
	ResourceLock string `json:"resourceLock,omitempty"`
}

// ControllerConfiguration configures the controllers.
type ControllerConfiguration struct {
	Etcd     EtcdControllerConfiguration     `json:"etcd,omitempty"`
	OnDelete OnDeleteControllerConfiguration `json:"ondelete,omitempty"`

	// EtcdCopyBackupsTask is etcd-druid's EtcdCopyBackupsTask controller, honoured
	// (CopyBackupsTaskEnabled, CopyBackupsTaskWorkers).
	EtcdCopyBackupsTask *EtcdCopyBackupsTaskControllerConfiguration `json:"etcdCopyBackupsTask,omitempty"`

	// etcd-druid's controllers and cache switch, accepted and ignored (Ignored says why).
	DisableLeaseCache *bool                               `json:"disableLeaseCache,omitempty"`
	Compaction        *CompactionControllerConfiguration  `json:"compaction,omitempty"`
	Secret            *SecretControllerConfiguration      `json:"secret,omitempty"`
	EtcdOpsTask       *EtcdOpsTaskControllerConfiguration `json:"etcdOpsTask,omitempty"`
}

// EtcdControllerConfiguration configures the Etcd reconciler.
type EtcdControllerConfiguration struct {
	ConcurrentSyncs int `json:"concurrentSyncs,omitempty"`

	// EnableEtcdSpecAutoReconcile is etcd-druid's switch between applying every change of an
	// Etcd's spec (true) and only those marked with druid.gardener.cloud/operation=reconcile
	// (false, etcd-druid's default). Left out, true (internal/decide/specgate).
	EnableEtcdSpecAutoReconcile *bool `json:"enableEtcdSpecAutoReconcile,omitempty"`
	// RequireTLS refuses Etcds without clientUrlTls or peerUrlTls (ERR_MISSING_TLS) instead of
	// running their members on plain HTTP, as etcd-druid does. etcd-conductor's own key; left
	// out, false.
	RequireTLS *bool `json:"requireTLS,omitempty"`
	// WaitForBackupReady postpones voluntary disruptions of an Etcd with a backup store while
	// its BackupReady condition is False (DEP-01, internal/decide/backupgate): no new rollout step,
	// scheduled defragmentation step or scale-in step starts, and its PodDisruptionBudget
	// allows no eviction. Recovery, scale-out and the replacement of lost members go on.
	// etcd-conductor's own key; left out, true.
	WaitForBackupReady *bool `json:"waitForBackupReady,omitempty"`
	// etcd-druid's keys for the member pods' token and the member status, accepted and ignored.
	DisableEtcdServiceAccountAutomount *bool `json:"disableEtcdServiceAccountAutomount,omitempty"`
	// EtcdStatusSyncPeriod is how often the status controller looks at an Etcd without an event
	// (the member Leases expire with time, not with an event); left out, 5s (etcd-druid: 15s).
	EtcdStatusSyncPeriod *metav1.Duration `json:"etcdStatusSyncPeriod,omitempty"`
	// EtcdMember holds etcd-druid's member thresholds: unknownThreshold (default 1m) is how long
	// a member stays Unknown (Lease expired) before it turns NotReady (the status controller);
	// notReadyThreshold (default 5m) how long a minority member stays NotReady before its pod is
	// deleted so it restarts (internal/decide/memberhealth). Left out or zero, the defaults.
	EtcdMember *EtcdMemberConfiguration `json:"etcdMember,omitempty"`
}

// MemberRoleSource says where the OnDelete controller learns which member leads.
type MemberRoleSource string

const (
	// MemberRoleSourceAuto asks the members over mTLS and falls back to the member leases.
	MemberRoleSourceAuto MemberRoleSource = "Auto"
	// MemberRoleSourceLeaseOnly reads only the member leases (etcd-druid's behaviour).
	MemberRoleSourceLeaseOnly MemberRoleSource = "LeaseOnly"
)

// OnDeleteControllerConfiguration configures the OnDelete controller.
type OnDeleteControllerConfiguration struct {
	ConcurrentSyncs  int              `json:"concurrentSyncs,omitempty"`
	MemberRoleSource MemberRoleSource `json:"memberRoleSource,omitempty"`
	// RequeueInterval is how often a rollout that waits is looked at again (default 5s).
	RequeueInterval metav1.Duration `json:"requeueInterval,omitempty"`
	// Handover moves leadership off the leader before its pod is deleted.
	Handover HandoverConfiguration `json:"handover,omitempty"`
	// MaxAppliedIndexLag is the catch-up gate: a participating member is deleted only while
	// every voter that remains is within this many raft entries of the leader's applied index
	// (default 1000; -1 turns the gate off).
	MaxAppliedIndexLag *int64 `json:"maxAppliedIndexLag,omitempty"`
	// MaxConcurrentMemberUpdates is how many participating members may be replaced at once,
	// capped by the quorum's headroom (5 members: 2, 7: 3). Default 1, one at a time as DEP-07.
	MaxConcurrentMemberUpdates int `json:"maxConcurrentMemberUpdates,omitempty"`
	// RejoinByRead counts a replaced member as back in the quorum as soon as it serves the
	// operator a linearizable read over mTLS, the check behind its readiness probe, instead of
	// when the kubelet's next probe says so, up to a readiness period later (default true).
	// It only ever adds: a member the kubelet calls Ready is never counted out by a read.
	RejoinByRead *bool `json:"rejoinByRead,omitempty"`
}

// HandoverConfiguration configures the leadership handover before the leader's pod goes.
type HandoverConfiguration struct {
	// Enabled defaults to true; false deletes the leader and relies on etcd's shutdown handover.
	Enabled *bool `json:"enabled,omitempty"`
	// Timeout bounds the MoveLeader call and, separately, the wait until the members confirm
	// the new leader (default 5s).
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// MaxAttempts is how many failed handovers from one leader pod are tried before it is
	// deleted anyway (default 3).
	MaxAttempts int `json:"maxAttempts,omitempty"`
}

// Defaults of the OnDelete rollout policy.
const (
	DefaultMaxAppliedIndexLag         = 1000
	DefaultHandoverTimeout            = 5 * time.Second
	DefaultHandoverMaxAttempts        = 3
	DefaultMaxConcurrentMemberUpdates = 1
	// maxConcurrentMemberUpdatesBound is the headroom of the largest cluster (9 members).
	maxConcurrentMemberUpdatesBound = 4
)

// MemberReportsConfiguration names the admission policy that authenticates the members' reports.
type MemberReportsConfiguration struct {
	// AdmissionPolicy is the ValidatingAdmissionPolicy (and its binding, of the same name) that
	// lets only the operator and each member pod, as itself, write the reports (the chart's
	// member report policy). The recovery controller restores on a report only while both are
	// installed, checked at start and every minute. Empty: none is, and reports prove nothing.
	AdmissionPolicy string `json:"admissionPolicy,omitempty"`
	// TrustUnauthenticated acts on reports even when the policy is not installed (default
	// false): anyone who may write member Leases could then order a restore.
	TrustUnauthenticated bool `json:"trustUnauthenticated,omitempty"`
}

// BackupStoresConfiguration is the operator-wide allow-list of backup store locations: whoever
// writes a backup Secret or an Etcd's spec chooses the Local host directory and the S3 endpoint,
// the members upload the keyspace there, and an EtcdCopyBackupsTask makes the manager dial it.
type BackupStoresConfiguration struct {
	// LocalRoots are the host directories the Local provider may use, as a backup Secret's
	// hostPath names them exactly (each Etcd's directory is <root>/<namespace>/<name>); none may
	// lie inside another. Empty: etcd-druid's /etc/gardener/local-backupbuffer alone.
	LocalRoots []string `json:"localRoots,omitempty"`
	// Endpoints are the S3 endpoints allowed: host is a name or IP, *.domain (any name below
	// domain) or *, with an optional :port; allowInsecure lets that entry be plain http. Empty:
	// any host over https.
	Endpoints []BackupStoreEndpoint `json:"endpoints,omitempty"`
	// AllowInsecureEndpoints lets every allowed endpoint be plain http (the keyspace and the
	// credentials then cross the network in clear). Default false.
	AllowInsecureEndpoints bool `json:"allowInsecureEndpoints,omitempty"`
	// MaxCopyObjectBytes is the largest object an EtcdCopyBackupsTask copies (0: 64 GiB, at most
	// backupstore.MaxPutSize); a larger one fails the task before a byte of it is read.
	MaxCopyObjectBytes int64 `json:"maxCopyObjectBytes,omitempty"`
}

// MemberNetworkPolicyConfiguration says who may reach an Etcd's member ports: the peer port is
// open to the Etcd's own member pods alone, whatever is set here.
type MemberNetworkPolicyConfiguration struct {
	// Enabled makes the NetworkPolicy <etcd>-members beside every Etcd (and removes the ones it
	// made once false).
	Enabled bool `json:"enabled"`
	// ClientFrom may reach the client port (mTLS); empty: anyone. List the operator's own pods
	// here too: it talks to every member.
	ClientFrom []networkingv1.NetworkPolicyPeer `json:"clientFrom,omitempty"`
	// MetricsFrom may reach the plain-HTTP metrics ports (etcd's 2381, the member-agent's 2382);
	// empty: nobody but the node's kubelet probes.
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom,omitempty"`
}

// BackupStoreEndpoint allows one S3 endpoint pattern.
type BackupStoreEndpoint struct {
	Host          string `json:"host"`
	AllowInsecure bool   `json:"allowInsecure,omitempty"`
}

// Reach is the allow-list as internal/store/backupstore checks it.
func (b BackupStoresConfiguration) Reach() backupstore.Reach {
	r := backupstore.Reach{LocalRoots: b.LocalRoots, AllowInsecureEndpoints: b.AllowInsecureEndpoints}
	for _, e := range b.Endpoints {
		r.Endpoints = append(r.Endpoints, backupstore.EndpointRule{Host: e.Host, AllowInsecure: e.AllowInsecure})
	}
	return r
}

func (b BackupStoresConfiguration) validate() error {
	if err := b.Reach().Validate(); err != nil {
		return err
	}
	if b.MaxCopyObjectBytes < 0 || b.MaxCopyObjectBytes > backupstore.MaxPutSize {
		return fmt.Errorf("backupStores.maxCopyObjectBytes is %d: at most %d (10000 parts of %d bytes, what an upload's memory is bounded by)",
			b.MaxCopyObjectBytes, backupstore.MaxPutSize, backupstore.PutPartSize)
	}
	return nil
}

// MemberClientTLS points at PEM files mounted into the manager pod.
type MemberClientTLS struct {
	CAFile   string `json:"caFile"`
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

// Default fills in unset fields.
func (c *OperatorConfiguration) Default() {
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = DefaultClientQPS
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = DefaultClientBurst
	}
	if c.Controllers.Etcd.WaitForBackupReady == nil {
		c.Controllers.Etcd.WaitForBackupReady = ptr.To(true)
	}
	if c.Controllers.Etcd.ConcurrentSyncs == 0 {
		c.Controllers.Etcd.ConcurrentSyncs = 3
	}
	if c.Controllers.OnDelete.ConcurrentSyncs == 0 {
		c.Controllers.OnDelete.ConcurrentSyncs = 3
	}
	if c.Controllers.OnDelete.MemberRoleSource == "" {
		c.Controllers.OnDelete.MemberRoleSource = MemberRoleSourceAuto
	}
	if c.Controllers.OnDelete.RequeueInterval.Duration == 0 {
		c.Controllers.OnDelete.RequeueInterval.Duration = 5 * time.Second
	}
	c.Controllers.OnDelete.defaultRolloutPolicy()
	if c.LeaderElection.ResourceName == "" {
		c.LeaderElection.ResourceName = "etcd-conductor-leader-election"
	}
	// controller-runtime's own defaults, written out so that a 0 in the file is an error rather
	// than "use the default".
	if c.LeaderElection.LeaseDuration.Duration == 0 {
		c.LeaderElection.LeaseDuration.Duration = 15 * time.Second
	}
	if c.LeaderElection.RenewDeadline.Duration == 0 {
		c.LeaderElection.RenewDeadline.Duration = 10 * time.Second
	}
	if c.LeaderElection.RetryPeriod.Duration == 0 {
		c.LeaderElection.RetryPeriod.Duration = 2 * time.Second
	}
	if c.MetricsBindAddress == "" {
		c.MetricsBindAddress = ":8443"
	}
	if c.HealthProbeBindAddress == "" {
		c.HealthProbeBindAddress = ":8081"
	}
}

// DefaultCopyBackupsTaskConcurrentSyncs is etcd-druid's number of EtcdCopyBackupsTask workers.
const DefaultCopyBackupsTaskConcurrentSyncs = 3

// CopyBackupsTaskEnabled says whether the EtcdCopyBackupsTask controller runs: only when
// controllers.etcdCopyBackupsTask.enabled is true, etcd-druid's default being off. A copy reads
// backup Secrets and writes to stores the tasks name, so it is not started unasked.
func (c *OperatorConfiguration) CopyBackupsTaskEnabled() bool {
	return c.Controllers.EtcdCopyBackupsTask != nil && c.Controllers.EtcdCopyBackupsTask.Enabled
}

// CopyBackupsTaskWorkers is controllers.etcdCopyBackupsTask.concurrentSyncs, or etcd-druid's
// default when unset: how many tasks copy at once.
func (c *OperatorConfiguration) CopyBackupsTaskWorkers() int {
	if c.Controllers.EtcdCopyBackupsTask == nil || c.Controllers.EtcdCopyBackupsTask.ConcurrentSyncs == nil {
		return DefaultCopyBackupsTaskConcurrentSyncs
	}
	return *c.Controllers.EtcdCopyBackupsTask.ConcurrentSyncs
}

func (o *OnDeleteControllerConfiguration) defaultRolloutPolicy() {
	if o.Handover.Enabled == nil {
		enabled := true
		o.Handover.Enabled = &enabled
	}
	if o.Handover.Timeout.Duration == 0 {
		o.Handover.Timeout.Duration = DefaultHandoverTimeout
	}
	if o.Handover.MaxAttempts == 0 {
		o.Handover.MaxAttempts = DefaultHandoverMaxAttempts
	}
	if o.MaxAppliedIndexLag == nil {
		lag := int64(DefaultMaxAppliedIndexLag)
		o.MaxAppliedIndexLag = &lag
	}
	if o.MaxConcurrentMemberUpdates == 0 {
		o.MaxConcurrentMemberUpdates = DefaultMaxConcurrentMemberUpdates
	}
	if o.RejoinByRead == nil {
		enabled := true
		o.RejoinByRead = &enabled
	}
}

// validateRolloutPolicy names the first rollout policy field the controller cannot run with.
func (o *OnDeleteControllerConfiguration) validateRolloutPolicy() error {
	switch {
	case o.Handover.Timeout.Duration <= 0:
		return fmt.Errorf("controllers.ondelete.handover.timeout must be a positive duration, got %s", o.Handover.Timeout.Duration)
	case o.Handover.MaxAttempts <= 0:
		return fmt.Errorf("controllers.ondelete.handover.maxAttempts must be positive, got %d", o.Handover.MaxAttempts)
	case o.MaxAppliedIndexLag != nil && *o.MaxAppliedIndexLag < -1:
		return fmt.Errorf("controllers.ondelete.maxAppliedIndexLag must be -1 (gate off) or at least 0 raft entries, got %d", *o.MaxAppliedIndexLag)
	case o.MaxConcurrentMemberUpdates < 1 || o.MaxConcurrentMemberUpdates > maxConcurrentMemberUpdatesBound:
		return fmt.Errorf("controllers.ondelete.maxConcurrentMemberUpdates must be between 1 and %d (the headroom of 9 members), got %d",
			maxConcurrentMemberUpdatesBound, o.MaxConcurrentMemberUpdates)
	}
	return nil
}

// leaderElectionJitter is client-go's leader election JitterFactor: renewDeadline must exceed
// retryPeriod times it, or the elector refuses to start.
const leaderElectionJitter = 1.2

// Validate reports the first field that holds a value the manager cannot run with, naming it.
func (c *OperatorConfiguration) Validate() error {
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return fmt.Errorf("expected apiVersion %q and kind %q, got %q and %q", APIVersion, Kind, c.APIVersion, c.Kind)
	}
	for _, f := range []struct {
		field string
		value int
	}{
		{"controllers.etcd.concurrentSyncs", c.Controllers.Etcd.ConcurrentSyncs},
		{"controllers.ondelete.concurrentSyncs", c.Controllers.OnDelete.ConcurrentSyncs},
		{"controllers.etcdCopyBackupsTask.concurrentSyncs", c.CopyBackupsTaskWorkers()},
	} {
		if f.value <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.field, f.value)
		}
	}
	if err := c.ClientConnection.validate(); err != nil {
		return err
	}
	if err := c.BackupStores.validate(); err != nil {
		return err
	}
	if err := c.Logging.validate(); err != nil {
		return err
	}
	le := c.LeaderElection
	for _, f := range []struct {
		field string
		value time.Duration
	}{
		{"leaderElection.leaseDuration", le.LeaseDuration.Duration},
		{"leaderElection.renewDeadline", le.RenewDeadline.Duration},
		{"leaderElection.retryPeriod", le.RetryPeriod.Duration},
		{"controllers.ondelete.requeueInterval", c.Controllers.OnDelete.RequeueInterval.Duration},
	} {
		if f.value <= 0 {
			return fmt.Errorf("%s must be a positive duration, got %s", f.field, f.value)
		}
	}
	if p := c.Controllers.Etcd.EtcdStatusSyncPeriod; p != nil && p.Duration <= 0 {
		return fmt.Errorf("controllers.etcd.etcdStatusSyncPeriod must be a positive duration, got %s", p.Duration)
	}
	if m := c.Controllers.Etcd.EtcdMember; m != nil {
		// Zero is the key left out (druid's fields are no pointers): druid's default applies.
		for _, f := range []struct {
			field string
			value time.Duration
		}{
			{"controllers.etcd.etcdMember.notReadyThreshold", m.NotReadyThreshold.Duration},
			{"controllers.etcd.etcdMember.unknownThreshold", m.UnknownThreshold.Duration},
		} {
			if f.value < 0 {
				return fmt.Errorf("%s must be a positive duration, got %s", f.field, f.value)
			}
		}
	}
	if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		return fmt.Errorf("leaderElection.leaseDuration (%s) must be longer than leaderElection.renewDeadline (%s)",
			le.LeaseDuration.Duration, le.RenewDeadline.Duration)
	}
	if float64(le.RenewDeadline.Duration) <= leaderElectionJitter*float64(le.RetryPeriod.Duration) {
		return fmt.Errorf("leaderElection.renewDeadline (%s) must be longer than %.1f × leaderElection.retryPeriod (%s)",
			le.RenewDeadline.Duration, leaderElectionJitter, le.RetryPeriod.Duration)
	}
	if err := c.Controllers.OnDelete.validateRolloutPolicy(); err != nil {
		return err
	}
	if err := c.validateDruidKeys(); err != nil {
		return err
	}
	switch c.Controllers.OnDelete.MemberRoleSource {
	case MemberRoleSourceAuto, MemberRoleSourceLeaseOnly:
	default:
		return fmt.Errorf("controllers.ondelete.memberRoleSource must be %q or %q, got %q",
			MemberRoleSourceAuto, MemberRoleSourceLeaseOnly, c.Controllers.OnDelete.MemberRoleSource)
	}
	// A default is only applied to a field the file leaves out; written as "" it would reach
	// controller-runtime, whose idea of an empty address is its own.
	for _, f := range []struct{ field, value string }{
		{"metricsBindAddress", c.MetricsBindAddress},
		{"healthProbeBindAddress", c.HealthProbeBindAddress},
	} {
		if f.value == "" {
			return fmt.Errorf(`%s must not be empty ("0" disables it)`, f.field)
		}
	}
	if p := c.MemberReports.AdmissionPolicy; p != "" {
		if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
			return fmt.Errorf("memberReports.admissionPolicy %q is not an object name: %s", p, strings.Join(errs, "; "))
		}
	}
	seen := map[string]bool{}
	for i, ns := range c.WatchNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("watchNamespaces[%d] %q is not a namespace name: %s", i, ns, strings.Join(errs, "; "))
		}
		if seen[ns] {
			return fmt.Errorf("watchNamespaces[%d] %q is listed twice", i, ns)
		}
		seen[ns] = true
	}
	if t := c.MemberClientTLS; t != nil {
		var missing []string
		for _, f := range []struct{ name, value string }{{"caFile", t.CAFile}, {"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
			if f.value == "" {
				missing = append(missing, "memberClientTLS."+f.name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("memberClientTLS needs caFile, certFile and keyFile together; missing %s", strings.Join(missing, ", "))
		}
	}
	return nil
}

func (c ClientConnectionConfiguration) validate() error {
	// A QPS of 0 or below would mean "no limit" or "the default" to client-go: neither is what
	// a value written in the file asks for.
	if !(c.QPS > 0) {
		return fmt.Errorf("clientConnection.qps must be positive, got %v", c.QPS)
	}
	if c.Burst < 1 {
		return fmt.Errorf("clientConnection.burst must be positive, got %d", c.Burst)
	}
	if float64(c.Burst) < float64(c.QPS) {
		return fmt.Errorf("clientConnection.burst (%d) must be at least clientConnection.qps (%v)", c.Burst, c.QPS)
	}
	return nil
}

// Decode parses an OperatorConfiguration from YAML or JSON, strictly, so a typo is a start-up
// error naming the field and never a silent default: exactly one document; keys match the field
// names exactly (encoding/json would take "FeatureGates" or "leaderelection" for them) and
// appear once; no unknown field; no key without a value. Fields the file leaves out get their
// defaults, while a value written in the file (say concurrentSyncs: 0) is validated as written.
// Every key of etcd-druid's OperatorConfiguration is known (druid_types.go), and so are the few
// keys etcd-druid's own files carry that its type lacks; etcd-druid's server.metrics becomes
// metricsBindAddress unless that is written too (druid_honoured.go); Ignored lists the etcd-druid
// keys set and not acted on.
// Feature gate names are checked by the features package, which owns the list of gates.
func Decode(data []byte) (*OperatorConfiguration, error) {
	if err := singleDocument(data); err != nil {
		return nil, fmt.Errorf("parsing operator configuration: %w", err)
	}
	// Strict: a key repeated in a mapping is an error, not "the last one wins".
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parsing operator configuration: %w", err)
	}
	if err := rejectNulls(jsonData); err != nil {
		return nil, fmt.Errorf("decoding operator configuration: %w", err)
	}
	cfg := &OperatorConfiguration{}
	cfg.Default()
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, cfg, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("decoding operator configuration: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("decoding operator configuration: %s", strings.Join(msgs, "; "))
	}
	if err := applyDruidAliases(cfg, jsonData); err != nil {
		return nil, fmt.Errorf("decoding operator configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid operator configuration: %w", err)
	}
	return cfg, nil
}

// singleDocument rejects a stream of more than one YAML document: the manager would read the
// first and silently ignore the rest.
func singleDocument(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	documents := 0
	for {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue // an empty document, e.g. a leading or trailing "---"
		}
		documents++
		if documents > 1 {
			return fmt.Errorf("a second YAML document starts at line %d; the file must hold exactly one OperatorConfiguration", doc.Line)
		}
	}
	return nil
}

// rejectNulls names the first key written without a value ("memberClientTLS:" alone), which
// would otherwise decode as if the key were absent.
func rejectNulls(jsonData []byte) error {
	var tree any
	if err := json.Unmarshal(jsonData, &tree); err != nil {
		return err
	}
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		switch v := v.(type) {
		case nil:
			if path == "" {
				return errors.New("the configuration is empty")
			}
			return fmt.Errorf("%s has no value", path)
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				child := k
				if path != "" {
					child = path + "." + k
				}
				if err := walk(child, v[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, item := range v {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), item); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("", tree)
}
