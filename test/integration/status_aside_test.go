package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestStatusListsDataAside runs the status controller on a real apiserver: what the member
// Leases the Etcd controls report kept aside (etcd-conductor.io/data-aside) is listed in
// status.dataAside (the CRD keeps the field) and counted in the data-aside metrics; a Lease
// under a member's name that the Etcd does not control is not its member's; a member whose
// report goes loses its series, and the Etcd going takes all of them.
func TestStatusListsDataAside(t *testing.T) {
	ns, name := testNamespace("status-aside"), "etcd-main"
	env := sharedControlPlane(t)
	ctx := setup(t, env, ns, name)
	c := env.Client()
	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for i, hours := range [][]int{{0, 1}, {2}, {3}} {
		member := resources.PodName(etcd, i)
		lease := resources.MemberLease(etcd, member)
		if i < 2 {
			lease.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(etcd, druidv1alpha1.GroupVersion.WithKind("Etcd"))}
		}
		var all []memberlease.Aside
		for _, h := range hours {
			all = append(all, memberlease.Aside{Path: fmt.Sprintf("/var/etcd/data/new.etcd.aside-h%d", h), Time: at.Add(time.Duration(h) * time.Hour), Bytes: int64(h+1) << 20})
		}
		lease.Annotations = map[string]string{memberlease.AnnotationDataAside: memberlease.NewDataAside(all).Annotation()}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	metrics, err := status.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := status.NewReconciler(c, metrics)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}
	listed := func() []string {
		t.Helper()
		if _, err := rec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range got.Status.DataAside {
			out = append(out, fmt.Sprintf("%s %s %s %d", a.Member, a.Path, a.KeptSince.UTC().Format(time.RFC3339), a.Bytes))
		}
		return out
	}

	want := []string{
		"etcd-main-0 /var/etcd/data/new.etcd.aside-h0 2026-11-26T10:00:00Z 1048576",
		"etcd-main-0 /var/etcd/data/new.etcd.aside-h1 2026-11-26T11:00:00Z 2097152",
		"etcd-main-1 /var/etcd/data/new.etcd.aside-h2 2026-11-26T12:00:00Z 3145728",
	}
	if got := listed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("status.dataAside:\n got %q\nwant %q", got, want)
	}
	if got := testutil.ToFloat64(metrics.AsideBytes.WithLabelValues(ns, name, "etcd-main-0")); got != 3<<20 {
		t.Errorf("etcd_conductor_member_data_aside_bytes of etcd-main-0 = %v, want %d", got, 3<<20)
	}
	if got := testutil.ToFloat64(metrics.AsideDirs.WithLabelValues(ns, name, "etcd-main-1")); got != 1 {
		t.Errorf("etcd_conductor_member_data_aside_dirs of etcd-main-1 = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(metrics.AsideDirs); got != 2 {
		t.Errorf("%d data-aside series, want etcd-main-0's and etcd-main-1's", got)
	}

	// etcd-main-1's report goes.
	lease := resources.MemberLease(etcd, "etcd-main-1")
	if err := c.Patch(ctx, lease, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+memberlease.AnnotationDataAside+`":null}}}`))); err != nil {
		t.Fatal(err)
	}
	if got := listed(); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Errorf("status.dataAside once etcd-main-1 reports nothing:\n got %q\nwant %q", got, want[:2])
	}
	if got := testutil.CollectAndCount(metrics.AsideBytes); got != 1 {
		t.Errorf("%d data-aside series once etcd-main-1 reports nothing, want 1", got)
	}

	if err := c.Delete(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Etcd gone and its series with it", func(ctx context.Context) (bool, string) {
		if _, err := rec.Reconcile(ctx, req); err != nil {
			return false, err.Error()
		}
		n := testutil.CollectAndCount(metrics.AsideBytes) + testutil.CollectAndCount(metrics.AsideDirs)
		return n == 0, fmt.Sprintf("%d series left", n)
	})
}
