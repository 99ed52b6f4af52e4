package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// snapshotLeaseAt is a snapshot Lease recording a snapshot at revision 42 uploaded at t.
func snapshotLeaseAt(t time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	l.Spec.HolderIdentity = ptr.To("42")
	l.Spec.RenewTime = &metav1.MicroTime{Time: t}
	return l
}

// TestHealthOf: the values the gauges show, from the computed status and the inputs.
func TestHealthOf(t *testing.T) {
	healthy := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"}
	leader := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"}
	down := member{revision: "rev-new", ready: false, leaseAge: time.Minute, role: "Member"}
	withQuota := func(o Inputs) Inputs { o.Etcd.Spec.Etcd.Quota = ptr.To(resource.MustParse("2Gi")); return o }
	scaling := func(o Inputs) Inputs {
		o.Etcd.Status.Conditions = []druidv1alpha1.Condition{
			{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress, Status: druidv1alpha1.ConditionTrue},
			// Stale: the status controller's own, computed anew.
			{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionUnknown},
		}
		return o
	}
	backedUp := func(o Inputs) Inputs {
		o.FullSnapshotLease = snapshotLeaseAt(now.Add(-time.Hour))
		o.DeltaSnapshotLease = &coordinationv1.Lease{} // created, nothing uploaded yet
		return o
	}
	for _, tc := range []struct {
		name string
		o    Inputs
		// want: ready quorate spec/ready/voters, members as name:ready:leader, conditions as Type=Status
		want           string
		wantMembers    []string
		wantConditions []string
		wantQuota      int64
		wantFull       time.Time
	}{
		{name: "healthy", o: observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, healthy),
			want:        "ready=true quorate=true spec=3 readyMembers=3 voters=3",
			wantMembers: []string{"etcd-main-0:true:true", "etcd-main-1:true:false", "etcd-main-2:true:false"}, wantQuota: 8 << 30},
		{name: "one down keeps the quorum, not ready", o: observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, down),
			want:        "ready=false quorate=true spec=3 readyMembers=2 voters=3",
			wantMembers: []string{"etcd-main-0:true:true", "etcd-main-1:true:false", "etcd-main-2:false:false"}, wantQuota: 8 << 30},
		{name: "two down lose the quorum", o: withQuota(observed(appsv1.OnDeleteStatefulSetStrategyType, leader, down, down)),
			want:        "ready=false quorate=false spec=3 readyMembers=1 voters=3",
			wantMembers: []string{"etcd-main-0:true:true", "etcd-main-1:false:false", "etcd-main-2:false:false"}, wantQuota: 2 << 30},
		{name: "conditions of other writers are kept, own ones computed", o: scaling(observed(appsv1.OnDeleteStatefulSetStrategyType, leader)),
			want:           "ready=true quorate=true spec=1 readyMembers=1 voters=1",
			wantMembers:    []string{"etcd-main-0:true:true"},
			wantConditions: []string{"Ready=True", "ScaleOperationInProgress=True"}, wantQuota: 8 << 30},
		{name: "the last full snapshot, no delta yet", o: backedUp(observed(appsv1.OnDeleteStatefulSetStrategyType, leader)),
			want:        "ready=true quorate=true spec=1 readyMembers=1 voters=1",
			wantMembers: []string{"etcd-main-0:true:true"}, wantQuota: 8 << 30, wantFull: now.Add(-time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := HealthOf(tc.o, Compute(tc.o))
			if got := fmt.Sprintf("ready=%t quorate=%t spec=%d readyMembers=%d voters=%d", h.Ready, h.Quorate, h.SpecReplicas, h.ReadyMembers, h.Voters); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			var members []string
			for _, m := range h.Members {
				members = append(members, fmt.Sprintf("%s:%t:%t", m.Name, m.Ready, m.Leader))
			}
			if !slices.Equal(members, tc.wantMembers) {
				t.Errorf("members %q, want %q", members, tc.wantMembers)
			}
			for _, want := range tc.wantConditions {
				typ, status, _ := strings.Cut(want, "=")
				c := druidv1alpha1.FindCondition(h.Conditions, druidv1alpha1.ConditionType(typ))
				if c == nil || string(c.Status) != status {
					t.Errorf("condition %s is %v, want %s", typ, c, status)
				}
			}
			seen := map[druidv1alpha1.ConditionType]int{}
			for _, c := range h.Conditions {
				if seen[c.Type]++; seen[c.Type] > 1 {
					t.Errorf("condition %s listed twice", c.Type)
				}
			}
			if h.QuotaBytes != tc.wantQuota {
				t.Errorf("quota %d, want %d", h.QuotaBytes, tc.wantQuota)
			}
			if !h.LastFullSnapshot.Equal(tc.wantFull) || !h.LastDeltaSnapshot.IsZero() {
				t.Errorf("last snapshots full %v delta %v, want full %v and no delta", h.LastFullSnapshot, h.LastDeltaSnapshot, tc.wantFull)
			}
		})
	}
}

