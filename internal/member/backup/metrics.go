package backup

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sidecar's backup figures (served by the member-agent on --metrics-address).
type Metrics struct {
	size     *prometheus.GaugeVec
	duration *prometheus.HistogramVec
	latest   *prometheus.GaugeVec
	failures *prometheus.CounterVec
	taken    *prometheus.CounterVec
	deleted  *prometheus.CounterVec
	leader   prometheus.Gauge
}

// NewMetrics registers the backup metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcd_conductor_backup_snapshot_size_bytes", Help: "Size of the last snapshot uploaded, by kind (Full, Incr).",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "etcd_conductor_backup_snapshot_duration_seconds", Help: "Time to take, upload and verify a snapshot, by kind and result.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"kind", "result"}),
		latest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcd_conductor_backup_latest_snapshot_timestamp_seconds", Help: "Unix time of the last snapshot uploaded, by kind; time() minus this is its age.",
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_conductor_backup_failures_total", Help: "Snapshot, upload or store failures, by kind and reason.",
		}, []string{"kind", "reason"}),
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_conductor_backup_snapshots_total", Help: "Snapshots uploaded and verified, by kind and rule.",
		}, []string{"kind", "rule"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_conductor_backup_gc_deleted_total", Help: "Snapshots garbage collection deleted, by rule.",
		}, []string{"rule"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcd_conductor_backup_leader", Help: "1 while this agent's member leads and it takes the snapshots.",
		}),
	}
	reg.MustRegister(m.size, m.duration, m.latest, m.failures, m.taken, m.deleted, m.leader)
	return m
}
