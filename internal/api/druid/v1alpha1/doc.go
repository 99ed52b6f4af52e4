// Package v1alpha1 holds the druid.gardener.cloud/v1alpha1 Etcd type (and EtcdOpsTask,
// etcdopstask_types.go, and EtcdCopyBackupsTask, etcdcopybackupstask_types.go): etcd-druid's whole Etcd
// spec and status, with the same field names and types, so that etcd-druid manifests apply under
// strict field validation. Fields the operator does not act on are accepted and reported
// (internal/decide/compat), never silently pruned.
//
// +kubebuilder:object:generate=true
// +groupName=druid.gardener.cloud
package v1alpha1
