package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Writer names one of the controllers that write Etcd status. Each owns a disjoint set of
// fields and writes them with one merge patch per reconcile, so the writers never overwrite
// each other:
//
//   - WriterEtcd (the Etcd reconciler): observedGeneration, lastErrors;
//   - WriterOnDelete (the OnDelete controller): lastOperation;
//   - WriterStatus (the status controller): members, conditions, replicas, readyReplicas,
//     currentReplicas, ready, selector.
type Writer string

const (
	WriterEtcd     Writer = "etcd"
	WriterOnDelete Writer = "ondelete"
	WriterStatus   Writer = "status"
)

// withoutOwned clears, in a copy of s, the fields w owns; what is left must not change in a write.
func (w Writer) withoutOwned(s druidv1alpha1.EtcdStatus) (druidv1alpha1.EtcdStatus, error) {
	switch w {
	case WriterEtcd:
		s.ObservedGeneration, s.LastErrors = nil, nil
	case WriterOnDelete:
		s.LastOperation = nil
	case WriterStatus:
		s.Members, s.Conditions, s.Replicas, s.ReadyReplicas, s.CurrentReplicas, s.Ready, s.Selector = nil, nil, 0, 0, 0, nil, nil
	default:
		return s, fmt.Errorf("unknown Etcd status writer %q", w)
	}
	return s, nil
}

// Patch sets, through set, the status fields w owns on etcd and writes them with one merge
// patch. A set that touches a field w does not own is a programming error and is refused
// before anything is written.
func Patch(ctx context.Context, c client.Client, etcd *druidv1alpha1.Etcd, w Writer, set func(*druidv1alpha1.EtcdStatus)) error {
	before := etcd.DeepCopy()
	set(&etcd.Status)
	othersBefore, err := w.withoutOwned(before.Status)
	if err != nil {
		return err
	}
	othersAfter, _ := w.withoutOwned(etcd.Status)
	if !equality.Semantic.DeepEqual(othersBefore, othersAfter) {
		etcd.Status = before.Status
		return fmt.Errorf("the %s controller changed Etcd status fields it does not own", w)
	}
	if err := c.Status().Patch(ctx, etcd, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patching status of Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return nil
}
