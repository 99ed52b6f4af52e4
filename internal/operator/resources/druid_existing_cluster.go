package resources

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// ExistingClusterNotJoined says why the members of an Etcd that asks to join an existing cluster
// (etcd-druid's spec.etcd.bootstrapWithExistingCluster) are not started, "" when it does not ask.
// The Etcd is accepted and everything but the members is created: starting them would form a new,
// empty cluster, the opposite of what the field asks for, and joining another cluster member by
// member is not built yet. The field can only be set when the Etcd is created, so this holds back
// the first members only, never a running cluster.
func ExistingClusterNotJoined(e *druidv1alpha1.Etcd) string {
	b := e.Spec.Etcd.BootstrapWithExistingCluster
	if b == nil {
		return ""
	}
	return fmt.Sprintf("spec.etcd.bootstrapWithExistingCluster asks to join the %d member(s) of an existing cluster, which is not supported yet: "+
		"no member is started, since they would form a new, empty cluster instead; remove the field to start a new cluster, "+
		"or switch through the source cluster's backup (docs/druid-compatibility.md, \"Switching from etcd-druid\")", len(b.Members))
}
