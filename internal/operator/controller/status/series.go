package status

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// sample is one series of a gauge vector: the label values after namespace and etcd, and its value.
type sample struct {
	labels []string
	value  float64
}

// trackedGauge is a gauge vector labelled namespace, etcd, and more, whose series are set one
// Etcd at a time: each set replaces all of that Etcd's series, deleting those it set last time
// and not now (a member scaled away, a condition gone), so none outlives what it describes.
// The caller serialises calls.
type trackedGauge struct {
	vec *prometheus.GaugeVec
	// set holds, per Etcd, the label values (joined) of the series set last time.
	set map[types.NamespacedName]map[string][]string
}

func newTrackedGauge(vec *prometheus.GaugeVec) *trackedGauge {
	return &trackedGauge{vec: vec, set: map[types.NamespacedName]map[string][]string{}}
}

// replace makes samples etcd's only series.
func (g *trackedGauge) replace(etcd types.NamespacedName, samples []sample) {
	now := make(map[string][]string, len(samples))
	for _, s := range samples {
		values := append([]string{etcd.Namespace, etcd.Name}, s.labels...)
		g.vec.WithLabelValues(values...).Set(s.value)
		now[strings.Join(values, "\x00")] = values
	}
	for key, values := range g.set[etcd] {
		if _, ok := now[key]; !ok {
			g.vec.DeleteLabelValues(values...)
		}
	}
	if len(now) == 0 {
		delete(g.set, etcd)
		return
	}
	g.set[etcd] = now
}

// forget deletes every series of etcd.
func (g *trackedGauge) forget(etcd types.NamespacedName) {
	g.vec.DeletePartialMatch(prometheus.Labels{"namespace": etcd.Namespace, "etcd": etcd.Name})
	delete(g.set, etcd)
}

// one is a single sample without further labels.
func one(value float64) []sample { return []sample{{value: value}} }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
