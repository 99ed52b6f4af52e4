package takeover

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name       string
		etcd       *druidv1alpha1.Etcd
		wantHeld   bool
		wantReason string
	}{
		{name: "no Etcd", etcd: nil},
		{name: "no finalizer", etcd: &druidv1alpha1.Etcd{}},
		{name: "another finalizer", etcd: &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"example.com/keep"}}}},
		{name: "druid's", etcd: &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"example.com/keep", DruidFinalizer}}},
			wantHeld: true, wantReason: "etcd-druid manages this Etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.etcd)
			if d.Held != tc.wantHeld || (tc.wantHeld && d.Rule != RuleHoldDruidManaged) || (!tc.wantHeld && d.Rule != RuleNotDruid) {
				t.Fatalf("Decide = %+v, want held %v", d, tc.wantHeld)
			}
			if tc.wantReason != "" && !strings.Contains(d.Reason, tc.wantReason) {
				t.Errorf("reason %q lacks %q", d.Reason, tc.wantReason)
			}
		})
	}
}
