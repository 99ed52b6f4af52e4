// Package v1alpha1 holds the druid.gardener.cloud/v1alpha1 Etcd type: the subset of etcd-druid's
// API that etcd-conductor implements, with the same field names so existing manifests apply.
// Fields etcd-druid has and we do not implement are pruned by the CRD schema, not rejected.
//
// +kubebuilder:object:generate=true
// +groupName=druid.gardener.cloud
package v1alpha1
