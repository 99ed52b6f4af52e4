package integration

import (
	"fmt"
	"math"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/envtestutil"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestReplicasBeyondTheBoundRejectedByTheAPI: replicas 2147483647 used to pass the CRD (odd and
// not negative) and then kill the manager with out-of-memory. The apiserver must refuse any count
// above MaxReplicas, through the object and through the scale subresource, naming the bound.
func TestReplicasBeyondTheBoundRejectedByTheAPI(t *testing.T) {
	env := envtestutil.Start(t, envtestutil.Options{})
	ctx := setup(t, env, "bounds", "etcd-main")
	bound := fmt.Sprintf("less than or equal to %d", druidv1alpha1.MaxReplicas)
	for _, replicas := range []int32{druidv1alpha1.MaxReplicas + 2, math.MaxInt32} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			err := env.Client.Create(ctx, framework.NewEtcd("bounds", fmt.Sprintf("etcd-%d", replicas), replicas, framework.EtcdImage("3.6.8")))
			if err == nil || !strings.Contains(err.Error(), "spec.replicas") || !strings.Contains(err.Error(), bound) {
				t.Fatalf("creating an Etcd with %d replicas: err = %v, want a rejection of spec.replicas saying %q", replicas, err, bound)
			}
		})
	}

	etcd := framework.NewEtcd("bounds", "etcd-main", druidv1alpha1.MaxReplicas, framework.EtcdImage("3.6.8"))
	if err := env.Client.Create(ctx, etcd); err != nil {
		t.Fatalf("%d replicas must be accepted: %v", druidv1alpha1.MaxReplicas, err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: druidv1alpha1.MaxReplicas + 2}}
	err := env.Client.SubResource("scale").Update(ctx, etcd, client.WithSubResourceBody(scale))
	if err == nil || !strings.Contains(err.Error(), bound) {
		t.Fatalf("scaling to %d through the scale subresource: err = %v, want a rejection saying %q", druidv1alpha1.MaxReplicas+2, err, bound)
	}
}
