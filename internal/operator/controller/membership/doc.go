// Package membership holds the membership controller (DEP-01): it moves an etcd cluster's
// members towards the Etcd's spec.replicas through learners, replaces members whose data is gone
// and removes members no pod stands for, one step per reconcile, as internal/decide/membership decides.
// It keeps no state of its own: every reconcile starts from what the members and the pods say,
// so an operator restart mid-operation resumes where the cluster is.
package membership
