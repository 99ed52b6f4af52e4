package figures

import "testing"

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		want   Stat
	}{
		{"none", nil, Stat{}},
		{"one", []float64{4}, Stat{N: 1, Median: 4, Min: 4, Max: 4}},
		{"odd count, unsorted", []float64{9, 1, 5}, Stat{N: 3, Median: 5, Min: 1, Max: 9}},
		{"even count takes the mean of the middle two", []float64{1, 10, 2, 4}, Stat{N: 4, Median: 3, Min: 1, Max: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.values); got != tc.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tc.values, got, tc.want)
			}
		})
	}
}
