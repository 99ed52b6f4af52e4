package status

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-conductor/etcd-conductor/internal/memberlease"
)

// Metrics are the status controller's Prometheus series. They are registered on the registry
// passed in (the manager's in production, a fresh one in tests), never on a global default.
type Metrics struct {
	// AsideDirs and AsideBytes are, per member, how many data dirs its init step keeps aside
	// and their size, as it last reported on its Lease (memberlease.AnnotationDataAside).
	AsideDirs  *prometheus.GaugeVec
	AsideBytes *prometheus.GaugeVec

	// reported remembers the members each Etcd has series for, so those that stop reporting
	// (a member scaled away, its Lease deleted) lose theirs.
	mu       sync.Mutex
	reported map[types.NamespacedName]map[string]bool
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "etcd_conductor"
	labels := []string{"namespace", "etcd", "member"}
	m := &Metrics{
		AsideDirs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "member_data_aside_dirs",
			Help: "Data dirs a member's init step keeps aside next to its data dir (never deleted; status.dataAside lists the newest), as reported on its Lease."}, labels),
		AsideBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "member_data_aside_bytes",
			Help: "Bytes of the data dirs a member's init step keeps aside next to its data dir, as reported on its Lease."}, labels),
		reported: map[types.NamespacedName]map[string]bool{},
	}
	for _, c := range []prometheus.Collector{m.AsideDirs, m.AsideBytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// recordAside sets the data-aside series of etcd's members to reports and deletes those of
// members that no longer report. A nil Metrics records nothing.
func (m *Metrics) recordAside(etcd types.NamespacedName, reports map[string]memberlease.DataAside) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for member := range m.reported[etcd] {
		if _, ok := reports[member]; !ok {
			m.AsideDirs.DeleteLabelValues(etcd.Namespace, etcd.Name, member)
			m.AsideBytes.DeleteLabelValues(etcd.Namespace, etcd.Name, member)
		}
	}
	if len(reports) == 0 {
		delete(m.reported, etcd)
		return
	}
	members := map[string]bool{}
	for member, d := range reports {
		m.AsideDirs.WithLabelValues(etcd.Namespace, etcd.Name, member).Set(float64(d.Count))
		m.AsideBytes.WithLabelValues(etcd.Namespace, etcd.Name, member).Set(float64(d.Bytes))
		members[member] = true
	}
	m.reported[etcd] = members
}

// forget deletes the series of an Etcd that is gone.
func (m *Metrics) forget(etcd types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	labels := prometheus.Labels{"namespace": etcd.Namespace, "etcd": etcd.Name}
	m.AsideDirs.DeletePartialMatch(labels)
	m.AsideBytes.DeletePartialMatch(labels)
	delete(m.reported, etcd)
}
