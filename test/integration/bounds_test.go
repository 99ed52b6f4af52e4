package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// TestReplicasBeyondTheBoundRejectedByTheAPI: replicas 2147483647 used to pass the CRD (odd and
// not negative) and then kill the manager with out-of-memory. The apiserver must refuse any count
// above MaxReplicas, through the object and through the scale subresource, naming the bound.
func TestReplicasBeyondTheBoundRejectedByTheAPI(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("bounds")
	ctx := setup(t, env, ns, "etcd-main")
	bound := fmt.Sprintf("less than or equal to %d", druidv1alpha1.MaxReplicas)
	for _, replicas := range []int32{druidv1alpha1.MaxReplicas + 2, math.MaxInt32} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			err := env.Client().Create(ctx, framework.NewEtcd(ns, fmt.Sprintf("etcd-%d", replicas), replicas, framework.EtcdImage("3.6.8")))
			if err == nil || !strings.Contains(err.Error(), "spec.replicas") || !strings.Contains(err.Error(), bound) {
				t.Fatalf("creating an Etcd with %d replicas: err = %v, want a rejection of spec.replicas saying %q", replicas, err, bound)
			}
		})
	}

	etcd := framework.NewEtcd(ns, "etcd-main", druidv1alpha1.MaxReplicas, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatalf("%d replicas must be accepted: %v", druidv1alpha1.MaxReplicas, err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: druidv1alpha1.MaxReplicas + 2}}
	err := env.Client().SubResource("scale").Update(ctx, etcd, client.WithSubResourceBody(scale))
	if err == nil || !strings.Contains(err.Error(), bound) {
		t.Fatalf("scaling to %d through the scale subresource: err = %v, want a rejection saying %q", druidv1alpha1.MaxReplicas+2, err, bound)
	}
}

// TestReplicasWrittenBeforeTheBoundAreRefused: an Etcd stored with replicas 2147483647 while the
// CRD had no maximum (installed here from the chart's CRD without it) must not take the manager
// down. The Etcd reconciler reports ERR_INVALID_REPLICAS and creates nothing, the status
// controller says InvalidReplicas; before the bound, each of them allocated by that count and the
// process died of out-of-memory.
func TestReplicasWrittenBeforeTheBoundAreRefused(t *testing.T) {
	const ns, name = "oldbound", "etcd-main"
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(root, "charts", "etcd-conductor", "files", "crds", "druid.gardener.cloud_etcds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	maximum := fmt.Sprintf("\n                maximum: %d\n", druidv1alpha1.MaxReplicas)
	if strings.Count(string(crd), maximum) != 1 {
		t.Fatalf("the chart's CRD does not hold exactly one %q", strings.TrimSpace(maximum))
	}
	oldCRDDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(oldCRDDir, "etcds.yaml"), []byte(strings.Replace(string(crd), maximum, "\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true, CRDDir: oldCRDDir})
	ctx := setup(t, env, ns, name)
	etcd := framework.NewEtcd(ns, name, math.MaxInt32, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatalf("the CRD without a maximum must store replicas %d: %v", int32(math.MaxInt32), err)
	}
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true)})

	waitForLastErrors(t, env.Client(), etcd, resources.ErrInvalidReplicas,
		[]string{"spec.replicas is 2147483647", fmt.Sprintf("up to %d", druidv1alpha1.MaxReplicas)})
	waitForEvent(t, env.Client(), etcd, "InvalidSpec", "2147483647")
	framework.Eventually(t, timeout, "an InvalidReplicas Ready condition", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		if ready := findCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeReady); ready == nil || ready.Reason != status.ReasonInvalidReplicas {
			return false, fmt.Sprintf("conditions %+v", got.Status.Conditions)
		}
		return true, ""
	})
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.ServiceAccount{}} {
		key := types.NamespacedName{Namespace: ns, Name: name}
		if _, ok := obj.(*corev1.ConfigMap); ok {
			key.Name = name + "-config"
		}
		if err := env.Client().Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s: err = %v, want NotFound: nothing may be created for an invalid spec", obj, key, err)
		}
	}
	if _, err := getStatefulSet(ctx, env.Client(), ns, name); !apierrors.IsNotFound(err) {
		t.Errorf("StatefulSet: err = %v, want NotFound", err)
	}
}
