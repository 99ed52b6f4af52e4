// Package priority orders the controllers' work queues so that clusters with something to do go
// first. Every controller runs on controller-runtime's priority queue (the default of the
// controller-runtime version go.mod pins; internal/operator sets it explicitly): events from an informer's initial list, as after a
// manager restart, and resyncs that change nothing come in at handler.LowPriority, real changes
// at 0. A reconcile's requeue keeps the priority it was dequeued with unless the result names
// one, so each controller says, with For, whether the cluster it just looked at has work in
// flight (a rollout, a scale step, a member not ready): its next look is then ahead of the
// periodic checks of settled clusters, whatever the length of the queue.
package priority

import "sigs.k8s.io/controller-runtime/pkg/handler"

const (
	// Busy is the priority of a cluster with work in flight: above events (0).
	Busy = 10
	// Settled is the priority of a periodic check of a settled cluster.
	Settled = handler.LowPriority
)

// For returns the requeue priority of a cluster with (busy) or without work in flight.
func For(busy bool) *int {
	p := Settled
	if busy {
		p = Busy
	}
	return &p
}
