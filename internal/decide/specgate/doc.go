// Package specgate decides whether the Etcd reconciler applies an Etcd's spec now, by etcd-druid's
// annotations and its enableEtcdSpecAutoReconcile switch: etcd-druid users' runbooks suspend an
// Etcd's reconciliation (druid.gardener.cloud/suspend-etcd-spec-reconcile), or leave auto-reconcile
// off and order each change applied (druid.gardener.cloud/operation: reconcile, which the
// reconciler removes once it has). Decide is pure: a function of the Etcd and the switch, one named
// rule per answer.
package specgate
