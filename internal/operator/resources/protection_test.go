package resources

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// The Etcd's etcd-druid annotation is mirrored onto a managed object as the one mark the
// chart's admission policy reads, and only that annotation of the object is touched.
func TestMarkProtection(t *testing.T) {
	const other = "kubectl.kubernetes.io/last-applied-configuration"
	for _, tt := range []struct {
		name        string
		etcd        map[string]string
		object      map[string]string
		wantChanged bool
		want        map[string]string
	}{
		{name: "protected, unmarked: nothing to do", object: map[string]string{other: "x"},
			want: map[string]string{other: "x"}},
		{name: "protected, no annotations at all", want: nil},
		{name: "disabled: marked", etcd: map[string]string{AnnotationDisableProtection: "true"},
			object: map[string]string{other: "x"}, wantChanged: true,
			want: map[string]string{other: "x", AnnotationProtection: ProtectionDisabledValue}},
		{name: "disabled with any value, even empty, as in etcd-druid", etcd: map[string]string{AnnotationDisableProtection: ""},
			wantChanged: true, want: map[string]string{AnnotationProtection: ProtectionDisabledValue}},
		{name: "disabled, already marked", etcd: map[string]string{AnnotationDisableProtection: "true"},
			object: map[string]string{AnnotationProtection: ProtectionDisabledValue},
			want:   map[string]string{AnnotationProtection: ProtectionDisabledValue}},
		{name: "disabled, a wrong mark corrected", etcd: map[string]string{AnnotationDisableProtection: "true"},
			object: map[string]string{AnnotationProtection: "off"}, wantChanged: true,
			want: map[string]string{AnnotationProtection: ProtectionDisabledValue}},
		{name: "protected again: the mark removed", object: map[string]string{other: "x", AnnotationProtection: ProtectionDisabledValue},
			wantChanged: true, want: map[string]string{other: "x"}},
		{name: "protected: a mark someone else set removed too", object: map[string]string{AnnotationProtection: "whatever"},
			wantChanged: true, want: map[string]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			e.Annotations = tt.etcd
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(tt.object)}}
			if got := MarkProtection(e, obj); got != tt.wantChanged {
				t.Errorf("changed = %v, want %v", got, tt.wantChanged)
			}
			if !equality.Semantic.DeepEqual(obj.Annotations, tt.want) {
				t.Errorf("annotations = %v, want %v", obj.Annotations, tt.want)
			}
		})
	}
}

// Disabling protection changes no rendered object: the mark is written onto existing objects
// alone, so the pod template (a roll of every member), labels and selectors never see it.
func TestProtectionChangesNoRenderedObject(t *testing.T) {
	protected := testEtcd(3)
	disabled := testEtcd(3)
	disabled.Annotations = map[string]string{AnnotationDisableProtection: "true"}
	for _, tt := range []struct {
		name   string
		render func(e *druidv1alpha1.Etcd) (any, error)
	}{
		{"StatefulSet", func(e *druidv1alpha1.Etcd) (any, error) { return StatefulSet(e, Settings{MemberAgentImage: "agent:1"}) }},
		{"ConfigMap", func(e *druidv1alpha1.Etcd) (any, error) { return ConfigMap(e, TransportOf(e)), nil }},
		{"peer Service", func(e *druidv1alpha1.Etcd) (any, error) { return PeerService(e), nil }},
		{"client Service", func(e *druidv1alpha1.Etcd) (any, error) { return ClientService(e), nil }},
		{"PodDisruptionBudget", func(e *druidv1alpha1.Etcd) (any, error) { return PodDisruptionBudget(e, true), nil }},
		{"member Lease", func(e *druidv1alpha1.Etcd) (any, error) { return MemberLease(e, PodName(e, 0)), nil }},
		{"member-agent Role", func(e *druidv1alpha1.Etcd) (any, error) { return MemberAgentRole(e), nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.render(protected)
			if err != nil {
				t.Fatal(err)
			}
			b, err := tt.render(disabled)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("rendered differently with protection disabled:\n%+v\n%+v", a, b)
			}
		})
	}
}
