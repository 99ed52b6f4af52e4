package rollout

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
)

// Observe converts API objects into the planner's input. pods must already be the
// StatefulSet's pods (the caller selects them); roles maps pod names to roles, and a pod
// without an entry gets RoleUnknown. The result lists pods by ordinal, then name.
func Observe(sts *appsv1.StatefulSet, pods []corev1.Pod, roles map[string]Role) Observed {
	o := Observed{
		UpdateRevision: sts.Status.UpdateRevision,
		// The API server defaults spec.replicas to 1; nil only shows up in hand-made objects.
		StatefulSetReplicas: 1,
		Pods:                make([]PodState, 0, len(pods)),
	}
	if sts.Spec.Replicas != nil {
		o.StatefulSetReplicas = int(*sts.Spec.Replicas)
	}
	templates := make([]string, 0, len(sts.Spec.VolumeClaimTemplates))
	for _, c := range sts.Spec.VolumeClaimTemplates {
		templates = append(templates, c.Name)
	}
	for i := range pods {
		pod := &pods[i]
		role, ok := roles[pod.Name]
		if !ok || role == "" {
			role = RoleUnknown
		}
		o.Pods = append(o.Pods, PodState{
			Name:             pod.Name,
			Ordinal:          podOrdinal(sts.Name, pod),
			UID:              string(pod.UID),
			ResourceVersion:  pod.ResourceVersion,
			Revision:         pod.Labels[appsv1.StatefulSetRevisionLabel],
			Terminating:      pod.DeletionTimestamp != nil,
			Participating:    isParticipating(pod),
			Container:        ClassifyContainer(pod),
			Role:             role,
			HandoverFailures: handoverFailures(pod),
			HandoverFailedTo: HandoverFailedTo(pod),
			NewVolume:        movesToNewClaim(templates, pod),
		})
	}
	sortPods(o.Pods)
	return o
}

// movesToNewClaim tells whether pod mounts a claim made from a template ("<template>-<pod>")
// that the StatefulSet no longer has: its replacement gets a claim of the StatefulSet's template,
// new and empty.
func movesToNewClaim(templates []string, pod *corev1.Pod) bool {
	if len(templates) == 0 {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == v.Name+"-"+pod.Name && !slices.Contains(templates, v.Name) {
			return true
		}
	}
	return false
}

