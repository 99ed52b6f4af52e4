package ondelete

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Handover outcomes, the values of the outcome label.
const (
	HandoverSucceeded   = "succeeded"
	HandoverFailed      = "failed"
	HandoverTimedOut    = "timeout"
	HandoverUnconfirmed = "unconfirmed"
)

// confirmInterval is how often the members are asked who leads while a handover is confirmed.
const confirmInterval = 50 * time.Millisecond

// handover carries out a handover decision: MoveLeader sent to the leader itself (bounded by
// HandoverTimeout), then the members' Status polled until the target leads (bounded again). It
// reports true once the target is confirmed. A failure is counted on the leader's pod
// (rollout.AnnotationHandoverFailures, and the target in rollout.AnnotationHandoverFailedTo),
// so the planner, which stays pure, tries another target next and, once the attempts are used
// up, falls back to deleting the leader; it is also an Event and a metric.
func (r *Reconciler) handover(ctx context.Context, etcd *druidv1alpha1.Etcd, o decision.Outcome) bool {
	d := o.Decision
	from, to := d.Pods[0], d.HandoverTo
	log := logr.FromContextOrDiscard(ctx).WithValues("from", from, "to", to)
	start := r.now()
	err := r.moveAndConfirm(ctx, etcd, o, from, to)
	elapsed := r.now().Sub(start)
	outcome := handoverOutcome(err)
	r.cfg.Metrics.Handovers.WithLabelValues(etcd.Namespace, etcd.Name, to, outcome).Inc()
	r.cfg.Metrics.HandoverDuration.WithLabelValues(outcome).Observe(elapsed.Seconds())
	if err == nil {
		r.handedOver.record(etcdKey(etcd), r.now())
		log.Info("Leadership handed over", "duration", elapsed)
		r.cfg.Recorder.Eventf(etcd, corev1.EventTypeNormal, "LeadershipHandedOver",
			"leadership moved from %s to %s in %s, confirmed by the members; %s is deleted next as a follower [%s]",
			from, to, elapsed.Round(time.Millisecond), from, d.Rule)
		return true
	}
	attempts := failuresOf(o.Pods, from) + 1
	var failedTo []string
	if pod := resources.FindPod(o.Pods, from); pod != nil {
		failedTo = appendNew(rollout.HandoverFailedTo(pod), to)
		r.failures.record(etcdKey(etcd), pod.UID, failedRecord{count: attempts, to: failedTo})
	}
	log.Info("Leadership handover failed", "attempt", attempts, "outcome", outcome, "error", err.Error())
	r.cfg.Recorder.Eventf(etcd, corev1.EventTypeWarning, "HandoverFailed",
		"moving leadership from %s to %s failed after %s (%s, attempt %d of %d): %v",
		from, to, elapsed.Round(time.Millisecond), outcome, attempts, max(r.cfg.Policy.HandoverAttempts, 1), err)
	if err := r.recordHandoverFailure(ctx, o.Pods, from, failedRecord{count: attempts, to: failedTo}); err != nil {
		// Not fatal: the next attempt is one more try; the planner's bound still holds once a
		// record gets through.
		log.Info("Could not record the failed handover on the pod", "error", err.Error())
	}
	return false
}

// moveAndConfirm sends MoveLeader to from and waits until the members say to leads.
func (r *Reconciler) moveAndConfirm(ctx context.Context, etcd *druidv1alpha1.Etcd, o decision.Outcome, from, to string) error {
	toID, err := memberID(o.Reports, to)
	if err != nil {
		return err
	}
	creds, err := r.cfg.Access.ClientTLS(ctx, etcd)
	if err != nil {
		return fmt.Errorf("member client TLS: %w", err)
	}
	members := memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembers, creds, memberaccess.Targets(etcd, o.Pods))

	moveCtx, cancel := context.WithTimeout(ctx, r.cfg.HandoverTimeout)
	defer cancel()
	moveErr := members.MoveLeader(moveCtx, from, toID)
	confirmCtx, cancelConfirm := context.WithTimeout(ctx, r.cfg.HandoverTimeout)
	defer cancelConfirm()
	var last string
	for {
		leads, why := leads(confirmCtx, members, to, toID)
		if leads {
			// Also after a failed call: leadership may have reached the target anyway (a call
			// that timed out late, or a transfer already under way), and then nothing failed.
			return nil
		}
		if moveErr != nil {
			return moveErr
		}
		last = why
		select {
		case <-confirmCtx.Done():
			return &unconfirmedError{to: to, last: last, timeout: r.cfg.HandoverTimeout}
		case <-time.After(confirmInterval):
		}
	}
}

