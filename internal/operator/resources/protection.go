package resources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

const (
	// AnnotationDisableProtection is etcd-druid's annotation on an Etcd that lets anyone change or
	// delete the objects managed for it; its presence counts, not its value (as in etcd-druid).
	AnnotationDisableProtection = "druid.gardener.cloud/disable-etcd-component-protection"

	// AnnotationProtection mirrors AnnotationDisableProtection onto every managed object, as
	// ProtectionDisabledValue while the Etcd carries it and absent otherwise. The chart's
	// component protection ValidatingAdmissionPolicy reads it there, since a policy on a
	// StatefulSet cannot read the owning Etcd. An annotation and not a label: labels end up in
	// selectors (the StatefulSet's is immutable) and the pod template would roll every member.
	AnnotationProtection = "etcd-conductor.io/protection"
	// ProtectionDisabledValue is AnnotationProtection's one value.
	ProtectionDisabledValue = "disabled"
)

// ProtectionDisabled tells whether e asks for its managed objects to be left unprotected.
func ProtectionDisabled(e *druidv1alpha1.Etcd) bool {
	_, ok := e.Annotations[AnnotationDisableProtection]
	return ok
}

// MarkProtection writes e's protection state onto obj, a managed object: the mark set while
// protection is disabled, removed otherwise. It returns whether obj changed, so a caller writes
// only then. Only this one annotation is touched: the others belong to their writers.
func MarkProtection(e *druidv1alpha1.Etcd, obj metav1.Object) bool {
	annotations := obj.GetAnnotations()
	current, marked := annotations[AnnotationProtection]
	if ProtectionDisabled(e) {
		if marked && current == ProtectionDisabledValue {
			return false
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationProtection] = ProtectionDisabledValue
		obj.SetAnnotations(annotations)
		return true
	}
	if !marked {
		return false
	}
	delete(annotations, AnnotationProtection)
	obj.SetAnnotations(annotations)
	return true
}
