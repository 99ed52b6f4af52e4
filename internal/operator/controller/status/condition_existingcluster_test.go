package status

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// TestBootstrappedWithExistingCluster: the condition is there only for an Etcd that asks to join
// an existing cluster, and is never True: its members are held back, or ran before it asked.
func TestBootstrappedWithExistingCluster(t *testing.T) {
	join := &druidv1alpha1.BootstrapWithExistingCluster{
		Members:         []druidv1alpha1.BootstrapExistingMember{{Name: "source-0", PeerURLs: []string{"https://source-0:2380"}}},
		ClientEndpoints: []string{"https://source-client:2379"},
	}
	for _, tt := range []struct {
		name       string
		join       *druidv1alpha1.BootstrapWithExistingCluster
		sts        bool
		wantReason string // "": no condition
	}{
		{name: "not asked", sts: true},
		{name: "asked, members held back", join: join, wantReason: ReasonJoinNotSupported},
		{name: "asked, members ran before", join: join, sts: true, wantReason: ReasonRunsOnItsOwn},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := observed(appsv1.OnDeleteStatefulSetStrategyType)
			o.Etcd.Spec.Etcd.BootstrapWithExistingCluster = tt.join
			if !tt.sts {
				o.StatefulSet = nil
			}
			c := druidv1alpha1.FindCondition(Compute(o).Conditions, druidv1alpha1.ConditionTypeBootstrappedWithExistingCluster)
			switch {
			case tt.wantReason == "" && c != nil:
				t.Fatalf("want no condition, got %+v", c)
			case tt.wantReason == "":
			case c == nil:
				t.Fatalf("want %s, got no condition", tt.wantReason)
			case c.Status != druidv1alpha1.ConditionFalse || c.Reason != tt.wantReason || c.Message == "":
				t.Fatalf("want False %s with a message, got %+v", tt.wantReason, c)
			}
		})
	}
}
