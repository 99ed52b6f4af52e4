package rollout

import (
	"strconv"
	"strings"
)

const (
	newRev = "etcd-main-7d9f8c6b5"
	oldRev = "etcd-main-5b4c7d8e9"
)

// podBuilder makes PodStates for the tables. A fresh pod is updated, participating, alive and a
// follower; the methods change one aspect each.
type podBuilder struct{ p PodState }

func pod(name string) *podBuilder {
	ordinal := -1
	if i := strings.LastIndex(name, "-"); i >= 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			ordinal = n
		}
	}
	return &podBuilder{p: PodState{
		Name: name, Ordinal: ordinal, UID: "uid-" + name, ResourceVersion: "1",
		Revision: newRev, Participating: true, Container: ContainerAlive, Role: RoleFollower,
	}}
}

func (b *podBuilder) outdated() *podBuilder         { b.p.Revision = oldRev; return b }
func (b *podBuilder) revision(r string) *podBuilder { b.p.Revision = r; return b }
func (b *podBuilder) ordinal(n int) *podBuilder     { b.p.Ordinal = n; return b }
func (b *podBuilder) leader() *podBuilder           { b.p.Role = RoleLeader; return b }
func (b *podBuilder) follower() *podBuilder         { b.p.Role = RoleFollower; return b }
func (b *podBuilder) unknownRole() *podBuilder      { b.p.Role = RoleUnknown; return b }
func (b *podBuilder) terminating() *podBuilder      { b.p.Terminating = true; return b }

// reported makes the member answer with applied index i; learner marks a non-voting member.
func (b *podBuilder) reported(i uint64) *podBuilder {
	b.p.Member.Reported, b.p.Member.AppliedIndex = true, i
	return b
}
func (b *podBuilder) learner() *podBuilder               { b.p.Member.Learner = true; return b }
func (b *podBuilder) handoverFailures(n int) *podBuilder { b.p.HandoverFailures = n; return b }

// handoverFailedTo records failed handovers to the named members, one failure each.
func (b *podBuilder) handoverFailedTo(names ...string) *podBuilder {
	b.p.HandoverFailures, b.p.HandoverFailedTo = len(names), names
	return b
}

// newVolume marks a pod whose replacement comes back on a new, empty claim (a volume change).
func (b *podBuilder) newVolume() *podBuilder { b.p.NewVolume = true; return b }

// unheard marks a member a failed handover went to that did not serve a read.
func (b *podBuilder) unheard() *podBuilder { b.p.Unheard = true; return b }

// The container states below all make the pod non-participating.
func (b *podBuilder) dead() *podBuilder      { return b.notReady(ContainerDead) }
func (b *podBuilder) transient() *podBuilder { return b.notReady(ContainerTransient) }
func (b *podBuilder) unready() *podBuilder   { return b.notReady(ContainerAlive) }
func (b *podBuilder) unknownContainer() *podBuilder {
	return b.notReady(ContainerUnknown)
}

func (b *podBuilder) notReady(c ContainerClass) *podBuilder {
	b.p.Participating = false
	b.p.Container = c
	return b
}

func (b *podBuilder) build() PodState { return b.p }

func observed(replicas int, pods ...*podBuilder) Observed {
	o := Observed{UpdateRevision: newRev, StatefulSetReplicas: replicas}
	for _, b := range pods {
		o.Pods = append(o.Pods, b.build())
	}
	return o
}

// withPolicy plans o under p.
func withPolicy(o Observed, p Policy) Observed { o.Policy = p; return o }
