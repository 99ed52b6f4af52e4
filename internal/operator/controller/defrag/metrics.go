package defrag

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are the defragmentation controller's Prometheus series, registered on the registry
// passed in.
type Metrics struct {
	Defragmentations *prometheus.CounterVec
	Duration         *prometheus.HistogramVec
	DBSize           *prometheus.GaugeVec
	Reclaimed        *prometheus.CounterVec
	Runs             *prometheus.CounterVec
	Decisions        *prometheus.CounterVec
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "etcd_conductor"
	m := &Metrics{
		Defragmentations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "defragmentations_total",
			Help: "Member defragmentations, by Etcd and result (succeeded, failed)."}, []string{"namespace", "etcd", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "defragmentation_duration_seconds",
			Help:    "How long one member's defragmentation took; the member serves nothing meanwhile.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}, []string{"result"}),
		DBSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "defragmentation_db_size_bytes",
			Help: "A member's database size before and after its last defragmentation."}, []string{"namespace", "etcd", "member", "phase"}),
		Reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "defragmentation_reclaimed_bytes_total",
			Help: "Bytes given back by defragmentations, by Etcd."}, []string{"namespace", "etcd"}),
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "defragmentation_runs_total",
			Help: "Scheduled defragmentation runs, by Etcd and how they ended (completed, skipped)."}, []string{"namespace", "etcd", "result"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "defragmentation_decisions_total",
			Help: "Defragmentation planner decisions, by Etcd and rule."}, []string{"namespace", "etcd", "rule"}),
	}
	for _, c := range []prometheus.Collector{m.Defragmentations, m.Duration, m.DBSize, m.Reclaimed, m.Runs, m.Decisions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Forget deletes the series of an Etcd that is gone (labels namespace and etcd), which would
// otherwise stay at their last values for as long as the manager runs.
func (m *Metrics) Forget(etcd types.NamespacedName) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"namespace": etcd.Namespace, "etcd": etcd.Name}
	for _, vec := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.DBSize, m.Defragmentations, m.Reclaimed, m.Runs, m.Decisions} {
		vec.DeletePartialMatch(labels)
	}
}
