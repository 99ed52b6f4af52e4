package status

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// TestReconcileKeepsHealthSeries: a reconcile leaves the Etcd's health series, and the reconcile
// that finds the Etcd deleted takes every series of it away, another Etcd's staying.
func TestReconcileKeepsHealthSeries(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, druidv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	etcd := func(name string) *druidv1alpha1.Etcd {
		return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 1}}
	}
	main := etcd("main")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: "ns", Labels: resources.SelectorLabels(main)}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(main, etcd("other"), pod).WithStatusSubresource(&druidv1alpha1.Etcd{}).Build()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(c, m)
	r.now = func() time.Time { return now }
	ctx := context.Background()
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
			t.Fatalf("reconciling %s: %v", name, err)
		}
	}
	count := func(etcd string) int {
		n := 0
		for _, s := range series(t, reg) {
			if strings.Contains(s, "etcd="+etcd+",") {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		name      string
		do        func()
		wantMain  bool
		wantOther bool
	}{
		{name: "both reconciled", do: func() { reconcile("main"); reconcile("other") }, wantMain: true, wantOther: true},
		{name: "main deleted", do: func() {
			if err := c.Delete(ctx, main); err != nil {
				t.Fatal(err)
			}
			reconcile("main")
		}, wantOther: true},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.do()
			if got := count("main") > 0; got != step.wantMain {
				t.Errorf("series of main: %t, want %t\n%s", got, step.wantMain, strings.Join(series(t, reg), "\n"))
			}
			if got := count("other") > 0; got != step.wantOther {
				t.Errorf("series of other: %t, want %t", got, step.wantOther)
			}
		})
	}
	// other's member has no pod: its series says so.
	if want := "member_ready{etcd=other,member=other-0,namespace=ns} 0"; !slices.Contains(series(t, reg), want) {
		t.Errorf("no %q among\n%s", want, strings.Join(series(t, reg), "\n"))
	}
}
