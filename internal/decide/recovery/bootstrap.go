package recovery

import (
	"fmt"
	"sort"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// planBootstrap decides for a new Etcd whose members found a backup in their store: the cluster
// starts from that backup (what etcd-druid's etcd-backup-restore does, so a druid user moves a
// cluster by its bucket) instead of empty beside it. It applies (ok) only to an Etcd that never
// formed a cluster (no status.clusterID, no recorded voters) and one of whose member pods waits
// for it; everything else is left to the other rules.
//
// Nothing of a cluster can be lost then, provided no member holds data: so every member of
// spec.replicas must prove, from its current pod incarnation, that its data dir is empty
// (ProvedEmpty, the proof a voter without data gives) and that it waits for this bootstrap. Any
// sign of a cluster (a leader answers, an etcd runs, a member found data) and the restore is
// never ordered. Member 0 restores, as a new single-member cluster; the recovery then goes on as
// after a majority loss (record the cluster, grow it back through learners).
func planBootstrap(o Observed) (Decision, bool) {
	if o.RecordedClusterID != "" || len(o.Voters) > 0 {
		return Decision{}, false
	}
	awaiting := false
	for _, p := range o.Pods {
		awaiting = awaiting || p.AwaitsBackup
	}
	if !awaiting {
		return Decision{}, false
	}
	if o.LeaderAnswered {
		return decide(ActionNone, RuleLeaderAnswers, "%s answers as leader of cluster %s: the cluster has formed, nothing is restored; members without data join it",
			o.LeaderName, o.LeaderClusterID), true
	}
	b := o.bootstrapTally()
	if len(b.blocking) > 0 {
		return decide(ActionWait, RuleBootstrapWait, "the cluster never formed and its backup store holds a backup, but %s: nothing is restored while a member may hold data or runs etcd; %s",
			strings.Join(b.blocking, "; "), b.counts(o.Desired)), true
	}
	if !o.BackupConfigured {
		return decide(ActionWait, RuleNoBackup, "the cluster never formed and members wait to bootstrap from their backup store, but spec.backup names no store now; %s; a person must decide",
			b.counts(o.Desired)), true
	}
	if len(b.ready) < o.Desired || o.Desired == 0 {
		return decide(ActionWait, RuleBootstrapWait, "the cluster never formed and its backup store holds a backup; %s; awaiting %s",
			b.counts(o.Desired), b.awaited(o.Desired)), true
	}
	if o.ProofUnauthenticated != "" {
		return decide(ActionWait, RuleProofUnauthenticated, "the cluster never formed and its backup store holds a backup; %s, but these reports are not authenticated: %s; nothing is restored on reports anyone with Lease write access may have written",
			b.counts(o.Desired), o.ProofUnauthenticated), true
	}
	first := b.ready[0]
	d := decide(ActionStart, RuleBootstrapFromBackup,
		"the cluster never formed (no cluster ID, no voters recorded) and its backup store holds a backup; %s: restoring %s from the backup as a new single-member cluster, then growing it to %d through learners",
		b.counts(o.Desired), first.Name, o.Desired)
	d.State = &State{Member: first.Name, PodUID: first.UID, Token: o.NewToken}
	return d, true
}

// callOffBootstrap calls off a bootstrap from the backup whose member's pod was recreated before
// its etcd ran: the order names the old pod UID, so the new pod would never restore and the
// recovery would wait for ever. Called off, the new pod proves an empty data dir again and the
// bootstrap is ordered for it; or, if the old pod had restored into the volume, the new one
// starts from that data and leads, and the cluster is recorded as formed.
func callOffBootstrap(o Observed, s State) (Decision, bool) {
	if s.OldClusterID != "" || len(o.Voters) > 0 {
		return Decision{}, false
	}
	for _, p := range o.Pods {
		if p.Name == s.Member && p.UID != "" && p.UID != s.PodUID && !p.EtcdRunning {
			return decide(ActionCallOff, RuleCallOff, "the pod of %s was recreated (now %s, the order named %s) before it restored the backup and led: calling the bootstrap from the backup off; its new pod must prove an empty data dir again",
				s.Member, p.UID, s.PodUID), true
		}
	}
	return Decision{}, false
}

// bootstrapTally sorts the member pods by what they proved for a bootstrap from the backup.
type bootstrapTally struct {
	// ready are the members of spec.replicas whose current pod proved an empty data dir and
	// waits for the bootstrap, lowest ordinal first.
	ready []Pod
	// blocking says why no bootstrap may be ordered: a member that runs etcd or found data.
	blocking []string
	// byOrdinal are the member pods by ordinal.
	byOrdinal map[int]Pod
}

func (o Observed) bootstrapTally() bootstrapTally {
	b := bootstrapTally{byOrdinal: map[int]Pod{}}
	for _, p := range o.Pods {
		switch {
		case p.HasData:
			b.blocking = append(b.blocking, fmt.Sprintf("%s found data in its data dir", p.Name))
		case p.EtcdRunning || p.ClusterID != "":
			b.blocking = append(b.blocking, fmt.Sprintf("%s runs etcd", p.Name))
		}
		if p.Ordinal < 0 || p.Ordinal >= o.Desired {
			continue
		}
		b.byOrdinal[p.Ordinal] = p
		if p.ProvedEmpty && p.AwaitsBackup && !p.HasData && p.UID != "" {
			b.ready = append(b.ready, p)
		}
	}
	sort.Slice(b.ready, func(i, j int) bool { return b.ready[i].Ordinal < b.ready[j].Ordinal })
	return b
}

func (b bootstrapTally) counts(replicas int) string {
	var names []string
	for _, p := range b.ready {
		names = append(names, p.Name)
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d of %d members proved an empty data dir in their current pod and wait for it (%s), a bootstrap from the backup needs all %d",
		len(b.ready), replicas, list, replicas)
}

// awaited lists the members of spec.replicas not proven, and why. It names at most
// druidv1alpha1.MaxReplicas of them: the count comes from an object, and the API's bound on it is
// not this function's to trust.
func (b bootstrapTally) awaited(replicas int) string {
	ready := map[int]bool{}
	for _, p := range b.ready {
		ready[p.Ordinal] = true
	}
	var out []string
	if replicas > druidv1alpha1.MaxReplicas {
		out = append(out, fmt.Sprintf("spec.replicas %d: an Etcd has at most %d members", replicas, druidv1alpha1.MaxReplicas))
	}
	for i := range min(replicas, druidv1alpha1.MaxReplicas) {
		if ready[i] {
			continue
		}
		p, ok := b.byOrdinal[i]
		if !ok {
			out = append(out, fmt.Sprintf("member %d: no pod", i))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", p.Name, p.State))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
