// Package resources builds the desired state of every object an Etcd owns: pure functions from the
// Etcd (and the operator's settings) to API objects. The Etcd reconciler applies them; tests and the
// plan command read the same names.
package resources
