package recovery

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
)

func TestRestoreIncomplete(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	whole := restore.Result{Full: "Full-1-26", FullRevision: 26, Revision: 76, WantedRevision: 76, DeltasApplied: 2, DeltasInChain: 2}
	short := whole
	short.Revision, short.DeltasApplied = 51, 1
	short.Stopped = "delta Incr-52-76: object v2/Incr-52-76: sha256 is cd34, want ab12; revisions 52..76 are not restored"
	for _, tc := range []struct {
		name     string
		restored string
		want     []string // nil: no condition
	}{
		{name: "a restore that reached the chain's end", restored: memberlease.RestoreResultPrefix + whole.String()},
		{name: "no restore result reported", restored: ""},
		{name: "a restore that stopped early", restored: memberlease.RestoreResultPrefix + short.String(),
			want: []string{"cluster c1 stopped before the end of the backup", "revisions 52..76 are not restored", "sha256 is cd34",
				"kubectl annotate etcd -n ns main " + AnnotationAcknowledgeIncompleteRestore + "=c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := restoreIncomplete(etcd, "c1", tc.restored, time.Now())
			if tc.want == nil {
				if c != nil {
					t.Fatalf("condition %+v for a whole restore", c)
				}
				return
			}
			if c == nil || c.Status != druidv1alpha1.ConditionTrue || c.Reason != ReasonRestoreStoppedEarly {
				t.Fatalf("condition %+v, want RestoreIncomplete True", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q lacks %q", c.Message, w)
				}
			}
		})
	}
}