// leads asks the members whether to (member toID) leads: it must say so itself and a majority of
// the members that answer must follow it.
func leads(ctx context.Context, members *memberaccess.Cluster, to string, toID uint64) (bool, string) {
	cs, err := members.Statuses(ctx)
	if err != nil {
		return false, err.Error()
	}
	agree, answered := 0, 0
	leads := false
	for _, m := range cs.Members {
		if !m.Reachable {
			continue
		}
		answered++
		if m.LeaderID == toID {
			agree++
		}
		if m.Name == to && m.IsLeader() {
			leads = true
		}
	}
	if leads && 2*agree > answered {
		return true, ""
	}
	return false, fmt.Sprintf("%d of %d answering members follow %s, target leads: %v", agree, answered, to, leads)
}

// unconfirmedError: MoveLeader returned but the members did not report the new leader in time.
type unconfirmedError struct {
	to, last string
	timeout  time.Duration
}

func (e *unconfirmedError) Error() string {
	return fmt.Sprintf("%s not confirmed as leader within %s: %s", e.to, e.timeout, e.last)
}

func handoverOutcome(err error) string {
	var unconfirmed *unconfirmedError
	switch {
	case err == nil:
		return HandoverSucceeded
	case errors.As(err, &unconfirmed):
		return HandoverUnconfirmed
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded,
		// The stubs return gRPC errors as they come; etcd's timeouts ("request timed out, …") by their text.
		strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCTimeout)):
		return HandoverTimedOut
	default:
		return HandoverFailed
	}
}

// memberID finds the etcd member ID of pod name among the reports the decision was made on.
func memberID(reports []roles.MemberReport, name string) (uint64, error) {
	for _, r := range reports {
		if r.Name != name {
			continue
		}
		id, err := strconv.ParseUint(r.ID, 16, 64)
		if err != nil || id == 0 {
			return 0, fmt.Errorf("member %s reported no usable ID (%q)", name, r.ID)
		}
		return id, nil
	}
	return 0, fmt.Errorf("member %s is not among the members' reports", name)
}

