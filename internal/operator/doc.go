// Package operator assembles the manager: the scheme (NewScheme, every type the operator reads or
// writes, which test/localcluster's client and the plan command use too), the controllers and what
// they share: one member client pool (etcdclient), one way to the members (memberaccess.Access),
// the metrics endpoint (internal/operator/metricsserving), the informer cache's options and the
// controller-runtime priority queue (internal/operator/priority). RolloutPolicy turns the OnDelete
// controller's configuration into the rollout planner's policy.
//
// The manager command and the integration tests build the operator the same way, through New. Each
// controller lives in its own package under internal/operator/controller and none imports another;
// what they share lives beside them in internal/operator.
package operator
