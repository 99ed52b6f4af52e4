package membership

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// PeerURLs are the peer URLs the member of ordinal i advertises as a pod of the StatefulSet's
// template would: its scheme follows internal/decide/transport's stage, its additional URLs are the
// template's (the spec's before there is one). A learner is added with these, so the pod created
// for it from that template finds itself in the member list as it advertises itself.
func PeerURLs(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, ordinal int) []string {
	pod := resources.PodName(etcd, ordinal)
	scheme := resources.PeerScheme(resources.TransportOf(etcd))
	if stages, ok := resources.RunningTransport(sts); ok {
		scheme = resources.PeerScheme(stages)
	}
	extra, ok := resources.RunningAdditionalPeerURLs(etcd, sts, pod)
	if !ok {
		extra = resources.AdditionalPeerURLs(etcd, pod)
	}
	return append([]string{resources.ServicePeerURL(etcd, scheme, pod)}, extra...)
}

// podPeerURLs are the peer URLs member ordinal's pod advertises, nil when they are not known: the
// pod runs the StatefulSet's current template (its revision label), whose flags say (the scheme,
// the additional URLs). The pod's own spec is not in the manager's cache (memberPodView).
func podPeerURLs(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pod *corev1.Pod) []string {
	if pod == nil || !pod.DeletionTimestamp.IsZero() || sts.Status.UpdateRevision == "" ||
		pod.Labels[appsv1.StatefulSetRevisionLabel] != sts.Status.UpdateRevision {
		return nil
	}
	stages, ok := resources.RunningTransport(sts)
	if !ok {
		return nil
	}
	extra, ok := resources.RunningAdditionalPeerURLs(etcd, sts, pod.Name)
	if !ok {
		return nil
	}
	return append([]string{resources.ServicePeerURL(etcd, resources.PeerScheme(stages), pod.Name)}, extra...)
}

// memberPod names the pod a member stands for and its ordinal: the pod its etcd member name maps
// to (resources.PodOfMember: <prefix>-<pod> with spec.memberNamePrefix), or else the pod one of
// its peer URLs names under the peer Service. The second covers a learner that has not started
// (etcd knows only its peer URLs) and is the safety net for a member whose name does not map:
// etcd admits no peer URL twice, so a member dialled at a pod's name under this Etcd's peer
// Service is that pod's member whatever it is called, and is never taken for a foreign one. A
// member neither way maps gets its own name (for messages only) and -1, which the planner treats
// as standing for no pod (removed only after SuperfluousGrace, as it always was).
func memberPod(etcd *druidv1alpha1.Etcd, m memberaccess.EtcdMember) (string, int) {
	if pod, ok := resources.PodOfMember(etcd, m.Name); ok {
		ordinal, _ := resources.OrdinalOf(etcd, pod)
		return pod, ordinal
	}
	suffix := "." + resources.PeerServiceName(etcd) + "." + etcd.Namespace + ".svc"
	for _, raw := range m.PeerURLs {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		host, ok := strings.CutSuffix(u.Hostname(), suffix)
		if !ok {
			continue
		}
		if ordinal, ok := resources.OrdinalOf(etcd, host); ok {
			return host, ordinal
		}
	}
	return m.Name, -1
}

// Observe builds the planner's input from the Etcd, the StatefulSet, pods, leases and what the
// members said (cs is nil when no member answered). It reads nothing itself, so `plan` runs the
// very same observation on a saved state and saved member answers. SuperfluousGrace, the members'
// SeenFor and which voters the leader hears (WithHeard) are the caller's to add: they come from
// the controller's configuration, its memory and a further question. waitForBackupReady is the
// operator's switch (package backupgate).
func Observe(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pods []corev1.Pod, leases []coordinationv1.Lease, cs *memberaccess.ClusterStatus, waitForBackupReady bool) membership.Observed {
	o := membership.Observed{
		Desired:      int(etcd.Spec.Replicas),
		Bootstrapped: etcd.Status.ClusterID != "",
		Backup:       backupgate.Of(etcd, waitForBackupReady),
	}
	if sts.Spec.Replicas != nil {
		o.StatefulSetReplicas = int(*sts.Spec.Replicas)
	}
	podsByName := map[string]*corev1.Pod{}
	revisions := make([]operation.Pod, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		podsByName[p.Name] = p
		revisions = append(revisions, operation.Pod{Revision: p.Labels[appsv1.StatefulSetRevisionLabel], Terminating: !p.DeletionTimestamp.IsZero()})
	}
	o.RolloutInFlight = operation.RolloutInFlight(sts.Status.UpdateRevision, revisions)
	// Not the strategy hold: it waits for updated pods to be ready, and a learner's pod is not
	// until it is promoted. A membership change deletes no pod the hold protects.
	o.Operations = operation.Of(etcd).Except(operation.KindScale).Except(operation.KindStrategyHold)
	lostID := map[string]string{}
	for _, l := range leases {
		pod, ours := resources.PodOfMember(etcd, l.Name)
		if id := l.Annotations[memberlease.AnnotationDataLostMemberID]; id != "" && ours {
			lostID[pod] = id
		}
	}
	if cs == nil || cs.MemberList == nil {
		return o
	}
	o.MembersKnown = true
	healthy := map[uint64]bool{}
	var leaderID uint64
	for _, s := range cs.Members {
		if s.Reachable {
			healthy[s.ID] = true
			if s.IsLeader() {
				leaderID = s.ID
			}
		}
	}
	for _, m := range cs.MemberList {
		name, ordinal := memberPod(etcd, m)
		member := membership.Member{
			ID: m.ID, Name: name, Ordinal: ordinal, Learner: m.IsLearner,
			Started: len(m.ClientURLs) > 0, Healthy: healthy[m.ID], Leader: m.ID != 0 && m.ID == leaderID,
		}
		if pod := podsByName[name]; ordinal >= 0 && pod != nil && pod.DeletionTimestamp.IsZero() && lostID[name] == strconv.FormatUint(m.ID, 16) {
			member.DataLost = true
		}
		if member.Learner && ordinal >= 0 {
			member.Seeded = seededLearner(etcd, podsByName[name], leases)
		}
		member.PeerURLs = slices.Clone(m.PeerURLs)
		if ordinal >= 0 {
			member.PodPeerURLs = podPeerURLs(etcd, sts, podsByName[name])
		}
		o.Members = append(o.Members, member)
	}
	return o
}

// WithHeard marks the voters the leader hears (heard, by member ID, as Hear answers). A nil heard
// means not asked and leaves HeardKnown false, so the planner holds every step that counts a
// quorum. The members are copied: the observation heard is added to may still be planned on.
func WithHeard(o membership.Observed, heard map[uint64]bool) membership.Observed {
	if heard == nil {
		return o
	}
	o.HeardKnown = true
	o.Members = slices.Clone(o.Members)
	for i := range o.Members {
		o.Members[i].Heard = heard[o.Members[i].ID]
	}
	return o
}

// clusterID is the cluster ID a reachable member reports, "" if none.
func clusterID(cs *memberaccess.ClusterStatus) string {
	if cs == nil {
		return ""
	}
	for _, s := range cs.Members {
		if s.Reachable && s.ClusterID != 0 {
			return strconv.FormatUint(s.ClusterID, 16)
		}
	}
	return ""
}
