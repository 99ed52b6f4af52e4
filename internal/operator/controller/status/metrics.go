package status

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
)

// Metrics are the status controller's Prometheus series: each Etcd's health as its status says
// (labels namespace and etcd, plus member for per-member series), and the data kept aside by its
// members. They are registered on the registry passed in (the manager's in production, a fresh
// one in tests), never on a global default, and deleted with the Etcd or the member.
type Metrics struct {
	// AsideDirs and AsideBytes are, per member, how many data dirs its init step keeps aside
	// and their size, as it last reported on its Lease (memberlease.AnnotationDataAside).
	AsideDirs  *prometheus.GaugeVec
	AsideBytes *prometheus.GaugeVec

	// Per Etcd.
	Ready, Quorate, SpecReplicas, ReadyMembers, Voters, QuotaBytes *prometheus.GaugeVec
	// Condition is 1 for a condition's current status (True, False, Unknown), 0 for the others.
	Condition *prometheus.GaugeVec
	// LastFullSnapshot and LastDeltaSnapshot are Unix times; time() minus them is the age.
	LastFullSnapshot, LastDeltaSnapshot *prometheus.GaugeVec
	// Per member.
	MemberReady, MemberLeader *prometheus.GaugeVec

	mu      sync.Mutex
	tracked map[*prometheus.GaugeVec]*trackedGauge
}

const metricsNamespace = "etcd_conductor"

func etcdGauge(name, help string, extra ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help},
		append([]string{"namespace", "etcd"}, extra...))
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		AsideDirs: etcdGauge("member_data_aside_dirs",
			"Data dirs a member's init step keeps aside next to its data dir (never deleted; status.dataAside lists the newest), as reported on its Lease.", "member"),
		AsideBytes: etcdGauge("member_data_aside_bytes",
			"Bytes of the data dirs a member's init step keeps aside next to its data dir, as reported on its Lease.", "member"),
		Ready: etcdGauge("etcd_ready",
			"1 while the Etcd's status.ready is true: a quorum of its voting members is ready and all its members are."),
		Quorate: etcdGauge("etcd_quorate",
			"1 while the Etcd's Ready condition is True: at least a quorum (voters/2+1) of its voting members is ready."),
		SpecReplicas: etcdGauge("etcd_spec_replicas", "Members the Etcd asks for (spec.replicas)."),
		ReadyMembers: etcdGauge("etcd_members_ready",
			"Members whose status.members entry is Ready: pod Ready and member Lease renewed."),
		Voters: etcdGauge("etcd_voters",
			"Voting members the quorum is counted over (status.clusterSize): learners and members not added yet excluded."),
		QuotaBytes: etcdGauge("etcd_quota_backend_bytes",
			"Each member's backend quota (spec.etcd.quota or the 8Gi default); past it etcd refuses writes (NOSPACE alarm)."),
		Condition: etcdGauge("etcd_condition",
			"1 for the status a condition of the Etcd has (True, False, Unknown), 0 for the other two; every condition of the status, whichever controller writes it.",
			"condition", "status"),
		LastFullSnapshot: etcdGauge("etcd_last_full_snapshot_timestamp_seconds",
			"Unix time of the last full snapshot uploaded, from the full snapshot Lease; absent before the first or without backups. time() minus it is its age."),
		LastDeltaSnapshot: etcdGauge("etcd_last_delta_snapshot_timestamp_seconds",
			"Unix time of the last delta snapshot uploaded, from the delta snapshot Lease; absent before the first or without backups. time() minus it is its age."),
		MemberReady: etcdGauge("member_ready",
			"1 while the member's status.members entry is Ready (pod Ready, member Lease renewed), 0 while NotReady or Unknown.", "member"),
		MemberLeader: etcdGauge("member_leader",
			"1 while the member's Lease says it leads (status.members role Leader).", "member"),
		tracked: map[*prometheus.GaugeVec]*trackedGauge{},
	}
	for _, vec := range m.vecs() {
		m.tracked[vec] = newTrackedGauge(vec)
		if err := reg.Register(vec); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) vecs() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{m.AsideDirs, m.AsideBytes, m.Ready, m.Quorate, m.SpecReplicas, m.ReadyMembers, m.Voters,
		m.QuotaBytes, m.Condition, m.LastFullSnapshot, m.LastDeltaSnapshot, m.MemberReady, m.MemberLeader}
}

// conditionStatuses are the values a condition's status label takes, one series each.
var conditionStatuses = []druidv1alpha1.ConditionStatus{druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionUnknown}

// record sets etcd's health series to h; series of members, conditions and snapshots h no
// longer has are deleted. A nil Metrics records nothing.
func (m *Metrics) record(etcd types.NamespacedName, h Health) {
	if m == nil {
		return
	}
	var conditions, memberReady, memberLeader []sample
	for _, c := range h.Conditions {
		for _, s := range conditionStatuses {
			conditions = append(conditions, sample{labels: []string{string(c.Type), string(s)}, value: boolValue(c.Status == s)})
		}
	}
	for _, mh := range h.Members {
		memberReady = append(memberReady, sample{labels: []string{mh.Name}, value: boolValue(mh.Ready)})
		memberLeader = append(memberLeader, sample{labels: []string{mh.Name}, value: boolValue(mh.Leader)})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for vec, samples := range map[*prometheus.GaugeVec][]sample{
		m.Ready:             one(boolValue(h.Ready)),
		m.Quorate:           one(boolValue(h.Quorate)),
		m.SpecReplicas:      one(float64(h.SpecReplicas)),
		m.ReadyMembers:      one(float64(h.ReadyMembers)),
		m.Voters:            one(float64(h.Voters)),
		m.QuotaBytes:        one(float64(h.QuotaBytes)),
		m.Condition:         conditions,
		m.LastFullSnapshot:  unixTime(h.LastFullSnapshot),
		m.LastDeltaSnapshot: unixTime(h.LastDeltaSnapshot),
		m.MemberReady:       memberReady,
		m.MemberLeader:      memberLeader,
	} {
		m.tracked[vec].replace(etcd, samples)
	}
}

// unixTime is one sample of t in seconds, none for the zero time (no series rather than 1970).
func unixTime(t time.Time) []sample {
	if t.IsZero() {
		return nil
	}
	return one(float64(t.UnixNano()) / 1e9)
}

// recordAside sets the data-aside series of etcd's members to reports and deletes those of
// members that no longer report. A nil Metrics records nothing.
func (m *Metrics) recordAside(etcd types.NamespacedName, reports map[string]memberlease.DataAside) {
	if m == nil {
		return
	}
	var dirs, bytes []sample
	for member, d := range reports {
		dirs = append(dirs, sample{labels: []string{member}, value: float64(d.Count)})
		bytes = append(bytes, sample{labels: []string{member}, value: float64(d.Bytes)})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tracked[m.AsideDirs].replace(etcd, dirs)
	m.tracked[m.AsideBytes].replace(etcd, bytes)
}

// forget deletes the series of an Etcd that is gone.
func (m *Metrics) forget(etcd types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.tracked {
		g.forget(etcd)
	}
}
