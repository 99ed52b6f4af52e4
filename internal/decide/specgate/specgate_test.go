package specgate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

func etcdAt(generation int64, observed *int64, annotations map[string]string) *druidv1alpha1.Etcd {
	e := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Generation: generation, Annotations: annotations}}
	e.Status.ObservedGeneration = observed
	return e
}

func TestDecide(t *testing.T) {
	order := map[string]string{AnnotationOperation: OperationReconcile}
	tests := []struct {
		name    string
		etcd    *druidv1alpha1.Etcd
		auto    bool
		apply   bool
		consume bool
		rule    ruleid.ID
	}{
		{"suspended, even with auto-reconcile", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationSuspend: ""}), true, false, false, RuleSuspended},
		{"suspended by the older annotation", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationIgnoreReconciliation: "true"}), false, false, false, RuleSuspended},
		{"suspension wins over an order", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationSuspend: "", AnnotationOperation: OperationReconcile}), false, false, false, RuleSuspended},
		{"auto-reconcile applies a change", etcdAt(2, ptr.To(int64(1)), nil), true, true, false, RuleAuto},
		{"auto-reconcile consumes a stray order", etcdAt(2, ptr.To(int64(1)), order), true, true, true, RuleAuto},
		{"an order applies a change", etcdAt(2, ptr.To(int64(1)), order), false, true, true, RuleOrdered},
		{"Gardener's name for the order applies a change", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationGardenerOperation: OperationReconcile}), false, true, true, RuleOrdered},
		{"Gardener's name with another value orders nothing", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationGardenerOperation: "migrate"}), false, false, false, RuleWaitForOrdering},
		{"another operation value orders nothing", etcdAt(2, ptr.To(int64(1)), map[string]string{AnnotationOperation: "wait"}), false, false, false, RuleWaitForOrdering},
		{"a new Etcd comes up without an order", etcdAt(1, nil, nil), false, true, false, RuleFirst},
		{"nothing pending: a resync applies the spec applied", etcdAt(3, ptr.To(int64(3)), nil), false, true, false, RuleNothingPending},
		{"a change waits for an order", etcdAt(3, ptr.To(int64(2)), nil), false, false, false, RuleWaitForOrdering},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.etcd, tt.auto)
			if d.Apply != tt.apply || d.ConsumeOrder != tt.consume || d.Rule != tt.rule || d.Reason == "" {
				t.Errorf("Decide() = %+v; want apply %v, consume %v, rule %s, with a reason", d, tt.apply, tt.consume, tt.rule)
			}
		})
	}
}

// TestOrderAnnotations: what the reconciler removes once the order is carried out is exactly the
// annotations that ordered it, never an operation annotation with another value.
func TestOrderAnnotations(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"none", nil, nil},
		{"etcd-druid's", map[string]string{AnnotationOperation: OperationReconcile}, []string{AnnotationOperation}},
		{"both", map[string]string{AnnotationOperation: OperationReconcile, AnnotationGardenerOperation: OperationReconcile}, []string{AnnotationOperation, AnnotationGardenerOperation}},
		{"Gardener's other value kept", map[string]string{AnnotationOperation: OperationReconcile, AnnotationGardenerOperation: "migrate"}, []string{AnnotationOperation}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := OrderAnnotations(etcdAt(1, nil, tt.annotations))
			if len(got) != len(tt.want) {
				t.Fatalf("OrderAnnotations = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("OrderAnnotations = %v, want %v", got, tt.want)
				}
			}
		})
	}
}
