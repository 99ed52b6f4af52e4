package membership

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// seededLearner tells whether the learner of pod holds data that did not come from the leader
// alone, as its pod's current incarnation reports on the member Lease: seeded from the backup
// store's latest full snapshot, or started on data it already had (a seed perhaps, the pod
// having restarted since). A report of another incarnation, or none, says nothing.
func seededLearner(etcd *druidv1alpha1.Etcd, pod *corev1.Pod, leases []coordinationv1.Lease) bool {
	if pod == nil {
		return false
	}
	lease := resources.MemberNameOf(etcd, pod.Name)
	for i := range leases {
		if leases[i].Name != lease {
			continue
		}
		report, ok := memberlease.ParseStartReport(leases[i].Annotations)
		return ok && report.PodUID == string(pod.UID) && (report.Seeded || report.Data == memberlease.DataValid)
	}
	return false
}

// WithKeyspaces adds the keyspace comparisons (by member ID, as CompareKeyspace answers) to the
// observation's members; the members are copied, as in WithHeard.
func WithKeyspaces(o membership.Observed, compared map[uint64]*membership.KeyspaceComparison) membership.Observed {
	if len(compared) == 0 {
		return o
	}
	members := make([]membership.Member, len(o.Members))
	copy(members, o.Members)
	for i := range members {
		if k, ok := compared[members[i].ID]; ok {
			members[i].Keyspace = k
		}
	}
	o.Members = members
	return o
}

// CompareKeyspace digests the learner's keyspace and the leader's at one revision, the lower of
// their current ones (the learner may lag), each read serializably from the member itself: a
// learner serves no HashKV and no linearizable read, and the leader's own copy is what is
// compared. A revision compacted meanwhile, or a member that does not answer, gives a comparison
// not made (the learner waits and is compared again at the next pass), never a mismatch.
func CompareKeyspace(ctx context.Context, members *memberaccess.Cluster, cs *memberaccess.ClusterStatus, learner *membership.Member) *membership.KeyspaceComparison {
	failed := func(rev int64, err error) *membership.KeyspaceComparison {
		return &membership.KeyspaceComparison{Revision: rev, Error: err.Error()}
	}
	if cs == nil {
		return failed(0, errors.New("no member answered"))
	}
	leader, ok := cs.Leader()
	if !ok {
		return failed(0, errors.New("no member answers as leader"))
	}
	var own *memberaccess.MemberStatus
	for i := range cs.Members {
		if s := &cs.Members[i]; s.Reachable && s.ID == learner.ID {
			own = s
		}
	}
	if own == nil {
		return failed(0, fmt.Errorf("learner %s did not answer", learner.Name))
	}
	rev := min(leader.Revision, own.Revision)
	digest := func(name string) (string, error) {
		conn, err := members.Member(name)
		if err != nil {
			return "", err
		}
		d, err := conn.LocalKeyspaceDigest(ctx, rev)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d keys, sum %.16s", d.Keys, d.Sum), nil
	}
	ofLearner, err := digest(learner.Name)
	if err != nil {
		return failed(rev, err)
	}
	ofLeader, err := digest(leader.Name)
	if err != nil {
		return failed(rev, err)
	}
	return &membership.KeyspaceComparison{Compared: true, Revision: rev, Learner: ofLearner, Leader: ofLeader}
}

// deletePod deletes the pod of a learner just removed, so that its init step runs again.
func (r *Reconciler) deletePod(ctx context.Context, namespace, name string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := r.cfg.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// compareSeed is CompareKeyspace for the learner, once: a match is remembered (seedMatched).
func (r *Reconciler) compareSeed(ctx context.Context, etcd *druidv1alpha1.Etcd, creds conductortls.ClientMaterial, tgts []memberaccess.Target,
	cs *memberaccess.ClusterStatus, learner *membership.Member) *membership.KeyspaceComparison {
	key := memberaccess.PoolKey(etcd.Namespace, etcd.Name, memberaccess.ForMembership) + "/" + strconv.FormatUint(learner.ID, 16)
	r.mu.Lock()
	matched := r.seedMatched[key]
	r.mu.Unlock()
	if matched != nil {
		return matched
	}
	compared := CompareKeyspace(ctx, r.members(etcd, tgts, creds), cs, learner)
	if compared.Match() {
		r.mu.Lock()
		r.seedMatched[key] = compared
		r.mu.Unlock()
	}
	return compared
}
