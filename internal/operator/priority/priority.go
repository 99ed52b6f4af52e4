package priority

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

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

// EnqueueInFlight returns an event handler that, on an object's create event (every object of
// an informer's initial list, as after a restart, and every new one), enqueues it at Busy when
// inFlight says it has work in flight; it does nothing for any other event. Registered next to a controller's own For,
// which enqueues every object of that list at handler.LowPriority, it lifts the clusters with a
// rollout or a scale step under way ahead of the fleet's no-ops (the queue raises an item's
// priority when it is added again with a higher one). Later changes need no help: they come in
// at priority 0, above the low-priority backlog.
func EnqueueInFlight[T client.Object](inFlight func(T) bool) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			obj, ok := e.Object.(T)
			if !ok || !inFlight(obj) {
				return
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
			if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: For(true)}, req)
				return
			}
			q.Add(req)
		},
	}
}
