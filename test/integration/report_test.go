package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// waitForEvent waits for an Event on the Etcd with this reason whose message holds every one of
// the given strings.
func waitForEvent(t *testing.T, c client.Client, etcd *druidv1alpha1.Etcd, reason string, message ...string) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("a %s Event naming %q", reason, message), func(ctx context.Context) (bool, string) {
		e, n, err := findEvent(ctx, c, etcd, reason, message...)
		if err != nil {
			return false, err.Error()
		}
		return e != nil, fmt.Sprintf("%d events, none matching", n)
	})
}

// findEvent is an Event on the Etcd with this reason whose message holds every one of the given
// strings (nil: none), and how many Events the namespace holds.
func findEvent(ctx context.Context, c client.Client, etcd *druidv1alpha1.Etcd, reason string, message ...string) (*corev1.Event, int, error) {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(etcd.Namespace)); err != nil {
		return nil, 0, err
	}
	for i, e := range events.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Etcd" && e.InvolvedObject.Name == etcd.Name && containsAll(e.Message, message) {
			return &events.Items[i], len(events.Items), nil
		}
	}
	return nil, len(events.Items), nil
}

// waitForLastErrors waits until status.lastErrors holds, for each description, an error with
// this code whose description holds every one of its strings.
func waitForLastErrors(t *testing.T, c client.Client, etcd *druidv1alpha1.Etcd, code string, descriptions ...[]string) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("%s in lastErrors naming %q", code, descriptions), func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		for _, want := range descriptions {
			found := false
			for _, e := range got.Status.LastErrors {
				found = found || (e.Code == code && containsAll(e.Description, want))
			}
			if !found {
				return false, fmt.Sprintf("none naming %q in lastErrors %+v", want, got.Status.LastErrors)
			}
		}
		return true, ""
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