func failuresOf(pods []corev1.Pod, name string) int {
	if p := resources.FindPod(pods, name); p != nil {
		n, err := strconv.Atoi(p.Annotations[rollout.AnnotationHandoverFailures])
		if err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// leaseCatchUp is how long after a confirmed handover a member Lease may still name the old
// roles: up to one renewal of the member agent (memberlease.DefaultRenewInterval), twice for a late one.
const leaseCatchUp = 2 * memberlease.DefaultRenewInterval

// handoverTimes remembers, by cluster, when a handover was last confirmed. A restart forgets
// it: a mismatch then is reported as any other.
type handoverTimes struct {
	mu        sync.Mutex
	byCluster map[string]time.Time
}

func (h *handoverTimes) record(cluster string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byCluster == nil {
		h.byCluster = map[string]time.Time{}
	}
	h.byCluster[cluster] = at
}

// within reports whether the cluster's last handover was confirmed less than d before now.
func (h *handoverTimes) within(cluster string, now time.Time, d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.byCluster[cluster]
	return ok && now.Sub(at) < d
}

// failedRecord is what is known of the failed handovers from one leader pod: how many, and to
// which members (the two annotations).
type failedRecord struct {
	count int
	to    []string
}

// annotate writes the record into annotations.
func (f failedRecord) annotate(annotations map[string]string) {
	annotations[rollout.AnnotationHandoverFailures] = strconv.Itoa(f.count)
	annotations[rollout.AnnotationHandoverFailedTo] = strings.Join(f.to, ",")
}

// appendNew appends name unless names holds it already.
func appendNew(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

// handoverFailures is the in-memory copy of the failure records, by cluster and pod UID. A new
// pod (a new UID) starts from nothing, like its annotations; a restart forgets it, and the
// annotations remain.
type handoverFailures struct {
	mu        sync.Mutex
	byCluster map[string]map[types.UID]failedRecord
}

func (f *handoverFailures) record(cluster string, uid types.UID, rec failedRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCluster[cluster] == nil {
		f.byCluster[cluster] = map[types.UID]failedRecord{}
	}
	if rec.count > f.byCluster[cluster][uid].count {
		f.byCluster[cluster][uid] = rec
	}
}

// apply returns the cluster's pods with each pod's failure annotations at least what is
// remembered, so the planner sees failures that could not be written to the pod. Entries of
// pods that are gone are dropped.
func (f *handoverFailures) apply(cluster string, pods []corev1.Pod) []corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	remembered := f.byCluster[cluster]
	if len(remembered) == 0 {
		return pods
	}
	out := make([]corev1.Pod, len(pods))
	present := map[types.UID]bool{}
	for i, p := range pods {
		out[i] = p
		present[p.UID] = true
		if rec := remembered[p.UID]; rec.count > failuresOf(pods[i:i+1], p.Name) {
			copied := p.DeepCopy()
			if copied.Annotations == nil {
				copied.Annotations = map[string]string{}
			}
			rec.annotate(copied.Annotations)
			out[i] = *copied
		}
	}
	for uid := range remembered {
		if !present[uid] {
			delete(remembered, uid)
		}
	}
	return out
}

// recordHandoverFailure writes the failure record on the leader's pod; the UID and
// resourceVersion it was read at make a stale write fail instead of counting twice.
func (r *Reconciler) recordHandoverFailure(ctx context.Context, pods []corev1.Pod, name string, failures failedRecord) error {
	pod := resources.FindPod(pods, name)
	if pod == nil {
		return fmt.Errorf("pod %s not found", name)
	}
	patched := pod.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	failures.annotate(patched.Annotations)
	if err := r.cfg.Client.Patch(ctx, patched, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording handover failure on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// recordLeaderDeletions counts and explains a deletion of a pod that still leads: the handover
// was off, impossible or failed (the rule says which), and etcd's shutdown handover applies.
func (r *Reconciler) recordLeaderDeletions(etcd *druidv1alpha1.Etcd, o decision.Outcome) {
	for _, name := range o.Decision.Pods {
		if o.Resolution.Roles[name] != rollout.RoleLeader {
			continue
		}
		r.cfg.Metrics.LeaderDeletions.WithLabelValues(etcd.Namespace, etcd.Name, string(o.Decision.Rule)).Inc()
		r.cfg.Recorder.Eventf(etcd, corev1.EventTypeWarning, "LeaderDeleted",
			"deleting %s while it leads (%s): %s; etcd's own shutdown handover applies", name, o.Decision.Rule, o.Decision.Reason)
	}
}

// observeLags publishes each member's applied-index lag behind the leader, when the members
// were asked for this decision.
func (r *Reconciler) observeLags(etcd *druidv1alpha1.Etcd, o decision.Outcome) {
	var leader uint64
	for _, rep := range o.Reports {
		if rep.Reachable && rep.ID != "" && rep.ID == rep.LeaderID {
			leader = rep.AppliedIndex
		}
	}
	if leader == 0 {
		return
	}
	// Members that left (scale-in, a renamed pod) must not keep their last value.
	r.cfg.Metrics.AppliedIndexLag.DeletePartialMatch(prometheus.Labels{"namespace": etcd.Namespace, "etcd": etcd.Name})
	for _, rep := range o.Reports {
		if !rep.Reachable || rep.AppliedIndex == 0 {
			continue
		}
		lag := 0.0
		if rep.AppliedIndex < leader {
			lag = float64(leader - rep.AppliedIndex)
		}
		r.cfg.Metrics.AppliedIndexLag.WithLabelValues(etcd.Namespace, etcd.Name, rep.Name).Set(lag)
	}
}

// etcdKey names an Etcd in what the controller remembers of it (handovers, failed ones).
func etcdKey(etcd *druidv1alpha1.Etcd) string { return client.ObjectKeyFromObject(etcd).String() }
