// Package v1alpha1 holds the druid.gardener.cloud/v1alpha1 Etcd type (etcd_types.go, its
// conditions' helpers in conditions.go), EtcdOpsTask (etcdopstask_types.go) and EtcdCopyBackupsTask
// (etcdcopybackupstask_types.go): etcd-druid's whole Etcd spec and status, with the same field
// names and types, so that etcd-druid manifests apply under strict field validation. The parts of
// etcd-druid's API accepted for that alone are declared in druid_fields.go, and the fields
// etcd-druid added in v0.35 to v0.38 in druid_fields_newer.go. Fields the operator does not act on
// are accepted and reported (internal/decide/compat), never silently pruned.
//
// +kubebuilder:object:generate=true
// +groupName=druid.gardener.cloud
package v1alpha1
