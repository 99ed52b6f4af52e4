// Package v1alpha1 holds OperatorConfiguration (config.druid.gardener.cloud/v1alpha1): the
// manager's configuration file, decoded strictly so a typo is a start-up error, not a silent default.
package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
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

	// LeaderElection configures leader election between manager replicas.
	LeaderElection LeaderElectionConfiguration `json:"leaderElection,omitempty"`
	// Controllers configures each controller.
	Controllers ControllerConfiguration `json:"controllers,omitempty"`
	// FeatureGates enables or disables features by name.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// MemberClientTLS is the operator-wide client key pair used for clusters whose Etcd names none.
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
}

// LeaderElectionConfiguration configures leader election.
type LeaderElectionConfiguration struct {
	Enabled           bool            `json:"enabled,omitempty"`
	ResourceNamespace string          `json:"resourceNamespace,omitempty"`
	ResourceName      string          `json:"resourceName,omitempty"`
	LeaseDuration     metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline     metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod       metav1.Duration `json:"retryPeriod,omitempty"`
}

// ControllerConfiguration configures the controllers.
type ControllerConfiguration struct {
	Etcd     EtcdControllerConfiguration     `json:"etcd,omitempty"`
	OnDelete OnDeleteControllerConfiguration `json:"ondelete,omitempty"`
}

// EtcdControllerConfiguration configures the Etcd reconciler.
type EtcdControllerConfiguration struct {
	ConcurrentSyncs int `json:"concurrentSyncs,omitempty"`
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
}

// MemberClientTLS points at PEM files mounted into the manager pod.
type MemberClientTLS struct {
	CAFile   string `json:"caFile"`
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

// Default fills in unset fields.
func (c *OperatorConfiguration) Default() {
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
	if c.LeaderElection.ResourceName == "" {
		c.LeaderElection.ResourceName = "etcd-conductor-leader-election"
	}
	if c.MetricsBindAddress == "" {
		c.MetricsBindAddress = ":8443"
	}
	if c.HealthProbeBindAddress == "" {
		c.HealthProbeBindAddress = ":8081"
	}
}

// Validate reports the first field that holds a value the manager cannot run with.
func (c *OperatorConfiguration) Validate() error {
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return fmt.Errorf("expected apiVersion %q and kind %q, got %q and %q", APIVersion, Kind, c.APIVersion, c.Kind)
	}
	if c.Controllers.Etcd.ConcurrentSyncs < 0 {
		return fmt.Errorf("controllers.etcd.concurrentSyncs must not be negative, got %d", c.Controllers.Etcd.ConcurrentSyncs)
	}
	if c.Controllers.OnDelete.ConcurrentSyncs < 0 {
		return fmt.Errorf("controllers.ondelete.concurrentSyncs must not be negative, got %d", c.Controllers.OnDelete.ConcurrentSyncs)
	}
	switch c.Controllers.OnDelete.MemberRoleSource {
	case MemberRoleSourceAuto, MemberRoleSourceLeaseOnly:
	default:
		return fmt.Errorf("controllers.ondelete.memberRoleSource must be %q or %q, got %q",
			MemberRoleSourceAuto, MemberRoleSourceLeaseOnly, c.Controllers.OnDelete.MemberRoleSource)
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
	return nil
}

// Decode parses an OperatorConfiguration from YAML or JSON. Unknown fields are errors that name
// the field; defaults are applied and the result validated. Feature gate names are checked by the
// features package, which owns the list of gates.
func Decode(data []byte) (*OperatorConfiguration, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parsing operator configuration: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.DisallowUnknownFields()
	cfg := &OperatorConfiguration{}
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("decoding operator configuration: %w", err)
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid operator configuration: %w", err)
	}
	return cfg, nil
}
