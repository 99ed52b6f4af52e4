package resources

import (
	"fmt"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// This file refuses the etcd-druid settings the operator cannot honour and cannot safely ignore:
// going ahead without them would run something other than what the Etcd asks for (pods that
// never start). Fields that are harmless to ignore are listed by internal/decide/compat instead.

const (
	// ErrUnsupportedField: the Etcd sets an etcd-druid field whose meaning the operator does not
	// implement, and ignoring it would run a different cluster.
	ErrUnsupportedField = "ERR_UNSUPPORTED_FIELD"
	// ErrEtcdWrapperImage: spec.etcd.image is etcd-druid's etcd-wrapper, which members cannot run.
	ErrEtcdWrapperImage = "ERR_ETCD_WRAPPER_IMAGE"
)

// etcdWrapperRepository is in the repository name of every etcd-wrapper image etcd-druid ships
// (europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper) and of mirrors that keep
// the name.
const etcdWrapperRepository = "etcd-wrapper"

// validateDruidRefused lists the refused etcd-druid settings an Etcd sets.
func validateDruidRefused(e *druidv1alpha1.Etcd) []Problem {
	var problems []Problem
	if img := e.Spec.Etcd.Image; img != nil && IsEtcdWrapperImage(*img) {
		problems = append(problems, Problem{ErrEtcdWrapperImage, fmt.Sprintf(
			"spec.etcd.image %q is etcd-druid's etcd-wrapper, which has no /usr/local/bin/etcd: members here run etcd itself, "+
				"so their pods could never start; use a plain etcd image such as %s (the default when spec.etcd.image is unset)",
			*img, DefaultEtcdImage)})
	}
	return problems
}

// IsEtcdWrapperImage tells whether an image reference names an etcd-wrapper repository. Only the
// repository counts (registry and path, without tag or digest): a tag that happens to mention the
// wrapper does not make an etcd image one.
func IsEtcdWrapperImage(ref string) bool {
	return strings.Contains(imageRepository(ref), etcdWrapperRepository)
}

// imageRepository strips the digest and the tag from an image reference. A colon before the last
// slash belongs to a registry's port (registry:5000/etcd), not to a tag.
func imageRepository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
