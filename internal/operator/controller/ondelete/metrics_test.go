package ondelete

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// TestForgetDeletesTheEtcdsSeries: an Etcd whose StatefulSet is gone loses every series labelled
// with it; another Etcd's stay.
func TestForgetDeletesTheEtcdsSeries(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gone := types.NamespacedName{Namespace: "ns", Name: "gone"}
	kept := types.NamespacedName{Namespace: "ns", Name: "kept"}
	for _, e := range []types.NamespacedName{gone, kept} {
		m.OutdatedPods.WithLabelValues(e.Namespace, e.Name).Set(1)
		m.RoleMismatches.WithLabelValues(e.Namespace, e.Name).Inc()
		m.Handovers.WithLabelValues(e.Namespace, e.Name, e.Name+"-1", HandoverSucceeded).Inc()
		m.AppliedIndexLag.WithLabelValues(e.Namespace, e.Name, e.Name+"-0").Set(3)
		m.Deletions.WithLabelValues(e.Namespace, e.Name, "participating/follower").Inc()
		m.Waits.WithLabelValues(e.Namespace, e.Name, "wait/catch-up").Inc()
		m.LeaderDeletions.WithLabelValues(e.Namespace, e.Name, "leader/handover-failed").Inc()
		m.RoleSource.WithLabelValues(e.Namespace, e.Name, "direct").Inc()
		m.MemberClientErrors.WithLabelValues(e.Namespace, e.Name, "unreachable").Inc()
		m.RejoinReads.WithLabelValues(e.Namespace, e.Name, "served").Inc()
		m.RejoinWatches.WithLabelValues(e.Namespace, e.Name, RejoinWatchServed).Inc()
	}
	m.Forget(gone)
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"outdated_pods", m.OutdatedPods},
		{"role_mismatches_total", m.RoleMismatches},
		{"handovers_total", m.Handovers},
		{"member_applied_index_lag", m.AppliedIndexLag},
		{"rollout_deletions_total", m.Deletions},
		{"rollout_waits_total", m.Waits},
		{"leader_deletions_total", m.LeaderDeletions},
		{"role_source_total", m.RoleSource},
		{"member_client_errors_total", m.MemberClientErrors},
		{"rollout_rejoin_reads_total", m.RejoinReads},
		{"rollout_rejoin_watches_total", m.RejoinWatches},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testutil.CollectAndCount(tc.c); n != 1 {
				t.Errorf("%d series left, want only the kept Etcd's", n)
			}
		})
	}
	var none *Metrics
	none.Forget(gone) // does nothing, and does not panic
}
