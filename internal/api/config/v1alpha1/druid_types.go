package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The shapes of etcd-druid's configuration keys that etcd-conductor has no field of its own for.
// They are declared so that a file written for etcd-druid decodes, still strictly: a misspelled
// key inside them is an error naming it, as anywhere else. Every one is a pointer, so that
// Ignored can tell a key written in the file from one left out. Which of them are acted on, and
// why the others are not, is in druid_honoured.go and ignored.go.

// ServerConfiguration is etcd-druid's server: its webhook server and its metrics endpoint.
type ServerConfiguration struct {
	// Webhooks is etcd-druid's admission webhook server; etcd-conductor serves none.
	Webhooks *TLSServer `json:"webhooks,omitempty"`
	// Metrics is where etcd-druid serves metrics; it becomes metricsBindAddress unless that is set.
	Metrics *Server `json:"metrics,omitempty"`
}

// Server is an address and a port to listen on.
type Server struct {
	BindAddress string `json:"bindAddress,omitempty"`
	Port        int    `json:"port,omitempty"`
}

// TLSServer is etcd-druid's webhook server: its address, port and certificate directory (etcd-druid
// writes the address and port inline), plus the two keys etcd-druid's own test configuration
// nests them under instead, which etcd-druid's lenient decoder drops.
type TLSServer struct {
	BindAddress   string `json:"bindAddress,omitempty"`
	Port          int    `json:"port,omitempty"`
	ServerCertDir string `json:"serverCertDir,omitempty"`
	// Server: druid's own files carry this key, druid ignores it.
	Server *mismatchedWebhookServer `json:"server,omitempty"`
	// TLSConfig: druid's own files carry this key, druid ignores it.
	TLSConfig *mismatchedWebhookTLSConfig `json:"tlsConfig,omitempty"`
}

// mismatchedWebhookServer is exactly what etcd-druid's own test configuration writes under
// server.webhooks.server, and no more: a key its files do not carry stays an error.
type mismatchedWebhookServer struct {
	Port int `json:"port,omitempty"`
}

// mismatchedWebhookTLSConfig is exactly what etcd-druid's own test configuration writes under
// server.webhooks.tlsConfig.
type mismatchedWebhookTLSConfig struct {
	ServerCertDir string `json:"serverCertDir,omitempty"`
}

// EtcdMemberConfiguration is etcd-druid's member thresholds: UnknownThreshold is how long a member
// stays Unknown before it turns NotReady (UnknownGracePeriodExceeded), NotReadyThreshold how long
// a member stays NotReady before its pod is deleted. Zero is the druid default (1m, 5m).
type EtcdMemberConfiguration struct {
	NotReadyThreshold metav1.Duration `json:"notReadyThreshold,omitempty"`
	UnknownThreshold  metav1.Duration `json:"unknownThreshold,omitempty"`
}

// CompactionControllerConfiguration is etcd-druid's snapshot compaction Jobs.
type CompactionControllerConfiguration struct {
	Enabled                      bool            `json:"enabled,omitempty"`
	ConcurrentSyncs              *int            `json:"concurrentSyncs,omitempty"`
	EventsThreshold              int64           `json:"eventsThreshold,omitempty"`
	TriggerFullSnapshotThreshold int64           `json:"triggerFullSnapshotThreshold,omitempty"`
	ActiveDeadlineDuration       metav1.Duration `json:"activeDeadlineDuration,omitempty"`
	MetricsScrapeWaitDuration    metav1.Duration `json:"metricsScrapeWaitDuration,omitempty"`
}

// EtcdCopyBackupsTaskControllerConfiguration is etcd-druid's EtcdCopyBackupsTask controller,
// honoured: Enabled runs it (off unless set, as etcd-druid), ConcurrentSyncs is its number of
// workers (DefaultCopyBackupsTaskConcurrentSyncs unless set, etcd-druid's default).
type EtcdCopyBackupsTaskControllerConfiguration struct {
	Enabled         bool `json:"enabled,omitempty"`
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
}

// SecretControllerConfiguration is etcd-druid's controller of the finalizers on the Secrets an
// Etcd names.
type SecretControllerConfiguration struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
}

// EtcdOpsTaskControllerConfiguration is etcd-druid's EtcdOpsTask controller.
type EtcdOpsTaskControllerConfiguration struct {
	ConcurrentSyncs *int             `json:"concurrentSyncs,omitempty"`
	RequeueInterval *metav1.Duration `json:"requeueInterval,omitempty"`
}

// WebhookConfiguration is etcd-druid's admission webhooks.
type WebhookConfiguration struct {
	EtcdComponentProtection *EtcdComponentProtectionWebhookConfiguration `json:"etcdComponentProtection,omitempty"`
}

// EtcdComponentProtectionWebhookConfiguration is etcd-druid's webhook that refuses changes to the
// objects it manages from anyone but itself and the exempted service accounts.
type EtcdComponentProtectionWebhookConfiguration struct {
	Enabled                      bool                `json:"enabled,omitempty"`
	ReconcilerServiceAccountFQDN *string             `json:"reconcilerServiceAccountFQDN,omitempty"`
	ServiceAccountInfo           *ServiceAccountInfo `json:"serviceAccountInfo,omitempty"`
	ExemptServiceAccounts        []string            `json:"exemptServiceAccounts,omitempty"`
}

// ServiceAccountInfo names etcd-druid's own ServiceAccount.
type ServiceAccountInfo struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// LogConfiguration is etcd-druid's log level and format: under logging the manager honours both
// (ValidateLogging), under logConfiguration (where druid's own files put it) neither, as druid.
type LogConfiguration struct {
	// LogLevel is debug (info plus the controllers' V(1) decisions), info (the default) or error.
	LogLevel string `json:"logLevel,omitempty"`
	// LogFormat is json (the default) or text (human-readable lines).
	LogFormat string `json:"logFormat,omitempty"`
}

// Log levels and formats etcd-druid's logging accepts.
const (
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelError = "error"
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// validate refuses a level or format etcd-druid would not know, naming the ones it knows.
func (l *LogConfiguration) validate() error {
	if l == nil {
		return nil
	}
	switch l.LogLevel {
	case "", LogLevelDebug, LogLevelInfo, LogLevelError:
	default:
		return fmt.Errorf("logging.logLevel %q: must be %s, %s or %s", l.LogLevel, LogLevelDebug, LogLevelInfo, LogLevelError)
	}
	switch l.LogFormat {
	case "", LogFormatJSON, LogFormatText:
	default:
		return fmt.Errorf("logging.logFormat %q: must be %s or %s", l.LogFormat, LogFormatJSON, LogFormatText)
	}
	return nil
}