// podOrdinal prefers the pod-index label the StatefulSet controller sets and falls back to the
// name, so pods created before that label existed still get their ordinal.
func podOrdinal(stsName string, pod *corev1.Pod) int {
	if v, ok := pod.Labels[appsv1.PodIndexLabel]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	suffix, ok := strings.CutPrefix(pod.Name, stsName+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 0 || strconv.Itoa(n) != suffix {
		return -1
	}
	return n
}

func sortPods(pods []PodState) {
	sort.SliceStable(pods, func(i, j int) bool {
		if pods[i].Ordinal != pods[j].Ordinal {
			return pods[i].Ordinal < pods[j].Ordinal
		}
		return pods[i].Name < pods[j].Name
	})
}

// handoverFailures reads AnnotationHandoverFailures; anything but a positive count is 0.
func handoverFailures(pod *corev1.Pod) int {
	n, err := strconv.Atoi(pod.Annotations[AnnotationHandoverFailures])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// HandoverFailedTo reads AnnotationHandoverFailedTo: the names it lists, without blanks.
func HandoverFailedTo(pod *corev1.Pod) []string {
	var names []string
	for _, n := range strings.Split(pod.Annotations[AnnotationHandoverFailedTo], ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// WithMembers returns o with what the members said about themselves, by pod name; pods
// without an entry keep the zero MemberStatus (not asked, or no answer).
func (o Observed) WithMembers(members map[string]MemberStatus) Observed {
	return o.withEachPod(func(p PodState) PodState {
		p.Member = members[p.Name]
		return p
	})
}

// withEachPod returns o with each pod replaced by what f makes of it; o's own slice is left as
// it was, since callers plan on both.
func (o Observed) withEachPod(f func(PodState) PodState) Observed {
	out := o
	out.Pods = make([]PodState, len(o.Pods))
	for i, p := range o.Pods {
		out.Pods[i] = f(p)
	}
	return out
}

// WithOperations sets the other operations in flight on the Etcd.
func (o Observed) WithOperations(ops operation.Set) Observed {
	o.Operations = ops.Except(operation.KindRollout)
	return o
}

// WithBackup sets whether voluntary disruptions wait for the Etcd's backup (backupgate.Of).
func (o Observed) WithBackup(g backupgate.Gate) Observed {
	o.Backup = g
	return o
}

// WithPolicy returns o planned under policy p.
func (o Observed) WithPolicy(p Policy) Observed {
	o.Policy = p
	return o
}

// AwaitingRejoin names the pods whose own linearizable read could show them back in the quorum
// ahead of their readiness probe: updated pods in range, not terminating and no learner, whose
// etcd container runs but is not Ready yet. It is empty unless o.Policy.RejoinByRead, and while
// no outdated pod is left to replace (nothing would wait on them).
func AwaitingRejoin(o Observed) []string { return o.namesOf(o.awaitingRejoin) }

// namesOf names the pods keep selects, in o's order.
func (o Observed) namesOf(keep func(PodState) bool) []string {
	var out []string
	for _, p := range o.Pods {
		if keep(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

func (o Observed) awaitingRejoin(p PodState) bool {
	if !o.Policy.RejoinByRead || o.UpdateRevision == "" || IsOutdated(p, o.UpdateRevision) ||
		!slices.ContainsFunc(o.Pods, func(q PodState) bool { return IsOutdated(q, o.UpdateRevision) }) {
		return false
	}
	return p.Ordinal >= 0 && p.Ordinal < o.StatefulSetReplicas && !p.Terminating && !p.Participating && !p.Member.Learner &&
		p.Container == ContainerAlive
}

// WithRejoinProven returns o with the pods named in served, those that served the controller a
// linearizable read, counted as participating. Only pods AwaitingRejoin selects are changed, so
// a read can never make an outdated, terminating or not-running pod count, nor a Ready one less.
func (o Observed) WithRejoinProven(served []string) Observed {
	return o.withEachPod(func(p PodState) PodState {
		if slices.Contains(served, p.Name) && o.awaitingRejoin(p) {
			p.Participating, p.RejoinProven = true, true
		}
		return p
	})
}

// HandoverSuspects names the members a failed handover went to (AnnotationHandoverFailedTo on a
// pod still there) that look participating: in range, not terminating, no learner, Ready.
// Whether the leader hears them is in doubt, and their readiness probe may not have failed yet,
// so the controller asks each for a linearizable read (it needs the leader to answer) before a
// deletion counts on them.
func HandoverSuspects(o Observed) []string { return o.namesOf(o.handoverSuspect) }

func (o Observed) handoverSuspect(p PodState) bool {
	if p.Ordinal < 0 || p.Ordinal >= o.StatefulSetReplicas || p.Terminating || !p.Participating || p.Member.Learner {
		return false
	}
	return slices.ContainsFunc(o.Pods, func(q PodState) bool { return slices.Contains(q.HandoverFailedTo, p.Name) })
}

// WithUnheard returns o with the pods named in unheard, those HandoverSuspects selects that did
// not serve the controller a linearizable read, marked Unheard. They keep their readiness (the
// handover to another member may go on); deletions wait for them (wait/handover-target-unheard).
func (o Observed) WithUnheard(unheard []string) Observed {
	return o.withEachPod(func(p PodState) PodState {
		if slices.Contains(unheard, p.Name) && o.handoverSuspect(p) {
			p.Unheard = true
		}
		return p
	})
}
