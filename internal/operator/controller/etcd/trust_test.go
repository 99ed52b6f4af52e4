package etcd

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

func TestMembersRunTrust(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "shoot"}}
	mounting := []corev1.Volume{{Name: "client-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: resources.MemberTLSSecretName(etcd)}}}}
	sts := func(checksum string, volumes []corev1.Volume, generation, observed int64, updated, ready int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		s.Spec.Replicas = ptr.To[int32](3)
		s.Spec.Template.Annotations = map[string]string{resources.AnnotationTrustChecksum: checksum}
		s.Spec.Template.Spec.Volumes = volumes
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: 3, UpdatedReplicas: updated, ReadyReplicas: ready}
		return s
	}
	for _, tc := range []struct {
		name string
		sts  *appsv1.StatefulSet
		want bool
	}{
		{"no StatefulSet", nil, false},
		{"every member on the template", sts("abc", mounting, 2, 2, 3, 3), true},
		{"a member down but created from the template: it starts trusting the bundle", sts("abc", mounting, 2, 2, 3, 2), true},
		{"a member still on the previous template", sts("abc", mounting, 2, 2, 2, 3), false},
		{"the template not seen by the StatefulSet controller yet", sts("abc", mounting, 3, 2, 3, 3), false},
		{"restarted for another bundle", sts("old", mounting, 2, 2, 3, 3), false},
		{"members of an older release: the Etcd's Secrets mounted", sts("abc", nil, 2, 2, 3, 3), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := membersRunTrust(tc.sts, etcd, "abc"); got != tc.want {
				t.Errorf("membersRunTrust = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCopiesSettled(t *testing.T) {
	r := &Reconciler{secretPropagation: time.Minute}
	at := func(d time.Duration) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			resources.AnnotationCertificatesCopiedAt: time.Now().Add(-d).UTC().Format(time.RFC3339)}}}
	}
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		want   bool
	}{
		{"no Secret", nil, false},
		{"copied just now", at(time.Second), false},
		{"copied longer ago than the kubelet takes", at(2 * time.Minute), true},
		{"no note, created just now", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()}}, false},
		{"no note, created long ago", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.copiesSettled(tc.secret); got != tc.want {
				t.Errorf("copiesSettled = %v, want %v", got, tc.want)
			}
		})
	}
}
