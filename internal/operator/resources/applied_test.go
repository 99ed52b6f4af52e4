package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// desiredAfter is what the Etcd reconciler does to an existing object: write the desired fields
// over a copy and record the desired hash.
func desiredAfter(t *testing.T, existing, desired *corev1.Service) *corev1.Service {
	t.Helper()
	hash, err := DesiredHash(desired)
	if err != nil {
		t.Fatal(err)
	}
	after := existing.DeepCopy()
	after.Labels = desired.Labels
	after.Spec.Selector = desired.Spec.Selector
	after.Spec.Ports = desired.Spec.Ports
	after.Spec.Type = desired.Spec.Type
	SetAppliedHash(after, hash)
	return after
}

func TestUpToDate(t *testing.T) {
	desired := &corev1.Service{}
	desired.Labels = map[string]string{"app": "etcd", "team": "a"}
	desired.Spec.Selector = map[string]string{"app": "etcd"}
	desired.Spec.Ports = []corev1.ServicePort{{Name: "client", Port: 2379, Protocol: corev1.ProtocolTCP}}
	desired.Spec.Type = corev1.ServiceTypeClusterIP
	hash, err := DesiredHash(desired)
	if err != nil {
		t.Fatal(err)
	}
	// What the apiserver stores after a write of desired: defaults filled in.
	stored := desired.DeepCopy()
	SetAppliedHash(stored, hash)
	stored.Spec.ClusterIP = "10.0.0.12"
	stored.Spec.SessionAffinity = corev1.ServiceAffinityNone
	stored.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	stored.ResourceVersion = "42"

	for _, tc := range []struct {
		name     string
		existing func() *corev1.Service
		desired  func() *corev1.Service
		want     bool
	}{
		{"as written, with server defaults", stored.DeepCopy, desired.DeepCopy, true},
		{"never written by this operator (no hash)", func() *corev1.Service {
			s := stored.DeepCopy()
			delete(s.Annotations, AnnotationAppliedHash)
			return s
		}, desired.DeepCopy, false},
		{"a label removed from the desired state", stored.DeepCopy, func() *corev1.Service {
			d := desired.DeepCopy()
			delete(d.Labels, "team")
			return d
		}, false},
		{"a port changed in the desired state", stored.DeepCopy, func() *corev1.Service {
			d := desired.DeepCopy()
			d.Spec.Ports[0].Port = 2380
			return d
		}, false},
		{"the selector edited by someone else", func() *corev1.Service {
			s := stored.DeepCopy()
			s.Spec.Selector = map[string]string{"app": "other"}
			return s
		}, desired.DeepCopy, false},
		{"a port removed by someone else", func() *corev1.Service {
			s := stored.DeepCopy()
			s.Spec.Ports = nil
			return s
		}, desired.DeepCopy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := tc.existing()
			after := desiredAfter(t, existing, tc.desired())
			if got := UpToDate(existing, after); got != tc.want {
				t.Errorf("UpToDate() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestDesiredHashIsStable(t *testing.T) {
	a := &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2", "c": "3"}}
	b := &corev1.ConfigMap{Data: map[string]string{"c": "3", "b": "2", "a": "1"}}
	ha, err := DesiredHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := DesiredHash(b)
	if ha != hb {
		t.Errorf("same content, different hashes: %s, %s", ha, hb)
	}
	b.Data["a"] = "changed"
	if hc, _ := DesiredHash(b); hc == ha {
		t.Error("changed content, same hash")
	}
}
