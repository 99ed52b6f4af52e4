package membership

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// rule either passes (nil) or decides.
type rule func(v *view) *Decision

// rules run in this order; the first decision wins. Learners are settled before anything else
// (one at a time: nothing is added while one exists), lost members are replaced before resizing,
// resizing waits for a rollout, scale-in comes before scale-out.
var rules = []rule{
	rulePeerURLFollowsPod,
	ruleNoOtherOperation,
	ruleHibernate,
	ruleMembersKnown,
	ruleLearnerUnwanted,
	ruleLearner,
	ruleReplaceDataLost,
	ruleRolloutInFlight,
	ruleScaleIn,
	ruleShrink,
	ruleScaleOut,
	ruleSuperfluousGrace,
	ruleSettle,
}

// Plan decides the next membership step for one observation.
func Plan(o Observed) Decision {
	v := newView(o)
	for _, r := range rules {
		if d := r(v); d != nil {
			return *d
		}
	}
	return Decision{Action: ActionDone, Rule: RuleDone, Reason: fmt.Sprintf("%d voters, no learner, StatefulSet at %d replicas; %s", v.voters, o.StatefulSetReplicas, v.summary())}
}

// view is the observation with the counts every rule needs.
type view struct {
	o Observed
	// voters counts voting members, healthy those of them that answered the operator, heard
	// those the leader hears (Member.Heard; 0 unless Observed.HeardKnown).
	voters, healthy, heard int
	learner                *Member
	leader                 *Member
	// byOrdinal holds the members standing for pods of this Etcd.
	byOrdinal map[int]*Member
	// beyond are the voters no wanted pod stands for (ordinal ≥ desired or foreign), highest
	// ordinal first, foreign members first of all.
	beyond []*Member
	// highest is the highest ordinal of any member (-1 if none).
	highest int
	// inGrace are voters no pod stands for, not yet seen for SuperfluousGrace.
	inGrace []*Member
}

func newView(o Observed) *view {
	v := &view{o: o, byOrdinal: map[int]*Member{}, highest: -1}
	for i := range o.Members {
		m := &o.Members[i]
		if m.Ordinal >= 0 {
			v.byOrdinal[m.Ordinal] = m
			if m.Ordinal > v.highest {
				v.highest = m.Ordinal
			}
		}
		if m.Leader {
			v.leader = m
		}
		if m.Learner {
			if v.learner == nil {
				v.learner = m
			}
			continue
		}
		v.voters++
		if m.Healthy {
			v.healthy++
		}
		if m.Heard && o.HeardKnown {
			v.heard++
		}
		switch {
		case m.Ordinal < 0 && m.SeenFor < o.SuperfluousGrace:
			v.inGrace = append(v.inGrace, m)
		case m.Ordinal < 0 || m.Ordinal >= o.Desired:
			v.beyond = append(v.beyond, m)
		}
	}
	sort.SliceStable(v.beyond, func(i, j int) bool {
		a, b := v.beyond[i], v.beyond[j]
		if (a.Ordinal < 0) != (b.Ordinal < 0) {
			return a.Ordinal < 0
		}
		return a.Ordinal > b.Ordinal
	})
	return v
}

func (v *view) summary() string {
	learners := 0
	for _, m := range v.o.Members {
		if m.Learner {
			learners++
		}
	}
	heard := fmt.Sprintf("%d/%d voters heard by the leader (quorum %d)", v.heard, v.voters, quorum.Of(v.voters))
	if !v.o.HeardKnown {
		heard = fmt.Sprintf("%d voters (quorum %d), the leader's view not asked", v.voters, quorum.Of(v.voters))
	}
	return fmt.Sprintf("%s, %d/%d answered, %d learner(s), desired %d, StatefulSet replicas %d",
		heard, v.healthy, v.voters, learners, v.o.Desired, v.o.StatefulSetReplicas)
}

// needHeard holds a step that counts a quorum until the controller has asked which voters the
// leader hears (Observed.HeardKnown): unknown counts as not heard, so nothing is done on it.
func (v *view) needHeard(step string) *Decision {
	if v.o.HeardKnown {
		return nil
	}
	return decide(ActionWait, RuleHeardUnknown, "%s counts on the voters the leader hears, not asked yet; %s", step, v.summary())
}