// series lists what reg exports as "name{label=value,...} value", sorted.
func series(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s{%s} %g", strings.TrimPrefix(f.GetName(), "etcd_conductor_"), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

func healthy3() Health {
	return Health{Ready: true, Quorate: true, SpecReplicas: 3, ReadyMembers: 3, Voters: 3, QuotaBytes: 100,
		Conditions: []druidv1alpha1.Condition{
			{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue},
			{Type: druidv1alpha1.ConditionTypeBackupReady, Status: druidv1alpha1.ConditionFalse},
		},
		Members:          []MemberHealth{{Name: "m-0", Ready: true, Leader: true}, {Name: "m-1", Ready: true}, {Name: "m-2", Ready: true}},
		LastFullSnapshot: time.Unix(1700000000, 0),
	}
}

// TestHealthMetrics: the series a Health makes, labelled namespace and etcd (and member); a
// member, condition or snapshot that goes away takes its series along, and the Etcd all of its.
func TestHealthMetrics(t *testing.T) {
	main := types.NamespacedName{Namespace: "ns", Name: "main"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	const l = "etcd=main,namespace=ns"
	full := []string{
		"etcd_condition{condition=BackupReady," + l + ",status=False} 1",
		"etcd_condition{condition=BackupReady," + l + ",status=True} 0",
		"etcd_condition{condition=BackupReady," + l + ",status=Unknown} 0",
		"etcd_condition{condition=Ready," + l + ",status=False} 0",
		"etcd_condition{condition=Ready," + l + ",status=True} 1",
		"etcd_condition{condition=Ready," + l + ",status=Unknown} 0",
		"etcd_last_full_snapshot_timestamp_seconds{" + l + "} 1.7e+09",
		"etcd_members_ready{" + l + "} 3",
		"etcd_quorate{" + l + "} 1",
		"etcd_quota_backend_bytes{" + l + "} 100",
		"etcd_ready{" + l + "} 1",
		"etcd_spec_replicas{" + l + "} 3",
		"etcd_voters{" + l + "} 3",
		"member_leader{etcd=main,member=m-0,namespace=ns} 1",
		"member_leader{etcd=main,member=m-1,namespace=ns} 0",
		"member_leader{etcd=main,member=m-2,namespace=ns} 0",
		"member_ready{etcd=main,member=m-0,namespace=ns} 1",
		"member_ready{etcd=main,member=m-1,namespace=ns} 1",
		"member_ready{etcd=main,member=m-2,namespace=ns} 1",
	}
	scaledIn := func(h Health) Health {
		h.SpecReplicas, h.ReadyMembers, h.Voters, h.Members = 1, 1, 1, h.Members[:1]
		h.Conditions = h.Conditions[:1] // backups turned off
		h.LastFullSnapshot = time.Time{}
		return h
	}
	for _, tc := range []struct {
		name   string
		steps  func(m *Metrics)
		want   []string
		others int // series of the other Etcd, untouched
	}{
		{name: "values", steps: func(m *Metrics) { m.record(main, healthy3()) }, want: full},
		{name: "members, conditions and snapshots gone", steps: func(m *Metrics) {
			m.record(main, healthy3())
			m.record(main, scaledIn(healthy3()))
		}, want: []string{
			"etcd_condition{condition=Ready," + l + ",status=False} 0",
			"etcd_condition{condition=Ready," + l + ",status=True} 1",
			"etcd_condition{condition=Ready," + l + ",status=Unknown} 0",
			"etcd_members_ready{" + l + "} 1",
			"etcd_quorate{" + l + "} 1",
			"etcd_quota_backend_bytes{" + l + "} 100",
			"etcd_ready{" + l + "} 1",
			"etcd_spec_replicas{" + l + "} 1",
			"etcd_voters{" + l + "} 1",
			"member_leader{etcd=main,member=m-0,namespace=ns} 1",
			"member_ready{etcd=main,member=m-0,namespace=ns} 1",
		}},
		{name: "the Etcd deleted", steps: func(m *Metrics) {
			m.record(main, healthy3())
			m.recordAside(main, nil)
			m.forget(main)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			m.record(other, healthy3())
			tc.steps(m)
			var got []string
			otherSeries := 0
			for _, s := range series(t, reg) {
				if strings.Contains(s, "etcd=other") {
					otherSeries++
					continue
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("series of main:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
			if otherSeries != len(full) {
				t.Errorf("%d series of the other Etcd, want %d untouched", otherSeries, len(full))
			}
		})
	}
	var none *Metrics
	none.record(main, healthy3()) // records nothing, and does not panic
}
