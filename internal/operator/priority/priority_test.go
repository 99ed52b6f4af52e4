package priority

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestInFlightAheadOfInitialList feeds controller-runtime's own priority queue what a manager
// restart feeds it: the initial list of a fleet through the controller's usual handler (low
// priority), with one cluster in flight in the middle, plus EnqueueInFlight next to it. The
// cluster in flight must come out first, and every cluster exactly once.
func TestInFlightAheadOfInitialList(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	usual := handler.WithLowPriorityWhenUnchanged(&handler.EnqueueRequestForObject{})
	busy := EnqueueInFlight(func(sts *appsv1.StatefulSet) bool { return sts.Name == "etcd-42" })

	const fleet = 100
	for i := range fleet {
		e := event.CreateEvent{Object: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("etcd-%d", i)}}, IsInInitialList: true}
		usual.Create(t.Context(), e, q)
		busy.Create(t.Context(), e, q)
	}
	seen := map[string]bool{}
	for i := range fleet {
		req, prio, shutdown := q.GetWithPriority()
		if shutdown {
			t.Fatal("queue shut down")
		}
		q.Done(req)
		if i == 0 && (req.Name != "etcd-42" || prio != Busy) {
			t.Fatalf("first out: %s at priority %d, want etcd-42 at %d", req.Name, prio, Busy)
		}
		if i > 0 && prio != Settled {
			t.Errorf("%s at priority %d, want %d", req.Name, prio, Settled)
		}
		if seen[req.Name] {
			t.Errorf("%s came out twice", req.Name)
		}
		seen[req.Name] = true
	}
	if q.Len() != 0 {
		t.Errorf("%d items left in the queue", q.Len())
	}
}

func TestEnqueueInFlightIgnoresSettled(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	busy := EnqueueInFlight(func(*appsv1.StatefulSet) bool { return false })
	busy.Create(t.Context(), event.CreateEvent{Object: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd"}}}, q)
	if q.Len() != 0 {
		t.Errorf("a settled object was enqueued")
	}
}
