package recovery

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
)

func TestNothingToRecover(t *testing.T) {
	forged := []coordinationv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: "main-0", Annotations: map[string]string{memberlease.AnnotationRestore: "x"}}}}
	report := func(rule string) []coordinationv1.Lease {
		r := memberlease.StartReport{PodUID: "u0", Rule: rule, Data: memberlease.DataEmpty}
		return []coordinationv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: "main-0", Annotations: map[string]string{memberlease.AnnotationStartReport: r.Annotation()}}}}
	}
	awaiting, bootstrapping := report(memberlease.StartRuleBootstrapFromBackup), report("bootstrap/new")
	cases := []struct {
		name   string
		etcd   func(e *druidv1alpha1.Etcd)
		leases []coordinationv1.Lease
		want   bool
	}{
		{name: "never bootstrapped, even with quorum lost", want: true, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.ClusterID = ""
			e.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: etcdstatus.ReasonQuorumLost}}
		}},
		{name: "never formed, a member waits to bootstrap from the backup", leases: awaiting, want: false, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.ClusterID = ""
		}},
		{name: "never formed, a bootstrap from the backup ordered", want: false, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.ClusterID = ""
			e.Status.Recovery = &druidv1alpha1.RecoveryRequest{Member: "main-0"}
		}},
		{name: "never formed, members bootstrapping empty", leases: bootstrapping, want: true, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.ClusterID = ""
		}},
		{name: "formed: a stale wait for a bootstrap from the backup calls for nothing", leases: awaiting, want: true},
		{name: "quorate, nothing recorded", want: true},
		{name: "quorum lost", want: false, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: etcdstatus.ReasonQuorumLost}}
		}},
		{name: "Ready False for another reason", want: true, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: "Unknown"}}
		}},
		{name: "a recovery recorded", want: false, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.Recovery = &druidv1alpha1.RecoveryRequest{Member: "main-0"}
		}},
		{name: "RecoveryInProgress True", want: false, etcd: func(e *druidv1alpha1.Etcd) {
			e.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeRecoveryInProgress, Status: druidv1alpha1.ConditionTrue}}
		}},
		{name: "a restore order forged on a Lease, to report and remove", leases: forged, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
			etcd.Status.ClusterID = "c1"
			if tc.etcd != nil {
				tc.etcd(etcd)
			}
			if got := NothingToRecover(etcd, tc.leases); got != tc.want {
				t.Errorf("NothingToRecover() = %v, want %v", got, tc.want)
			}
		})
	}
}
