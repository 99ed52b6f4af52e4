package resources

import appsv1 "k8s.io/api/apps/v1"

// The downgrade record on the member StatefulSet (internal/decide/versionchange): written only by the
// Etcd reconciler, on the object it owns, so neither a member pod nor the Etcd's editors can make
// it render an image the spec does not name or skip a downgrade's checks.
const (
	// AnnotationDowngradeSource is the etcd image the members ran before a downgrade's target
	// was rendered: what a member failing on the target is rolled forward to.
	AnnotationDowngradeSource = "etcd-conductor.io/downgrade-source"
	// AnnotationDowngradeFailedTarget is the etcd image a downgrade was rolled back from because
	// a member failed to start on it: refused while spec.etcd.image names it.
	AnnotationDowngradeFailedTarget = "etcd-conductor.io/downgrade-failed-target"
)

// downgradeRecord are the annotations whose absence from the desired StatefulSet removes them
// (ApplyMutableStatefulSetSpec): a record that no longer holds must not linger.
var downgradeRecord = []string{AnnotationDowngradeSource, AnnotationDowngradeFailedTarget}

// DowngradeRecord is what sts records about a downgrade: its source and failed target.
func DowngradeRecord(sts *appsv1.StatefulSet) (source, failedTarget string) {
	return sts.Annotations[AnnotationDowngradeSource], sts.Annotations[AnnotationDowngradeFailedTarget]
}

// recordDowngrade writes s's downgrade record on sts.
func (s Settings) recordDowngrade(sts *appsv1.StatefulSet) {
	for key, value := range map[string]string{AnnotationDowngradeSource: s.DowngradeSource, AnnotationDowngradeFailedTarget: s.DowngradeFailedTarget} {
		if value == "" {
			continue
		}
		if sts.Annotations == nil {
			sts.Annotations = map[string]string{}
		}
		sts.Annotations[key] = value
	}
}
