package resources

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDowngradeRecord: the record the version planner decides is written on the StatefulSet and,
// once it no longer holds, removed, while annotations others put there stay.
func TestDowngradeRecord(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		existing             map[string]string
		source, failedTarget string
	}{
		{name: "source written", source: "etcd:v3.7.3"},
		{name: "source replaced by the failed target", existing: map[string]string{AnnotationDowngradeSource: "etcd:v3.7.3"}, failedTarget: "etcd:v3.6.99"},
		{name: "record removed", existing: map[string]string{AnnotationDowngradeFailedTarget: "etcd:v3.6.99", AnnotationDowngradeSource: "etcd:v3.7.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired, err := StatefulSet(testEtcd(3), Settings{DowngradeSource: tc.source, DowngradeFailedTarget: tc.failedTarget})
			if err != nil {
				t.Fatal(err)
			}
			existing := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"team": "storage"}}}
			for k, v := range tc.existing {
				existing.Annotations[k] = v
			}
			ApplyMutableStatefulSetSpec(existing, desired)
			source, failed := DowngradeRecord(existing)
			if source != tc.source || failed != tc.failedTarget {
				t.Errorf("record source %q failed target %q, want %q %q", source, failed, tc.source, tc.failedTarget)
			}
			if existing.Annotations["team"] != "storage" {
				t.Errorf("another's annotation lost: %v", existing.Annotations)
			}
		})
	}
}
