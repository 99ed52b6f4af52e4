package envtestutil_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/envtestutil"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

func TestStartServesNamespaces(t *testing.T) {
	env := envtestutil.Start(t, envtestutil.Options{})
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "envtestutil-smoke"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	var list corev1.NamespaceList
	if err := env.Client.List(ctx, &list); err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	found := false
	for _, n := range list.Items {
		found = found || n.Name == ns.Name
	}
	if !found {
		t.Errorf("namespace %s not in the list of %d namespaces", ns.Name, len(list.Items))
	}
	// The chart's CRD dir is generated; once it holds the CRD, Start must
	// have installed it.
	if crds, _ := filepath.Glob(filepath.Join(repoRoot(t), "charts", "etcd-conductor", "crds", "*.yaml")); len(crds) > 0 {
		var etcds druidv1alpha1.EtcdList
		if err := env.Client.List(ctx, &etcds); err != nil {
			t.Errorf("list Etcds with the chart's CRD installed: %v", err)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// The scheme must know the Etcd kinds even while the CRD is not installed.
func TestSchemeKnowsEtcd(t *testing.T) {
	s, err := envtestutil.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&druidv1alpha1.Etcd{}, &appsv1.StatefulSet{}} {
		if _, _, err := s.ObjectKinds(obj); err != nil {
			t.Errorf("scheme lacks %T: %v", obj, err)
		}
	}
}

func TestControllerManagerCreatesStatefulSetPods(t *testing.T) {
	env := envtestutil.Start(t, envtestutil.Options{WithControllerManager: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "kcm-smoke"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-smoke", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](2),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "etcd:test"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, sts); err != nil {
		t.Fatalf("create StatefulSet: %v", err)
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		return len(pods.Items) == 2, nil
	})
	if err != nil {
		t.Fatalf("waiting for the statefulset controller to create 2 pods: %v", err)
	}
}
