package v1alpha1

import "fmt"

// ignoredKey is one etcd-druid key a configuration sets that etcd-conductor does not act on.
type ignoredKey struct {
	path, why string
}

func (k ignoredKey) String() string { return k.path + ": " + k.why }

// Why the manager's clients ignore etcd-druid's wire format keys.
const whyContentType = "the manager's clients keep controller-runtime's wire format"

// Why the logging keys are ignored: the manager's log format is a command-line flag.
const whyLogging = "the manager reads logging (logLevel, logFormat) instead"

// ignoredKeys lists, in the order of etcd-druid's type, every etcd-druid key etcd-conductor
// accepts without acting on it: set reports whether the configuration writes it.
var ignoredKeys = []struct {
	path string
	set  func(*OperatorConfiguration) bool
	why  string
}{
	{"clientConnection.contentType", func(c *OperatorConfiguration) bool { return c.ClientConnection.ContentType != nil }, whyContentType},
	{"clientConnection.acceptContentTypes", func(c *OperatorConfiguration) bool { return c.ClientConnection.AcceptContentTypes != nil }, whyContentType},
	{"clientConnection.acceptContentType", func(c *OperatorConfiguration) bool { return c.ClientConnection.AcceptContentType != nil },
		"druid's own files carry this key, druid ignores it (its field is acceptContentTypes); " + whyContentType},
	{"server.webhooks", func(c *OperatorConfiguration) bool { return c.Server != nil && c.Server.Webhooks != nil },
		"etcd-conductor serves no admission webhook"},
	{"controllers.disableLeaseCache", func(c *OperatorConfiguration) bool { return c.Controllers.DisableLeaseCache != nil },
		"the member Leases are read from the manager's cache, whose changes the status controller follows"},
	{"controllers.etcd.disableEtcdServiceAccountAutomount",
		func(c *OperatorConfiguration) bool {
			return c.Controllers.Etcd.DisableEtcdServiceAccountAutomount != nil
		},
		"member pods never automount a ServiceAccount token; only the member-agent sidecar mounts a projected one that expires"},
	{"controllers.compaction", func(c *OperatorConfiguration) bool { return c.Controllers.Compaction != nil },
		"etcd-conductor runs no snapshot compaction Jobs: a restore replays the deltas itself"},
	{"controllers.secret", func(c *OperatorConfiguration) bool { return c.Controllers.Secret != nil },
		"etcd-conductor puts no finalizer on the Secrets an Etcd names, so it has no Secret controller"},
	{"controllers.etcdOpsTask", func(c *OperatorConfiguration) bool { return c.Controllers.EtcdOpsTask != nil },
		"the EtcdOpsTask controller runs one worker and looks at a running task every second; neither is configurable"},
	{"webhooks", func(c *OperatorConfiguration) bool { return c.Webhooks != nil },
		"etcd-conductor serves no admission webhook"},
	{"logConfiguration", func(c *OperatorConfiguration) bool { return c.LogConfiguration != nil },
		"druid's own files carry this key, druid ignores it (its field is logging); " + whyLogging},
}

// Ignored lists each etcd-druid key the configuration sets that etcd-conductor accepts without
// acting on, as "path: why", for the manager to log once at start-up: a user switching from
// etcd-druid sees what of their file no longer does anything, instead of the file being refused.
// An etcd-druid key overridden by etcd-conductor's own (server.metrics by metricsBindAddress) is
// listed too.
func Ignored(cfg *OperatorConfiguration) []string {
	var keys []ignoredKey
	for _, k := range ignoredKeys {
		if k.set(cfg) {
			keys = append(keys, ignoredKey{path: k.path, why: k.why})
		}
	}
	if addr, ok := cfg.druidMetricsAddress(); ok && addr != cfg.MetricsBindAddress {
		keys = append(keys, ignoredKey{path: "server.metrics",
			why: fmt.Sprintf("metricsBindAddress (%s) is set and wins over etcd-druid's %s", cfg.MetricsBindAddress, addr)})
	}
	keys = append(keys, cfg.ignoredFeatureGates()...)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}
