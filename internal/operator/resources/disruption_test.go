package resources

import (
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// healthEtcd is an n-member Etcd with ready of its members Ready, AllMembersReady as allReady
// ("" leaves the condition out) and BackupReady as backup ("" leaves it out), with a store.
func healthEtcd(n, ready int, allReady, backup druidv1alpha1.ConditionStatus) *druidv1alpha1.Etcd {
	e := testEtcd(int32(n))
	p := druidv1alpha1.StorageProvider("S3")
	e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: &p}}
	for i := 0; i < n; i++ {
		st := druidv1alpha1.EtcdMemberStatusNotReady
		if i < ready {
			st = druidv1alpha1.EtcdMemberStatusReady
		}
		e.Status.Members = append(e.Status.Members, druidv1alpha1.EtcdMemberStatus{Name: PodName(e, i), Status: st})
	}
	if allReady != "" {
		e.Status.Conditions = append(e.Status.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeAllMembersReady, Status: allReady})
	}
	if backup != "" {
		e.Status.Conditions = append(e.Status.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeBackupReady, Status: backup, Reason: "UploadFailed"})
	}
	return e
}

func TestDisruptionBudget(t *testing.T) {
	const (
		T = druidv1alpha1.ConditionTrue
		F = druidv1alpha1.ConditionFalse
		U = druidv1alpha1.ConditionUnknown
	)
	for _, tt := range []struct {
		name             string
		n, ready         int
		allReady, backup druidv1alpha1.ConditionStatus
		wait             bool
		want             int32
		rule             string
	}{
		{"single node, all bad", 1, 0, F, F, true, 0, "pdb/single-node"},
		{"3 healthy", 3, 3, T, T, true, 2, "pdb/quorum"},
		{"3, no conditions yet", 3, 0, "", "", true, 2, "pdb/quorum"},
		{"3, one not ready: the two ready stay", 3, 2, F, T, true, 2, "pdb/quorum"},
		{"5, one not ready: the four ready stay", 5, 4, F, T, true, 4, "pdb/members-not-ready"},
		{"5, three not ready: never below quorum", 5, 2, F, T, true, 3, "pdb/quorum"},
		{"5 healthy, AllMembersReady Unknown", 5, 5, U, T, true, 3, "pdb/quorum"},
		{"3, backup False: no eviction", 3, 3, T, F, true, 3, "pdb/backup-not-ready"},
		{"5, backup False and a member down: the highest wins", 5, 4, F, F, true, 5, "pdb/backup-not-ready"},
		{"3, backup Unknown", 3, 3, T, U, true, 2, "pdb/quorum"},
		{"3, backup False, waiting off", 3, 3, T, F, false, 2, "pdb/quorum"},
		{"5, backup False, waiting off, one down", 5, 4, F, F, false, 4, "pdb/members-not-ready"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := healthEtcd(tt.n, tt.ready, tt.allReady, tt.backup)
			got := DisruptionBudget(e, backupgate.Of(e, tt.wait))
			if got.MinAvailable != tt.want || string(got.Rule) != tt.rule {
				t.Errorf("DisruptionBudget = %d [%s], want %d [%s]", got.MinAvailable, got.Rule, tt.want, tt.rule)
			}
			if pdb := PodDisruptionBudget(e, tt.wait); pdb.Spec.MinAvailable.IntVal != tt.want {
				t.Errorf("PodDisruptionBudget minAvailable = %d, want %d", pdb.Spec.MinAvailable.IntVal, tt.want)
			}
		})
	}
}

// TestDisruptionBudgetBounds: for every size and health, the budget is at least a quorum and at
// most n for a multi-node cluster, and n whenever the backup gate holds.
func TestDisruptionBudgetBounds(t *testing.T) {
	statuses := []druidv1alpha1.ConditionStatus{"", druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionUnknown}
	for n := 2; n <= 7; n++ {
		for ready := 0; ready <= n; ready++ {
			for _, all := range statuses {
				for _, backup := range statuses {
					for _, wait := range []bool{false, true} {
						e := healthEtcd(n, ready, all, backup)
						got := DisruptionBudget(e, backupgate.Of(e, wait)).MinAvailable
						name := fmt.Sprintf("n=%d ready=%d all=%q backup=%q wait=%v", n, ready, all, backup, wait)
						if got < int32(quorum.Of(n)) || got > int32(n) {
							t.Errorf("%s: minAvailable %d outside [quorum %d, %d]", name, got, quorum.Of(n), n)
						}
						if wait && backup == druidv1alpha1.ConditionFalse && got != int32(n) {
							t.Errorf("%s: minAvailable %d, want %d while the backup is not ready", name, got, n)
						}
						if all == druidv1alpha1.ConditionFalse && got < int32(ready) {
							t.Errorf("%s: minAvailable %d lets a ready member go while not all are ready", name, got)
						}
					}
				}
			}
		}
	}
}

func TestPodDisruptionBudgetUnhealthyEviction(t *testing.T) {
	e := testEtcd(3)
	if p := PodDisruptionBudget(e, true).Spec.UnhealthyPodEvictionPolicy; p != nil {
		t.Errorf("without the annotation: unhealthyPodEvictionPolicy = %s, want unset", *p)
	}
	e.Annotations = map[string]string{AnnotationAllowUnhealthyPodEviction: ""}
	if p := PodDisruptionBudget(e, true).Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("with the annotation: unhealthyPodEvictionPolicy = %v, want AlwaysAllow", p)
	}
}
