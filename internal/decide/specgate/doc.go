// Package specgate decides whether the Etcd reconciler applies an Etcd's spec now, with etcd-druid's
// annotations and its enableEtcdSpecAutoReconcile switch: etcd-druid users' runbooks suspend an
// Etcd's reconciliation, or leave auto-reconcile off and order each change applied. Pure: a
// function of the Etcd and the switch, one named rule per answer.
package specgate
