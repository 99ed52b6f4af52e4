// Package priority orders the controllers' work queues so that clusters with something to do go
// first. Every controller runs on controller-runtime's priority queue (the default of the
// controller-runtime version go.mod pins; internal/operator sets it explicitly): events from an
// informer's initial list, as after a manager restart, and resyncs that change nothing come in at
// handler.LowPriority, real changes at 0. A reconcile's requeue keeps the priority it was dequeued
// with unless the result names one, so each controller says, with For, whether the cluster it just
// looked at has work in flight (a rollout, a scale step, a member not ready): its next look is then
// ahead of the periodic checks of settled clusters, whatever the length of the queue.
// EnqueueInFlight does the same for the objects of an informer's initial list, so after a restart
// the clusters with a rollout or a scale step under way go ahead of the fleet's no-ops.
//
// It is queue plumbing, nothing of the domain: what counts as work in flight is each controller's
// to say.
package priority
