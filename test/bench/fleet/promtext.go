package fleet

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one reading of a Prometheus text endpoint.
type Scrape map[string]*dto.MetricFamily

// ParseScrape reads the text exposition format.
func ParseScrape(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return Scrape(families), nil
}

// labels of one sample as a map.
func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func matches(m *dto.Metric, want map[string]string) bool {
	got := labels(m)
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// Sum adds the counter or gauge samples of name whose labels include want; found says whether
// the family exists at all (a binary that lacks a metric reads as "not measured", not as 0).
func (s Scrape) Sum(name string, want map[string]string) (total float64, found bool) {
	f, ok := s[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if matches(m, want) {
			total += sampleValue(m)
		}
	}
	return total, true
}

// LabelValues lists the distinct values of label among name's samples.
func (s Scrape) LabelValues(name, label string) []string {
	seen := map[string]bool{}
	for _, m := range s[name].GetMetric() {
		if v, ok := labels(m)[label]; ok {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// RequestKey is a verb and resource (with subresource) of apiserver_request_total.
type RequestKey struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
}

func (k RequestKey) String() string { return k.Verb + " " + k.Resource }

// IsWrite is a verb that changes state.
func (k RequestKey) IsWrite() bool {
	switch k.Verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// APIRequests totals apiserver_request_total by verb and resource[/subresource]; non-resource
// requests (/metrics, /readyz) are left out.
func (s Scrape) APIRequests() map[RequestKey]float64 {
	out := map[RequestKey]float64{}
	for _, m := range s["apiserver_request_total"].GetMetric() {
		l := labels(m)
		if l["resource"] == "" {
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		out[RequestKey{Verb: l["verb"], Resource: res}] += sampleValue(m)
	}
	return out
}

// RequestDelta is after minus before, keeping only keys that grew.
func RequestDelta(before, after map[RequestKey]float64) map[RequestKey]float64 {
	out := map[RequestKey]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Histogram is a cumulative bucket histogram summed over the samples that matched.
type Histogram struct {
	Bounds []float64 // upper bounds, ascending, +Inf last
	Counts []float64 // cumulative counts
	Count  float64
	Sum    float64
}

// Histogram sums name's histogram samples whose labels include want.
func (s Scrape) Histogram(name string, want map[string]string) (Histogram, bool) {
	f, ok := s[name]
	if !ok {
		return Histogram{}, false
	}
	byBound := map[float64]float64{}
	var h Histogram
	for _, m := range f.GetMetric() {
		if !matches(m, want) || m.Histogram == nil {
			continue
		}
		hist := m.GetHistogram()
		h.Count += float64(hist.GetSampleCount())
		h.Sum += hist.GetSampleSum()
		for _, b := range hist.GetBucket() {
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	byBound[math.Inf(1)] = h.Count
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h, true
}

// Quantile estimates q as Prometheus's histogram_quantile does: linear within the bucket that
// holds the rank, the lower bound of the first bucket taken as 0, and the highest finite bound
// when the rank falls into +Inf. NaN when the histogram is empty.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	i := sort.Search(len(h.Counts), func(i int) bool { return h.Counts[i] >= rank })
	if i >= len(h.Bounds) {
		i = len(h.Bounds) - 1
	}
	if math.IsInf(h.Bounds[i], 1) {
		if i == 0 {
			return math.NaN()
		}
		return h.Bounds[i-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.Bounds[i-1], h.Counts[i-1]
	}
	inBucket := h.Counts[i] - below
	if inBucket == 0 {
		return h.Bounds[i]
	}
	return lower + (h.Bounds[i]-lower)*(rank-below)/inBucket
}

// Minus is the histogram of the observations made between other and h (same bounds assumed;
// a bound missing from other counts as 0).
func (h Histogram) Minus(other Histogram) Histogram {
	prev := map[float64]float64{}
	for i, b := range other.Bounds {
		prev[b] = other.Counts[i]
	}
	out := Histogram{Bounds: append([]float64(nil), h.Bounds...), Count: h.Count - other.Count, Sum: h.Sum - other.Sum}
	for i, b := range h.Bounds {
		out.Counts = append(out.Counts, h.Counts[i]-prev[b])
	}
	return out
}

// sortedKeys orders request keys by verb then resource.
func sortedKeys(m map[RequestKey]float64) []RequestKey {
	keys := make([]RequestKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Resource != keys[j].Resource {
			return keys[i].Resource < keys[j].Resource
		}
		return keys[i].Verb < keys[j].Verb
	})
	return keys
}

// ShareAtMost is the share of observations at most bound, exact when bound is one of the
// histogram's bounds; otherwise that of the highest bound below it. NaN when empty.
func (h Histogram) ShareAtMost(bound float64) float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	below := 0.0
	for i, b := range h.Bounds {
		if b > bound {
			break
		}
		below = h.Counts[i]
	}
	return below / h.Count
}
