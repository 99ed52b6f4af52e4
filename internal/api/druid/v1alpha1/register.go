package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the Etcd resource.
	GroupVersion = schema.GroupVersion{Group: "druid.gardener.cloud", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Etcd{}, &EtcdList{}, &EtcdOpsTask{}, &EtcdOpsTaskList{}, &EtcdCopyBackupsTask{}, &EtcdCopyBackupsTaskList{})
}
