package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestManyEventsOfOneObjectReachTheAPIServer: the manager's Events about one object are not cut
// at client-go's default spam burst (25 of a type, then one per 5 minutes). A five-member
// rollout, or two rollouts within minutes, send more than that about their Etcd, and the per-step
// Events are what a user (and the e2e tests) follow a rollout by.
func TestManyEventsOfOneObjectReachTheAPIServer(t *testing.T) {
	t.Parallel()
	env := sharedControlPlane(t)
	ns := testNamespace("events")
	ctx := context.Background()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	op := framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	subject := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "subject", Namespace: ns}}
	if err := env.Client().Create(ctx, subject); err != nil {
		t.Fatal(err)
	}
	recorder := op.Operator.Manager.GetEventRecorderFor("etcd-conductor") //nolint:staticcheck // the recorder the controllers use
	const sent = 60
	for i := range sent {
		// Distinct reasons, so the aggregator does not fold them into one.
		recorder.Eventf(subject, corev1.EventTypeNormal, fmt.Sprintf("Step%d", i), "step %d of a long operation", i)
	}
	framework.Eventually(t, timeout, fmt.Sprintf("all %d Events in the API", sent), func(ctx context.Context) (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client().List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range events.Items {
			if e.InvolvedObject.Name == subject.Name {
				n++
			}
		}
		return n == sent, fmt.Sprintf("%d Events", n)
	})
}
