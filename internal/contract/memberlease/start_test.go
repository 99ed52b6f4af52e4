package memberlease

import "testing"

func TestStartReportAnnotation(t *testing.T) {
	// Running clusters hold reports in exactly this spelling; the operator must keep reading them.
	r := StartReport{PodUID: "uid-1", Rule: "wait/cluster-unreachable", Data: DataEmpty}
	const want = `{"podUID":"uid-1","rule":"wait/cluster-unreachable","data":"Empty"}`
	if got := r.Annotation(); got != want {
		t.Fatalf("Annotation() = %s, want %s", got, want)
	}
	back, ok := ParseStartReport(map[string]string{AnnotationStartReport: want})
	if !ok || back != r {
		t.Fatalf("ParseStartReport = %+v, %v; want %+v", back, ok, r)
	}
}

func TestParseStartReportRefuses(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
	}{
		{name: "no annotations"},
		{name: "empty value", annotations: map[string]string{AnnotationStartReport: ""}},
		{name: "not JSON", annotations: map[string]string{AnnotationStartReport: "Empty"}},
		{name: "no pod UID", annotations: map[string]string{AnnotationStartReport: `{"rule":"restart/valid-data","data":"Valid"}`}},
		// The member report policy admits a member's report by its opening "podUID"; a reader
		// that took the last of two keys, or a key spelled otherwise, would read another pod's.
		{name: "a second pod UID", annotations: map[string]string{AnnotationStartReport: `{"podUID":"own","rule":"r","data":"Empty","podUID":"victim"}`}},
		{name: "the pod UID spelled otherwise", annotations: map[string]string{AnnotationStartReport: `{"podUID":"own","rule":"r","data":"Empty","PODUID":"victim"}`}},
		{name: "the pod UID not first", annotations: map[string]string{AnnotationStartReport: `{"rule":"r","podUID":"victim","data":"Empty"}`}},
		{name: "spaces", annotations: map[string]string{AnnotationStartReport: `{"podUID": "victim","rule":"r","data":"Empty"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, ok := ParseStartReport(tt.annotations); ok {
				t.Fatalf("ParseStartReport read %+v", r)
			}
		})
	}
}

func TestStartDecisionFormats(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "decision", got: FormatStartDecision("wait/data-lost", "the data dir is empty"), want: "wait/data-lost: the data dir is empty"},
		{name: "lost member", got: FormatDataLostMemberID(0x8e9e05c52164694d), want: "8e9e05c52164694d"},
		{name: "lost member, no padding", got: FormatDataLostMemberID(0xc), want: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
