package scenario

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// EventDelivery bounds how long an Event may take to show after what it reports: the recorder
// sends Events asynchronously, best effort, so a check right after a rollout can miss one.
const EventDelivery = 10 * time.Second

// StatusWithin bounds how long a condition may take to say what the controller decided: the
// status is written by the reconcile after the one that decided, and a watch event behind.
const StatusWithin = 10 * time.Second

// Within asks list until it returns something or within runs out, and returns the last answer:
// what a test asserts is waited for, not read once.
func Within[T any](ctx context.Context, within time.Duration, list func(context.Context) []T) []T {
	var got []T
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		got = list(ctx)
		return len(got) > 0, nil
	})
	return got
}

// EventsWithin waits up to within for Events of the cluster whose reason starts with prefix and
// returns them as "reason: message" (none when none came).
func EventsWithin(ctx context.Context, c *stack.EtcdCluster, prefix string, within time.Duration) []string {
	return Within(ctx, within, func(ctx context.Context) []string {
		events, err := c.EventsWithReason(ctx, prefix)
		if err != nil {
			return nil
		}
		return events
	})
}
