package defrag

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// TestForgetDeletesTheEtcdsSeries: a deleted Etcd's series go (database sizes, counts by result
// and rule, bytes reclaimed); another Etcd's stay.
func TestForgetDeletesTheEtcdsSeries(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, etcd := range []string{"gone", "kept"} {
		for _, phase := range []string{"before", "after"} {
			m.DBSize.WithLabelValues("ns", etcd, etcd+"-0", phase).Set(1)
		}
		m.Defragmentations.WithLabelValues("ns", etcd, "succeeded").Inc()
		m.Reclaimed.WithLabelValues("ns", etcd).Add(10)
		m.Runs.WithLabelValues("ns", etcd, "completed").Inc()
		m.Decisions.WithLabelValues("ns", etcd, "defrag/done").Inc()
	}
	m.Forget(types.NamespacedName{Namespace: "ns", Name: "other"})
	m.Forget(types.NamespacedName{Namespace: "ns", Name: "gone"})
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"defragmentation_db_size_bytes", m.DBSize, 2},
		{"defragmentations_total", m.Defragmentations, 1},
		{"defragmentation_reclaimed_bytes_total", m.Reclaimed, 1},
		{"defragmentation_runs_total", m.Runs, 1},
		{"defragmentation_decisions_total", m.Decisions, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testutil.CollectAndCount(tc.c); n != tc.want {
				t.Errorf("%d series left, want the kept Etcd's %d", n, tc.want)
			}
		})
	}
	var none *Metrics
	none.Forget(types.NamespacedName{Namespace: "ns", Name: "gone"}) // does nothing, and does not panic
}
