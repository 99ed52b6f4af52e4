package integration

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counted sums the series of vec whose label is value, whatever their other labels (the Etcd's
// namespace and name): what a test counts is the decisions of one rule or result.
func counted(t *testing.T, vec *prometheus.CounterVec, label, value string) float64 {
	t.Helper()
	metrics := make(chan prometheus.Metric)
	go func() { vec.Collect(metrics); close(metrics) }()
	total := 0.0
	for m := range metrics {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatalf("reading a counter: %v", err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				total += d.GetCounter().GetValue()
			}
		}
	}
	return total
}