func describe(m *Member) string {
	if m.Name != "" {
		return fmt.Sprintf("%s (%x)", m.Name, m.ID)
	}
	return fmt.Sprintf("%x", m.ID)
}

func decide(a Action, r RuleID, format string, args ...any) *Decision {
	return &Decision{Action: a, Rule: r, Reason: fmt.Sprintf(format, args...)}
}

// ruleHibernate: replicas 0 stops every pod and keeps the membership and the volumes as they
// are, so the members come back with their data.
func ruleHibernate(v *view) *Decision {
	if v.o.Desired != 0 {
		return nil
	}
	if v.o.StatefulSetReplicas == 0 {
		return decide(ActionDone, RuleDone, "hibernated: desired 0, StatefulSet replicas 0")
	}
	d := decide(ActionSetReplicas, RuleHibernate, "hibernating: StatefulSet replicas %d → 0, membership and volumes kept", v.o.StatefulSetReplicas)
	return d
}

// ruleMembersKnown: without the member list nothing can be decided, except the size of a cluster
// that has never formed (the members all start "new" from the StatefulSet's pods).
func ruleMembersKnown(v *view) *Decision {
	if v.o.MembersKnown {
		return nil
	}
	if v.o.Bootstrapped && v.o.StatefulSetReplicas == 0 {
		d := decide(ActionSetReplicas, RuleWake, "waking from hibernation: StatefulSet replicas 0 → %d; the members restart from their data", v.o.Desired)
		d.Replicas = v.o.Desired
		return d
	}
	if !v.o.Bootstrapped && v.o.StatefulSetReplicas != v.o.Desired {
		d := decide(ActionSetReplicas, RuleBootstrapReplicas, "cluster not bootstrapped yet: StatefulSet replicas %d → %d",
			v.o.StatefulSetReplicas, v.o.Desired)
		d.Replicas = v.o.Desired
		return d
	}
	return decide(ActionWait, RuleMembersUnknown, "no member answered with the member list (bootstrapped=%v); StatefulSet replicas %d, desired %d",
		v.o.Bootstrapped, v.o.StatefulSetReplicas, v.o.Desired)
}

// ruleLearnerUnwanted removes a learner no wanted pod stands for (left behind by a scale-out that
// was reverted, or foreign). A learner does not vote: removing it never costs quorum.
func ruleLearnerUnwanted(v *view) *Decision {
	for i := range v.o.Members {
		m := &v.o.Members[i]
		if m.Learner && (m.Ordinal < 0 || m.Ordinal >= v.o.Desired) {
			d := decide(ActionRemove, RuleLearnerUnwanted, "removing learner %s: no pod in [0, %d) stands for it; a learner does not vote; %s",
				describe(m), v.o.Desired, v.summary())
			d.Member = m
			return d
		}
	}
	return nil
}

