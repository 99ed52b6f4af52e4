package memberlease

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParseSnapshotLease(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	failedAt := at.Add(-time.Minute)
	tests := []struct {
		name        string
		holder      *string
		renew       *metav1.MicroTime
		annotations map[string]string
		want        SnapshotLeaseRecord
	}{
		{name: "never written"},
		{name: "snapshot recorded", holder: ptr.To(FormatSnapshotRevision(42)), renew: ptr.To(metav1.NewMicroTime(at)),
			annotations: map[string]string{AnnotationSnapshotKey: "v2/Full-00000000-00000042-1", AnnotationSnapshotSize: "2048"},
			want:        SnapshotLeaseRecord{Revision: 42, HasRevision: true, Time: at, Key: "v2/Full-00000000-00000042-1", Size: 2048}},
		{name: "failure and request", annotations: map[string]string{
			AnnotationBackupError: "dial tcp: refused", AnnotationBackupErrorReason: ReasonStoreUnreachable,
			AnnotationBackupErrorTime: FormatBackupErrorTime(failedAt), AnnotationFullSnapshotRequest: "r2", AnnotationFullSnapshotHandled: "r1"},
			want: SnapshotLeaseRecord{Error: "dial tcp: refused", ErrorReason: ReasonStoreUnreachable, ErrorTime: failedAt, Requested: "r2", Handled: "r1"}},
		{name: "delta request", annotations: map[string]string{AnnotationDeltaSnapshotRequest: "d2", AnnotationDeltaSnapshotHandled: "d1"},
			want: SnapshotLeaseRecord{DeltaRequested: "d2", DeltaHandled: "d1"}},
		{name: "edited by hand", holder: ptr.To(" 7 "), annotations: map[string]string{AnnotationSnapshotSize: "big", AnnotationBackupErrorTime: "yesterday"},
			want: SnapshotLeaseRecord{Revision: 7, HasRevision: true}},
		{name: "holder not a revision", holder: ptr.To("abc")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseSnapshotLease(tt.holder, tt.renew, tt.annotations)
			if !got.Time.Equal(tt.want.Time) || !got.ErrorTime.Equal(tt.want.ErrorTime) {
				t.Fatalf("times = %v, %v; want %v, %v", got.Time, got.ErrorTime, tt.want.Time, tt.want.ErrorTime)
			}
			got.Time, got.ErrorTime, tt.want.Time, tt.want.ErrorTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			if got != tt.want {
				t.Fatalf("ParseSnapshotLease = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPending(t *testing.T) {
	for _, tt := range []struct {
		requested, handled string
		want               bool
	}{{"", "", false}, {"", "a", false}, {"a", "", true}, {"a", "a", false}, {"b", "a", true}} {
		if got := Pending(tt.requested, tt.handled); got != tt.want {
			t.Errorf("Pending(%q, %q) = %t, want %t", tt.requested, tt.handled, got, tt.want)
		}
	}
}
