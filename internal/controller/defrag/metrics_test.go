package defrag

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// TestForgetDeletesTheEtcdsSeries: a deleted Etcd's database sizes go; another Etcd's stay.
func TestForgetDeletesTheEtcdsSeries(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		forget types.NamespacedName
		want   int
	}{
		{name: "another Etcd", forget: types.NamespacedName{Namespace: "ns", Name: "other"}, want: 4},
		{name: "the Etcd", forget: types.NamespacedName{Namespace: "ns", Name: "gone"}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, etcd := range []string{"gone", "kept"} {
				for _, phase := range []string{"before", "after"} {
					m.DBSize.WithLabelValues("ns", etcd, etcd+"-0", phase).Set(1)
				}
			}
			m.Forget(tc.forget)
			if n := testutil.CollectAndCount(m.DBSize); n != tc.want {
				t.Errorf("%d series left, want %d", n, tc.want)
			}
		})
	}
	var none *Metrics
	none.Forget(types.NamespacedName{Namespace: "ns", Name: "gone"}) // does nothing, and does not panic
}