// ruleLearner finishes the one learner there is: its pod must exist, it must start, then it is
// promoted when the voters after promotion still have a quorum the leader hears. The learner
// itself counts when it answered: it can serve no read that needs the leader, and what the
// leader sees of it, its progress, etcd checks at promotion (ErrLearnerNotReady).
func ruleLearner(v *view) *Decision {
	m := v.learner
	if m == nil {
		return nil
	}
	if !m.Started {
		if v.o.StatefulSetReplicas <= m.Ordinal {
			d := decide(ActionSetReplicas, RuleLearnerPod, "learner %s added: StatefulSet replicas %d → %d to create its pod; %s",
				describe(m), v.o.StatefulSetReplicas, m.Ordinal+1, v.summary())
			d.Replicas = m.Ordinal + 1
			return d
		}
		if v.o.RolloutInFlight {
			// Its pod may be what the rollout has to replace (say, a broken image): let it.
			// A learner that has not started costs no quorum.
			return decide(ActionWait, RuleRolloutInFlight, "learner %s has not started and a rollout is in flight: letting the rollout go first; %s",
				describe(m), v.summary())
		}
		return decide(ActionWait, RuleLearnerStarting, "waiting for learner %s to start; %s", describe(m), v.summary())
	}
	if d := v.needHeard("promoting learner " + describe(m)); d != nil {
		return d
	}
	if m.Seeded {
		k := m.Keyspace
		switch {
		case k == nil || !k.Compared:
			why := "not compared yet"
			if k != nil && k.Error != "" {
				why = k.Error
			}
			d := decide(ActionWait, RuleSeedUnverified, "not promoting seeded learner %s before its keyspace is compared with the leader's at one revision: %s; %s",
				describe(m), why, v.summary())
			d.Member = m
			return d
		case !k.Match():
			d := decide(ActionRemove, RuleSeedMismatch, "removing seeded learner %s: its keyspace at revision %d (%s) is not the leader's (%s): the snapshot it was seeded from is not this cluster's data; a learner does not vote; its pod restarts, its data is moved aside and it joins again unseeded; %s",
				describe(m), k.Revision, k.Learner, k.Leader, v.summary())
			d.Member = m
			return d
		}
	}
	after := v.voters + 1
	heardAfter := v.heard
	learner := "the learner not counted: it did not answer"
	if m.Healthy {
		heardAfter++
		learner = "the learner counted: it answered, and etcd checks its progress at promotion"
	}
	if heardAfter < quorum.Of(after) {
		return decide(ActionWait, RulePromoteUnsafe, "not promoting %s: %d of %d voters after it heard by the leader (%s), quorum %d; %s",
			describe(m), heardAfter, after, learner, quorum.Of(after), v.summary())
	}
	if m.Seeded {
		learner += fmt.Sprintf("; seeded, its keyspace is the leader's at revision %d (%s)", m.Keyspace.Revision, m.Keyspace.Leader)
	}
	d := decide(ActionPromote, RulePromote, "promoting learner %s: %d of %d voters after it heard by the leader (%s), quorum %d; %s",
		describe(m), heardAfter, after, learner, quorum.Of(after), v.summary())
	d.Member = m
	return d
}

// ruleReplaceDataLost removes a voter whose pod lost its data (member scenarios 4/5), so it can
// be added again as a learner; only while the voters left that the leader hears are a quorum of
// those left.
func ruleReplaceDataLost(v *view) *Decision {
	for i := range v.o.Members {
		m := &v.o.Members[i]
		// A member that answers or serves has its data, whatever a stale report says.
		if m.Learner || !m.DataLost || m.Healthy || m.Heard || m.Ordinal < 0 || m.Ordinal >= v.o.Desired {
			continue
		}
		return removeIfSafe(v, m, RuleReplaceDataLost, RuleReplaceUnsafe, "its pod has no usable data for this member ID")
	}
	return nil
}

// removeIfSafe removes voter m when the voters other than m that the leader hears are a quorum
// of the voters left. A member that answers the operator but that the leader does not hear (cut
// off on the peer network) is not counted: removing another would leave the leader without a
// quorum it hears.
func removeIfSafe(v *view, m *Member, ok, unsafe RuleID, why string) *Decision {
	if d := v.needHeard(fmt.Sprintf("removing %s (%s)", describe(m), why)); d != nil {
		return d
	}
	after := v.voters - 1
	heardAfter := v.heard
	if m.Heard {
		heardAfter--
	}
	if after < 1 || heardAfter < quorum.Of(after) {
		return decide(ActionWait, unsafe, "not removing %s (%s): %d of %d remaining voters heard by the leader, quorum %d; %s",
			describe(m), why, heardAfter, after, quorum.Of(after), v.summary())
	}
	d := decide(ActionRemove, ok, "removing %s (%s): %d of %d remaining voters heard by the leader, quorum %d; %s",
		describe(m), why, heardAfter, after, quorum.Of(after), v.summary())
	d.Member = m
	return d
}

// ruleNoOtherOperation: one operation at a time. A recovery replaces members itself, and a
// defragmenting member serves nothing while it may still look healthy: no member is added,
// promoted or removed meanwhile.
func ruleNoOtherOperation(v *view) *Decision {
	if len(v.o.Operations) == 0 {
		return nil
	}
	return decide(ActionWait, operation.WaitRule(Planner, v.o.Operations[0].Kind), "waiting for the %s to finish before changing the membership; %s",
		v.o.Operations.Describe(), v.summary())
}

