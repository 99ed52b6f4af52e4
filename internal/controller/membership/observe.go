package membership

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
)

// PeerURL is the peer URL of the member of ordinal i as a pod of the StatefulSet's template
// advertises it (its scheme follows internal/transport's stage).
func PeerURL(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, ordinal int) string {
	scheme := resources.PeerScheme(resources.TransportOf(etcd))
	if stages, ok := resources.RunningTransport(sts); ok {
		scheme = resources.PeerScheme(stages)
	}
	return peerURL(etcd, scheme, ordinal)
}

func peerURL(etcd *druidv1alpha1.Etcd, scheme string, ordinal int) string {
	return fmt.Sprintf("%s://%s:%d", scheme, resources.MemberDNSName(etcd.Name, etcd.Namespace, resources.MemberName(etcd, ordinal)), resources.ServerPort(etcd))
}

// podPeerURL is the peer URL member ordinal's pod listens on, "" when that is not known: the
// pod runs the StatefulSet's current template (its revision label), whose flags say. The pod's
// own spec is not in the manager's cache (memberPodView).
func podPeerURL(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) string {
	if pod == nil || !pod.DeletionTimestamp.IsZero() || sts.Status.UpdateRevision == "" ||
		pod.Labels[appsv1.StatefulSetRevisionLabel] != sts.Status.UpdateRevision {
		return ""
	}
	stages, ok := resources.RunningTransport(sts)
	if !ok {
		return ""
	}
	return peerURL(etcd, resources.PeerScheme(stages), ordinal)
}

// memberPod names the pod a member stands for: its etcd name, or for a learner that has not
// started, the pod its peer URL names. It returns "" and -1 for a member of no pod of this Etcd.
func memberPod(etcd *druidv1alpha1.Etcd, m etcdclient.Member) (string, int) {
	name := m.Name
	if name == "" {
		suffix := "." + resources.PeerServiceName(etcd) + "." + etcd.Namespace + ".svc"
		for _, raw := range m.PeerURLs {
			if u, err := url.Parse(raw); err == nil && strings.HasSuffix(u.Hostname(), suffix) {
				name = strings.TrimSuffix(u.Hostname(), suffix)
			}
		}
	}
	ordinal, ok := resources.OrdinalOf(etcd, name)
	if !ok {
		return name, -1
	}
	return name, ordinal
}

// Observe builds the planner's input from the Etcd, the StatefulSet, pods, leases and what the
// members said (cs is nil when no member answered). It reads nothing itself, so `plan` runs the
// very same observation on a saved state and saved member answers. SuperfluousGrace, the members'
// SeenFor and which voters the leader hears (WithHeard) are the caller's to add: they come from
// the controller's configuration, its memory and a further question. waitForBackupReady is the
// operator's switch (package backupgate).
func Observe(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pods []corev1.Pod, leases []coordinationv1.Lease, cs *etcdclient.ClusterStatus, waitForBackupReady bool) membership.Observed {
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
		if id := l.Annotations[memberlease.AnnotationDataLostMemberID]; id != "" {
			lostID[l.Name] = id
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
		if pod := podsByName[name]; pod != nil && pod.DeletionTimestamp.IsZero() && lostID[name] == strconv.FormatUint(m.ID, 16) {
			member.DataLost = true
		}
		if len(m.PeerURLs) > 0 {
			member.PeerURL = m.PeerURLs[0]
		}
		if ordinal >= 0 {
			member.PodPeerURL = podPeerURL(etcd, sts, podsByName[name], ordinal)
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
func clusterID(cs *etcdclient.ClusterStatus) string {
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
