package status

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

var keptAt = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func asideEtcd() *druidv1alpha1.Etcd {
	return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "ns", UID: "etcd-uid"},
		Spec: druidv1alpha1.EtcdSpec{Replicas: 3}}
}

// asideLease is a member Lease the Etcd controls, with the annotation raw ("" for none).
func asideLease(etcd *druidv1alpha1.Etcd, member, raw string) coordinationv1.Lease {
	l := *resources.MemberLease(etcd, member)
	l.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(etcd, druidv1alpha1.GroupVersion.WithKind("Etcd"))}
	if raw != "" {
		l.Annotations = map[string]string{memberlease.AnnotationDataAside: raw}
	}
	return l
}

// reported is what an init step writes for dirs kept aside at keptAt plus each of hours, 1 KiB
// each.
func reported(member string, hours ...int) string {
	var all []memberlease.Aside
	for _, h := range hours {
		all = append(all, memberlease.Aside{Path: fmt.Sprintf("/var/etcd/data/new.etcd.aside-%s-h%d", member, h), Time: keptAt.Add(time.Duration(h) * time.Hour), Bytes: 1024})
	}
	return memberlease.NewDataAside(all).Annotation()
}

// TestComputeListsDataAside: status.dataAside lists what the member Leases the Etcd controls
// report kept aside, by member and oldest first, the newest ten per member; nothing from a Lease
// something else controls or a report that does not make sense.
func TestComputeListsDataAside(t *testing.T) {
	etcd := asideEtcd()
	foreign := asideLease(etcd, "etcd-main-2", reported("etcd-main-2", 0))
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name   string
		leases []coordinationv1.Lease
		want   []string // "member path-suffix bytes"
	}{
		{name: "nothing reported", leases: []coordinationv1.Lease{asideLease(etcd, "etcd-main-0", "")}},
		{name: "nothing kept aside", leases: []coordinationv1.Lease{asideLease(etcd, "etcd-main-0", reported("etcd-main-0"))}},
		{name: "by member, oldest first",
			leases: []coordinationv1.Lease{asideLease(etcd, "etcd-main-1", reported("etcd-main-1", 5)), asideLease(etcd, "etcd-main-0", reported("etcd-main-0", 2, 1))},
			want:   []string{"etcd-main-0 h1 2026-11-26T11:00:00Z 1024", "etcd-main-0 h2 2026-11-26T12:00:00Z 1024", "etcd-main-1 h5 2026-11-26T15:00:00Z 1024"}},
		{name: "the newest ten of a member",
			leases: []coordinationv1.Lease{asideLease(etcd, "etcd-main-0", reported("etcd-main-0", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))},
			want: []string{"etcd-main-0 h2 2026-11-26T12:00:00Z 1024", "etcd-main-0 h3 2026-11-26T13:00:00Z 1024", "etcd-main-0 h4 2026-11-26T14:00:00Z 1024",
				"etcd-main-0 h5 2026-11-26T15:00:00Z 1024", "etcd-main-0 h6 2026-11-26T16:00:00Z 1024", "etcd-main-0 h7 2026-11-26T17:00:00Z 1024",
				"etcd-main-0 h8 2026-11-26T18:00:00Z 1024", "etcd-main-0 h9 2026-11-26T19:00:00Z 1024", "etcd-main-0 h10 2026-11-26T20:00:00Z 1024",
				"etcd-main-0 h11 2026-11-26T21:00:00Z 1024"}},
		{name: "a Lease something else controls is not the member's", leases: []coordinationv1.Lease{foreign}},
		{name: "a report that makes no sense", leases: []coordinationv1.Lease{asideLease(etcd, "etcd-main-0", `{"count":-1}`), asideLease(etcd, "etcd-main-1", "garbage")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(Inputs{Etcd: etcd, Leases: tc.leases, Now: now}).DataAside
			var lines []string
			for _, a := range got {
				lines = append(lines, fmt.Sprintf("%s %s %s %d", a.Member, a.Path[len("/var/etcd/data/new.etcd.aside-"+a.Member+"-"):], a.KeptSince.UTC().Format(time.RFC3339), a.Bytes))
			}
			if fmt.Sprint(lines) != fmt.Sprint(tc.want) {
				t.Errorf("dataAside:\n got %q\nwant %q", lines, tc.want)
			}
		})
	}
}

// TestDataAsideMetrics: a series per reporting member, of its totals (not only what is listed);
// a member that stops reporting loses its series, and all go with the Etcd.
func TestDataAsideMetrics(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "etcd-main"}
	other := types.NamespacedName{Namespace: "ns", Name: "etcd-other"}
	etcd := asideEtcd()
	reports := AsideReports(etcd, []coordinationv1.Lease{
		asideLease(etcd, "etcd-main-0", reported("etcd-main-0", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)),
		asideLease(etcd, "etcd-main-1", reported("etcd-main-1")),
	})
	m.recordAside(key, reports)
	m.recordAside(other, map[string]memberlease.DataAside{"etcd-other-0": {Count: 1, Bytes: 7}})
	if got := testutil.ToFloat64(m.AsideDirs.WithLabelValues("ns", "etcd-main", "etcd-main-0")); got != 12 {
		t.Errorf("etcd-main-0 keeps %v dirs aside, want 12", got)
	}
	if got := testutil.ToFloat64(m.AsideBytes.WithLabelValues("ns", "etcd-main", "etcd-main-0")); got != 12*1024 {
		t.Errorf("etcd-main-0 keeps %v bytes aside, want %d", got, 12*1024)
	}
	if got := testutil.CollectAndCount(m.AsideDirs); got != 3 {
		t.Errorf("%d series, want one per reporting member (3)", got)
	}

	delete(reports, "etcd-main-1")
	m.recordAside(key, reports)
	if got := testutil.CollectAndCount(m.AsideBytes); got != 2 {
		t.Errorf("%d series after etcd-main-1 stopped reporting, want 2", got)
	}
	m.forget(key)
	if got := testutil.CollectAndCount(m.AsideDirs) + testutil.CollectAndCount(m.AsideBytes); got != 2 {
		t.Errorf("%d series after etcd-main went, want only etcd-other's 2", got)
	}
	var none *Metrics
	none.recordAside(key, reports) // records nothing, and does not panic
	none.forget(key)
}