// rulePeerURLFollowsPod: a member whose pod now advertises other peer URLs than the cluster
// records gets them recorded (MemberUpdate), or its peers would go on dialling what it no longer
// serves: a move to TLS restarts each member on https (internal/decide/transport), and a change of
// spec.etcd.additionalAdvertisePeerURLs rolls the pods with their new extra URLs. First of all
// rules, even during a rollout: the rollout waits for that very member to be ready, which it
// cannot be unreached. Changing where a member is dialled removes no one and counts no quorum;
// etcd commits it only with a quorum of its own. The member's name under the peer Service must
// stay where it is (its scheme aside): the rule never moves a member to another endpoint, only
// carries its scheme and its additional URLs. A URL moved from one member to another is first
// taken off the member that holds it: etcd refuses a peer URL another member records, so the
// member that gets it waits for that.
func rulePeerURLFollowsPod(v *view) *Decision {
	if !v.o.MembersKnown {
		return nil
	}
	for i := range v.o.Members {
		m := &v.o.Members[i]
		if len(m.PodPeerURLs) == 0 || samePeerURLs(m.PeerURLs, m.PodPeerURLs) || !holdsEndpoint(m.PeerURLs, m.PodPeerURLs[0]) ||
			v.recordedForAnother(m, m.PodPeerURLs) {
			continue
		}
		d := decide(ActionUpdatePeerURL, RuleUpdatePeerURL, "member %s (%x) advertises %s, the cluster dials it at %s; %s",
			m.Name, m.ID, strings.Join(m.PodPeerURLs, ","), strings.Join(m.PeerURLs, ","), v.summary())
		d.Member, d.PeerURLs = m, slices.Clone(m.PodPeerURLs)
		return d
	}
	return nil
}

// recordedForAnother: one of urls is recorded for a member other than m.
func (v *view) recordedForAnother(m *Member, urls []string) bool {
	for i := range v.o.Members {
		other := &v.o.Members[i]
		if other.ID != m.ID && slices.ContainsFunc(urls, func(u string) bool { return slices.Contains(other.PeerURLs, u) }) {
			return true
		}
	}
	return false
}

