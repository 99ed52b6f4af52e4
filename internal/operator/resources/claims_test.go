package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaimOf(t *testing.T) {
	e := testEtcd(3) // etcd-main
	for _, tc := range []struct {
		claim, template, pod string
		ok                   bool
	}{
		{"data-etcd-main-0", "data", "etcd-main-0", true},
		{"data-1a2b3c4d-etcd-main-2", "data-1a2b3c4d", "etcd-main-2", true},
		// A template that holds the Etcd's name is split at the pod, found from the end.
		{"data-etcd-main-x-etcd-main-1", "data-etcd-main-x", "etcd-main-1", true},
		{"data-etcd-main-01", "", "", false},
		{"data-other-0", "", "", false},
		{"etcd-main-0", "", "", false},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			template, pod, ok := ClaimOf(e, tc.claim)
			if template != tc.template || pod != tc.pod || ok != tc.ok {
				t.Fatalf("ClaimOf(%q) = %q %q %v, want %q %q %v", tc.claim, template, pod, ok, tc.template, tc.pod, tc.ok)
			}
		})
	}
}

func TestMountedClaims(t *testing.T) {
	pod := func(name, volume, claim string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: volume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
		}}}
	}
	got := MountedClaims([]corev1.Pod{
		pod("etcd-main-0", "data", "data-etcd-main-0"),
		pod("etcd-main-1", "data-1a2b3c4d", "data-1a2b3c4d-etcd-main-1"),
		pod("etcd-main-2", "data", "someone-elses"),
	})
	want := map[string]string{"etcd-main-0": "data", "etcd-main-1": "data-1a2b3c4d"}
	if len(got) != len(want) || got["etcd-main-0"] != want["etcd-main-0"] || got["etcd-main-1"] != want["etcd-main-1"] {
		t.Fatalf("MountedClaims = %v, want %v", got, want)
	}
}
