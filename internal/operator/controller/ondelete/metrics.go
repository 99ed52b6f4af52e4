package ondelete

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are the OnDelete controller's Prometheus series. They are registered on the registry
// passed in (the manager's in production, a fresh one in tests), never on a global default.
//
// Every counter and gauge that concerns one Etcd carries its namespace and name, so an alert or a
// dashboard panel can tell the Etcds apart and Forget can drop them; the histograms do not: a
// label per Etcd multiplies their buckets by the fleet, and they describe the manager's latency,
// not one Etcd's.
type Metrics struct {
	OutdatedPods       *prometheus.GaugeVec
	Deletions          *prometheus.CounterVec
	Waits              *prometheus.CounterVec
	RoleSource         *prometheus.CounterVec
	RoleMismatches     *prometheus.CounterVec
	MemberClientErrors *prometheus.CounterVec
	DecisionLatency    prometheus.Histogram
	// Handovers counts leadership handovers by target member and outcome (succeeded, failed,
	// timeout, unconfirmed); HandoverDuration times them.
	Handovers        *prometheus.CounterVec
	HandoverDuration *prometheus.HistogramVec
	// LeaderDeletions counts pods deleted while they still led, by the rule that says why.
	LeaderDeletions *prometheus.CounterVec
	// AppliedIndexLag is each member's raft applied-index lag behind the leader, as last seen.
	AppliedIndexLag *prometheus.GaugeVec
	// BatchSize is the number of pods one delete decision named.
	BatchSize prometheus.Histogram
	// RejoinReads counts the linearizable reads asked of replaced members not Ready yet, by
	// outcome (served, not-yet).
	RejoinReads *prometheus.CounterVec
	// RejoinWatches counts the rejoin watches (rejoin.go) by how they ended (served, expired,
	// replaced, stopped).
	RejoinWatches *prometheus.CounterVec
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "etcd_conductor"
	m := &Metrics{
		OutdatedPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "outdated_pods",
			Help: "Member pods whose controller-revision-hash differs from the StatefulSet's update revision."}, []string{"namespace", "etcd"}),
		Deletions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rollout_deletions_total",
			Help: "Pods deleted by the OnDelete controller, by Etcd and the rule that chose them."}, []string{"namespace", "etcd", "rule"}),
		Waits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rollout_waits_total",
			Help: "Reconciles that waited, by Etcd and the rule that held the rollout."}, []string{"namespace", "etcd", "rule"}),
		RoleSource: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "role_source_total",
			Help: "Role resolutions by Etcd and where the roles came from (direct, lease, none)."}, []string{"namespace", "etcd", "source"}),
		RoleMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "role_mismatches_total",
			Help: "Times the members and the member leases disagreed on the leader (the members were trusted)."}, []string{"namespace", "etcd"}),
		MemberClientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "member_client_errors_total",
			Help: "Failures to learn roles from the members, by Etcd and kind (tls, unreachable)."}, []string{"namespace", "etcd", "kind"}),
		DecisionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "decision_duration_seconds",
			Help:    "Time from the start of a reconcile to its decision, member queries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		Handovers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "handovers_total",
			Help: "Leadership handovers before a leader's pod is deleted, by target member and outcome (succeeded, failed, timeout, unconfirmed)."},
			[]string{"namespace", "etcd", "target", "outcome"}),
		HandoverDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "handover_duration_seconds",
			Help:    "Time from MoveLeader to the members confirming the new leader (or giving up), by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 13)}, []string{"outcome"}),
		LeaderDeletions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "leader_deletions_total",
			Help: "Pods deleted while still the leader (etcd's shutdown handover then applies), by Etcd and the rule that says why."}, []string{"namespace", "etcd", "rule"}),
		AppliedIndexLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "member_applied_index_lag",
			Help: "Raft entries a member has applied fewer than the leader, when the OnDelete controller last asked."}, []string{"namespace", "etcd", "member"}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "rollout_batch_size",
			Help: "Pods deleted by one OnDelete decision (above 1 only with quorum-headroom concurrency).", Buckets: prometheus.LinearBuckets(1, 1, 5)}),
		RejoinReads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rollout_rejoin_reads_total",
			Help: "Linearizable reads asked of replaced members whose readiness probe had not passed yet, by Etcd and outcome (served: counted as participating; not-yet)."}, []string{"namespace", "etcd", "outcome"}),
		RejoinWatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rollout_rejoin_watches_total",
			Help: "Watches that read through replaced members while a rollout waited on them, by Etcd and how they ended (served: the controller was woken; expired; replaced; stopped)."}, []string{"namespace", "etcd", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.OutdatedPods, m.Deletions, m.Waits, m.RoleSource, m.RoleMismatches, m.MemberClientErrors, m.DecisionLatency,
		m.Handovers, m.HandoverDuration, m.LeaderDeletions, m.AppliedIndexLag, m.BatchSize, m.RejoinReads, m.RejoinWatches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Forget deletes the series of one Etcd (labels namespace and etcd), once its StatefulSet is
// gone or no longer rolled by this controller: they would otherwise stay at their last values
// for as long as the manager runs.
func (m *Metrics) Forget(etcd types.NamespacedName) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"namespace": etcd.Namespace, "etcd": etcd.Name}
	for _, vec := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.OutdatedPods, m.RoleMismatches, m.Handovers, m.AppliedIndexLag, m.Deletions, m.Waits, m.LeaderDeletions,
		m.RoleSource, m.MemberClientErrors, m.RejoinReads, m.RejoinWatches} {
		vec.DeletePartialMatch(labels)
	}
}