// samePeerURLs tells whether a and b hold the same URLs in whatever order: etcd keeps a member's
// peer URLs sorted, a pod advertises its own in the order it was given them.
func samePeerURLs(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// holdsEndpoint: one of urls differs from u at most in its scheme.
func holdsEndpoint(urls []string, u string) bool {
	return slices.ContainsFunc(urls, func(r string) bool { return sameEndpoint(r, u) })
}

// sameEndpoint: a and b differ at most in their scheme.
func sameEndpoint(a, b string) bool {
	_, ra, okA := strings.Cut(a, "://")
	_, rb, okB := strings.Cut(b, "://")
	return okA && okB && ra == rb
}

// ruleRolloutInFlight: resizing waits while pods are being replaced; the OnDelete controller
// waits for a resize in turn (see InFlight), so they never act at once. Adding back the member of
// a pod within the StatefulSet's size is no resize and does not wait: a pod the rollout replaced
// that came back without data (on a new volume, after a volume change or a lost disk) rejoins only
// through it, and the rollout waits for that pod in turn.
func ruleRolloutInFlight(v *view) *Decision {
	if !v.o.RolloutInFlight || !v.resizing() {
		return nil
	}
	return decide(ActionWait, RuleRolloutInFlight, "waiting for the rollout to finish before resizing; %s", v.summary())
}

func (v *view) resizeNeeded() bool {
	if v.resizing() {
		return true
	}
	// Bounded by the API's maximum, not by the count alone: it comes from an object.
	for i := range min(v.o.Desired, druidv1alpha1.MaxReplicas) {
		if v.byOrdinal[i] == nil {
			return true
		}
	}
	return false
}

// resizing: the StatefulSet's size is to change, or members beyond it are to go.
func (v *view) resizing() bool {
	return len(v.beyond) > 0 || v.o.StatefulSetReplicas != v.o.Desired
}

// ruleScaleIn removes voters beyond the desired size, highest ordinal first, one at a time,
// after moving leadership off them, to a kept voter the leader hears. While the backup gate holds
// (DEP-01: postpone disruptive maintenance while BackupReady is False) a voter of this Etcd's
// pods is neither removed nor moved off leadership; a member no pod of this Etcd stands for is
// no scale-in asked for and is still removed.
func ruleScaleIn(v *view) *Decision {
	if len(v.beyond) == 0 {
		return nil
	}
	m := v.beyond[0]
	if m.Ordinal >= 0 && v.o.Backup.Holds {
		return decide(ActionWait, RuleBackupNotReady, "%s; %s",
			v.o.Backup.Waiting(fmt.Sprintf("removing %s (scale-in to %d)", describe(m), v.o.Desired)), v.summary())
	}
	if m.Leader {
		if d := v.needHeard(fmt.Sprintf("moving leadership off %s", describe(m))); d != nil {
			return d
		}
		var target *Member
		for i := range v.o.Members {
			c := &v.o.Members[i]
			if c.Learner || !c.Heard || c.Ordinal < 0 || c.Ordinal >= v.o.Desired {
				continue
			}
			if target == nil || c.Ordinal < target.Ordinal {
				target = c
			}
		}
		if target == nil {
			return decide(ActionWait, RuleNoLeaderTarget, "leader %s is to be removed but no voter in [0, %d) that it hears can take over; %s",
				describe(m), v.o.Desired, v.summary())
		}
		d := decide(ActionMoveLeader, RuleMoveLeader, "moving leadership from %s to %s before removing it; %s",
			describe(m), describe(target), v.summary())
		d.Member, d.Target = m, target
		return d
	}
	why := fmt.Sprintf("beyond the desired %d members", v.o.Desired)
	if m.Ordinal < 0 {
		why = "no pod of this Etcd stands for it"
	}
	return removeIfSafe(v, m, RuleRemove, RuleRemoveUnsafe, why)
}

// ruleShrink lowers the StatefulSet once the members above the desired size are gone, so no pod
// that is still a member is deleted by the StatefulSet controller.
func ruleShrink(v *view) *Decision {
	floor := v.o.Desired
	if v.highest+1 > floor {
		floor = v.highest + 1
	}
	if v.o.StatefulSetReplicas <= floor || v.o.StatefulSetReplicas <= v.o.Desired {
		return nil
	}
	d := decide(ActionSetReplicas, RuleShrink, "no member above ordinal %d: StatefulSet replicas %d → %d; %s",
		floor-1, v.o.StatefulSetReplicas, floor, v.summary())
	d.Replicas = floor
	return d
}

// ruleScaleOut adds the lowest missing ordinal as a learner while the leader hears a quorum of
// the voters; its pod is created after (ruleLearner), so the pod finds itself in the member list
// when it starts.
func ruleScaleOut(v *view) *Decision {
	missing := -1
	for i := range min(v.o.Desired, druidv1alpha1.MaxReplicas) {
		if v.byOrdinal[i] == nil {
			missing = i
			break
		}
	}
	if missing < 0 {
		return nil
	}
	if d := v.needHeard(fmt.Sprintf("adding a learner for ordinal %d", missing)); d != nil {
		return d
	}
	if v.heard < quorum.Of(v.voters) {
		return decide(ActionWait, RuleAddUnsafe, "not adding a member for ordinal %d: %d of %d voters heard by the leader, quorum %d; %s",
			missing, v.heard, v.voters, quorum.Of(v.voters), v.summary())
	}
	d := decide(ActionAddLearner, RuleAddLearner, "adding a learner for ordinal %d: %d of %d voters heard by the leader, quorum %d; %s",
		missing, v.heard, v.voters, quorum.Of(v.voters), v.summary())
	d.Ordinal = missing
	return d
}

// ruleSuperfluousGrace reports a member no pod stands for that is still within its grace period.
func ruleSuperfluousGrace(v *view) *Decision {
	if len(v.inGrace) == 0 {
		return nil
	}
	m := v.inGrace[0]
	return decide(ActionWait, RuleSuperfluousGrace, "member %s stands for no pod of this Etcd: removing it once it has been seen for %s (seen for %s); %s",
		describe(m), v.o.SuperfluousGrace, m.SeenFor.Round(time.Second), v.summary())
}

// ruleSettle brings the StatefulSet to the desired size once the members are what is desired.
func ruleSettle(v *view) *Decision {
	if v.o.StatefulSetReplicas == v.o.Desired {
		return nil
	}
	d := decide(ActionSetReplicas, RuleSettleReplicas, "members match the desired size: StatefulSet replicas %d → %d; %s",
		v.o.StatefulSetReplicas, v.o.Desired, v.summary())
	d.Replicas = v.o.Desired
	return d
}
