package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DruidDefaultMetricsPort is the port etcd-druid serves metrics on when server.metrics names none.
const DruidDefaultMetricsPort = 8080

// The leader election lock etcd-conductor takes; etcd-druid's resourceLock may only name it.
const resourceLockLeases = "leases"

// applyDruidAliases gives etcd-conductor's field the value of etcd-druid's key for the same
// thing when the file writes etcd-druid's key and not ours. Ours wins when both are written:
// it is the more specific of the two, and Ignored then names etcd-druid's key as overridden.
// Keys etcd-druid spells as we do (clientConnection, leaderElection, concurrentSyncs,
// featureGates) need nothing here.
func applyDruidAliases(cfg *OperatorConfiguration, jsonData []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(jsonData, &top); err != nil {
		return fmt.Errorf("reading the top-level keys: %w", err)
	}
	if _, ours := top["metricsBindAddress"]; !ours {
		if addr, ok := cfg.druidMetricsAddress(); ok {
			cfg.MetricsBindAddress = addr
		}
	}
	return nil
}

// druidMetricsAddress is where etcd-druid would serve metrics from server.metrics: its
// bindAddress and its port, which etcd-druid defaults to 8080. ok is false when the
// configuration has no server.metrics.
func (c *OperatorConfiguration) druidMetricsAddress() (addr string, ok bool) {
	if c.Server == nil || c.Server.Metrics == nil {
		return "", false
	}
	port := c.Server.Metrics.Port
	if port == 0 {
		port = DruidDefaultMetricsPort
	}
	return net.JoinHostPort(c.Server.Metrics.BindAddress, strconv.Itoa(port)), true
}

// validateDruidKeys names the first etcd-druid key that etcd-conductor acts on and cannot act on
// as written. Keys it ignores are not validated beyond their type: nothing reads them.
func (c *OperatorConfiguration) validateDruidKeys() error {
	switch c.LeaderElection.ResourceLock {
	case "", resourceLockLeases:
	default:
		return fmt.Errorf("leaderElection.resourceLock must be %q (the manager takes a coordination.k8s.io Lease), got %q",
			resourceLockLeases, c.LeaderElection.ResourceLock)
	}
	if c.Server == nil || c.Server.Metrics == nil {
		return nil
	}
	m := c.Server.Metrics
	if m.Port < 0 || m.Port > 65535 {
		return fmt.Errorf("server.metrics.port must be between 1 and 65535 (0: etcd-druid's default %d), got %d", DruidDefaultMetricsPort, m.Port)
	}
	// A bindAddress with a port of its own would be joined into an address nothing can listen on.
	if strings.Contains(m.BindAddress, ":") && net.ParseIP(m.BindAddress) == nil {
		return fmt.Errorf("server.metrics.bindAddress must be a host or IP without a port (the port is server.metrics.port), got %q", m.BindAddress)
	}
	return nil
}
