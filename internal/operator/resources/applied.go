package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationAppliedHash records, on every object the Etcd reconciler writes, a hash of the
// desired state it last wrote there. Together with UpToDate it lets a reconcile that has nothing
// to change send nothing.
const AnnotationAppliedHash = "etcd-conductor.io/applied-hash"

// DesiredHash is a stable hash of a desired object (or of the part of it the reconciler writes).
func DesiredHash(desired any) (string, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return "", fmt.Errorf("hashing desired state: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16], nil
}

// SetAppliedHash records hash on obj.
func SetAppliedHash(obj metav1.Object, hash string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationAppliedHash] = hash
	obj.SetAnnotations(annotations)
}

// UpToDate tells whether an existing object (before) already holds everything a desired
// version of it (after: before with the desired fields written over it and the applied hash
// set) says, so that writing after would change nothing that matters.
//
// The apiserver fills in defaults (a container's terminationMessagePath, a Service's
// sessionAffinity, a probe's defaults, …) that the desired objects leave empty, so a plain
// equality would see a change on every pass and rewrite every object. Fields after leaves unset
// are therefore not compared (equality.Semantic.DeepDerivative). What that alone cannot see, a
// field removed from the desired state (a label, resources, a toleration), changes the applied
// hash, which after carries and before does not; a field someone else changed on the object
// (say, the pod template edited by hand) differs and is written back.
func UpToDate(before, after any) bool {
	return equality.Semantic.DeepDerivative(after, before)
}
