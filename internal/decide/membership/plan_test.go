package membership

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// voter builds a started voting member of ordinal i that answers and that the leader hears.
func voter(i int) Member {
	return Member{ID: uint64(100 + i), Name: name(i), Ordinal: i, Started: true, Healthy: true, Heard: true}
}

func name(i int) string { return "etcd-" + string(rune('0'+i)) }

func with(m Member, f func(*Member)) Member { f(&m); return m }

func leader(m Member) Member { return with(m, func(m *Member) { m.Leader = true }) }
func sick(m Member) Member   { return with(m, func(m *Member) { m.Healthy, m.Heard = false, false }) }
func lost(m Member) Member {
	return with(m, func(m *Member) { m.DataLost, m.Healthy, m.Heard = true, false, false })
}
func learner(m Member) Member { return with(m, func(m *Member) { m.Learner, m.Heard = true, false }) }

// seeded is a learner seeded from the bucket whose keyspace compared as k (nil: not compared).
func seeded(m Member, k *KeyspaceComparison) Member {
	return with(m, func(m *Member) { m.Seeded, m.Keyspace = true, k })
}

func comparison(learner, leader string) *KeyspaceComparison {
	return &KeyspaceComparison{Compared: true, Revision: 42, Learner: learner, Leader: leader}
}
func unstarted(m Member) Member {
	return with(m, func(m *Member) { m.Started, m.Healthy, m.Heard = false, false, false })
}

// cutOff: the member answers the operator, but the leader does not hear it (a one-way partition
// on the peer network): it serves no linearizable read.
func cutOff(m Member) Member { return with(m, func(m *Member) { m.Heard = false }) }

// serving: the member served a linearizable read although its status request failed.
func serving(m Member) Member { return with(m, func(m *Member) { m.Heard = true }) }

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Observed
		action   Action
		rule     RuleID
		member   string
		target   string
		ordinal  int
		replicas int
		// unasked: the controller has not asked which voters the leader hears (HeardKnown false).
		unasked bool
		// reason must be part of the decision's reason.
		reason string
	}{
		{name: "members unknown, not bootstrapped: size the StatefulSet",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1},
			action: ActionSetReplicas, rule: RuleBootstrapReplicas, replicas: 3},
		{name: "members unknown after bootstrap: wait",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true},
			action: ActionWait, rule: RuleMembersUnknown},
		{name: "hibernate: replicas 0 keeps the membership",
			o:      Observed{Desired: 0, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionSetReplicas, rule: RuleHibernate, replicas: 0},
		{name: "wake from hibernation",
			o:      Observed{Desired: 3, StatefulSetReplicas: 0, Bootstrapped: true},
			action: ActionSetReplicas, rule: RuleWake, replicas: 3},
		{name: "settled: decided without asking the leader's view",
			o:       Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			unasked: true,
			action:  ActionDone, rule: RuleDone},
		{name: "1→3: add learner for ordinal 1 first",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0))}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 1},
		{name: "learner added: create its pod",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), unstarted(learner(voter(1)))}},
			action: ActionSetReplicas, rule: RuleLearnerPod, replicas: 2},
		{name: "learner pod exists: wait for it to start, add nothing",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), unstarted(learner(voter(1)))}},
			action: ActionWait, rule: RuleLearnerStarting},
		{name: "learner started: promote",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), learner(voter(1))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-1"},
		{name: "promotion would leave no healthy quorum: wait",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), sick(voter(2)), sick(learner(voter(3)))}},
			action: ActionWait, rule: RulePromoteUnsafe},
		{name: "3→5 with one member dead: still add (2/3 healthy)",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), sick(voter(2))}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 3},
		{name: "quorum lost: add nothing",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{voter(0), sick(voter(1)), sick(voter(2))}},
			action: ActionWait, rule: RuleAddUnsafe},
		{name: "5→3: remove the highest ordinal first",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3), voter(4)}},
			action: ActionRemove, rule: RuleRemove, member: "etcd-4"},
		{name: "5→3: leader among those removed is moved off first, to a kept healthy voter",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{sick(voter(0)), voter(1), voter(2), voter(3), leader(voter(4))}},
			action: ActionMoveLeader, rule: RuleMoveLeader, member: "etcd-4"},
		{name: "5→3: members removed one at a time before any pod goes",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3)}},
			action: ActionRemove, rule: RuleRemove, member: "etcd-3"},
		{name: "5→3 while BackupReady is False: the scale-in waits",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Backup: backupgate.Gate{Holds: true, Reason: "UploadFailed"}, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3), voter(4)}},
			action: ActionWait, rule: RuleBackupNotReady, reason: "removing etcd-4"},
		{name: "5→3 while BackupReady is False: no leadership moved for it either",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Backup: backupgate.Gate{Holds: true}, Members: []Member{voter(0), voter(1), voter(2), voter(3), leader(voter(4))}},
			action: ActionWait, rule: RuleBackupNotReady},
		{name: "3→5 while BackupReady is False: scale-out goes on",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Backup: backupgate.Gate{Holds: true}, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 3},
		{name: "data lost while BackupReady is False: still replaced",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Backup: backupgate.Gate{Holds: true}, Members: []Member{leader(voter(0)), voter(1), lost(voter(2))}},
			action: ActionRemove, rule: RuleReplaceDataLost, member: "etcd-2"},
		{name: "members removed: shrink the StatefulSet",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionSetReplicas, rule: RuleShrink, replicas: 3},
		{name: "3→1 with one member already dead: removing a healthy one would lose quorum",
			o:      Observed{Desired: 1, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), sick(voter(1)), voter(2)}},
			action: ActionWait, rule: RuleRemoveUnsafe},
		{name: "data lost: remove it while the others keep quorum",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), lost(voter(2))}},
			action: ActionRemove, rule: RuleReplaceDataLost, member: "etcd-2"},
		{name: "data lost with another member down: wait",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), sick(voter(1)), lost(voter(2))}},
			action: ActionWait, rule: RuleReplaceUnsafe},
		{name: "data-lost member removed: add it again as a learner (its pod exists)",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1)}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 2},
		{name: "learner left behind by a reverted scale-out is removed",
			o:      Observed{Desired: 3, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), unstarted(learner(voter(3)))}},
			action: ActionRemove, rule: RuleLearnerUnwanted, member: "etcd-3"},
		{name: "foreign member is removed when safe, after its grace period",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, SuperfluousGrace: time.Minute, Members: []Member{leader(voter(0)), voter(1), voter(2), {ID: 9, Name: "", Ordinal: -1, Started: true, SeenFor: 2 * time.Minute}}},
			action: ActionRemove, rule: RuleRemove},
		{name: "foreign member within its grace period is left alone",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, SuperfluousGrace: time.Minute, Members: []Member{leader(voter(0)), voter(1), voter(2), {ID: 9, Name: "", Ordinal: -1, Started: true, SeenFor: 10 * time.Second}}},
			action: ActionWait, rule: RuleSuperfluousGrace},
		{name: "a member lost during a rollout is added back: no resize, and the rollout waits for its pod",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1)}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 2},
		{name: "resize waits for a rollout",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionWait, rule: RuleRolloutInFlight},
		{name: "a learner that has not started yields to a rollout (its pod may be the broken one)",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2), unstarted(learner(voter(3)))}},
			action: ActionWait, rule: RuleRolloutInFlight},
		{name: "a learner is finished even during a rollout",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2), learner(voter(3))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-3"},

		// The leader's view, not "answered me" (issue 24, item 4): members cut off from the
		// leader on the peer network still answer the operator.
		{name: "5→3 with two kept voters cut off from the leader: removing a third would leave it 2 heard of 4",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), cutOff(voter(1)), cutOff(voter(2)), voter(3), voter(4)}},
			action: ActionWait, rule: RuleRemoveUnsafe, reason: "not removing etcd-4 (68) (beyond the desired 3 members): 2 of 4 remaining voters heard by the leader, quorum 3"},
		{name: "5→3 with the two removed ones cut off: removing one leaves the leader a quorum it hears",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), cutOff(voter(3)), cutOff(voter(4))}},
			action: ActionRemove, rule: RuleRemove, member: "etcd-4", reason: "3 of 4 remaining voters heard by the leader, quorum 3"},
		{name: "5→3: leadership goes to a kept voter the leader hears, not to one that only answers",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{cutOff(voter(0)), voter(1), voter(2), voter(3), leader(voter(4))}},
			action: ActionMoveLeader, rule: RuleMoveLeader, member: "etcd-4", target: "etcd-1", reason: "4/5 voters heard by the leader (quorum 3), 5/5 answered"},
		{name: "5→3: no kept voter heard by the leader, no leadership target",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{cutOff(voter(0)), cutOff(voter(1)), cutOff(voter(2)), voter(3), leader(voter(4))}},
			action: ActionWait, rule: RuleNoLeaderTarget, reason: "no voter in [0, 3) that it hears can take over; 2/5 voters heard by the leader (quorum 3), 5/5 answered"},
		{name: "promotion counts the voters the leader hears: two cut off of three, wait",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), cutOff(voter(1)), cutOff(voter(2)), learner(voter(3))}},
			action: ActionWait, rule: RulePromoteUnsafe, reason: "not promoting etcd-3 (67): 2 of 4 voters after it heard by the leader (the learner counted: it answered, and etcd checks its progress at promotion), quorum 3"},
		{name: "1→3: the learner of a single voter counts when it answered",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), learner(voter(1))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-1", reason: "2 of 2 voters after it heard by the leader (the learner counted"},
		{name: "a seeded learner is not promoted before its keyspace is compared",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), seeded(learner(voter(1)), nil)}},
			action: ActionWait, rule: RuleSeedUnverified, reason: "not compared yet"},
		{name: "nor while the comparison could not be made (the revision compacted meanwhile)",
			o: Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)),
				seeded(learner(voter(1)), &KeyspaceComparison{Revision: 42, Error: "revision 42 compacted"})}},
			action: ActionWait, rule: RuleSeedUnverified, reason: "revision 42 compacted"},
		{name: "a seeded learner whose keyspace is the leader's is promoted",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), seeded(learner(voter(1)), comparison("abc", "abc"))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-1"},
		{name: "a seeded learner whose keyspace differs from the leader's is removed (a planted snapshot)",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), seeded(learner(voter(1)), comparison("abc", "def"))}},
			action: ActionRemove, rule: RuleSeedMismatch, member: "etcd-1", reason: "its keyspace at revision 42 (abc) is not the leader's (def)"},
		{name: "a learner that does not answer is not counted",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), sick(learner(voter(1)))}},
			action: ActionWait, rule: RulePromoteUnsafe, reason: "1 of 2 voters after it heard by the leader (the learner not counted: it did not answer), quorum 2"},
		{name: "no learner is added while the leader hears no quorum",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), cutOff(voter(1)), cutOff(voter(2))}},
			action: ActionWait, rule: RuleAddUnsafe, reason: "not adding a member for ordinal 3: 1 of 3 voters heard by the leader, quorum 2"},
		{name: "data lost with another member cut off from the leader: wait",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), cutOff(voter(1)), lost(voter(2))}},
			action: ActionWait, rule: RuleReplaceUnsafe, reason: "1 of 2 remaining voters heard by the leader, quorum 2"},
		{name: "a data-lost report on a member that serves reads is stale: it is kept",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), serving(lost(voter(2)))}},
			action: ActionDone, rule: RuleDone},
		{name: "the leader's view not asked: no removal",
			o:       Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3), voter(4)}},
			unasked: true,
			action:  ActionWait, rule: RuleHeardUnknown, reason: "removing etcd-4 (68) (beyond the desired 3 members) counts on the voters the leader hears, not asked yet; 5 voters (quorum 3), the leader's view not asked"},
		{name: "the leader's view not asked: no leadership move",
			o:       Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{voter(0), voter(1), voter(2), voter(3), leader(voter(4))}},
			unasked: true,
			action:  ActionWait, rule: RuleHeardUnknown},
		{name: "the leader's view not asked: no promotion",
			o:       Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), learner(voter(1))}},
			unasked: true,
			action:  ActionWait, rule: RuleHeardUnknown},
		{name: "the leader's view not asked: no learner added",
			o:       Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0))}},
			unasked: true,
			action:  ActionWait, rule: RuleHeardUnknown},
		{name: "the leader's view not asked: a data-lost member is not removed",
			o:       Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), lost(voter(2))}},
			unasked: true,
			action:  ActionWait, rule: RuleHeardUnknown},
		{name: "the leader's view not asked: what costs no quorum goes on (an unwanted learner is removed)",
			o:       Observed{Desired: 3, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), unstarted(learner(voter(3)))}},
			unasked: true,
			action:  ActionRemove, rule: RuleLearnerUnwanted, member: "etcd-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.HeardKnown = !tc.unasked
			d := Plan(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			if tc.member != "" && (d.Member == nil || d.Member.Name != tc.member) {
				t.Errorf("member = %+v, want %s", d.Member, tc.member)
			}
			if tc.target != "" && (d.Target == nil || d.Target.Name != tc.target) {
				t.Errorf("target = %+v, want %s", d.Target, tc.target)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", d.Reason, tc.reason)
			}
			if tc.action == ActionAddLearner && d.Ordinal != tc.ordinal {
				t.Errorf("ordinal = %d, want %d", d.Ordinal, tc.ordinal)
			}
			if tc.action == ActionSetReplicas && d.Replicas != tc.replicas {
				t.Errorf("replicas = %d, want %d", d.Replicas, tc.replicas)
			}
			if !strings.Contains(d.Reason, "voters") && tc.o.MembersKnown && tc.o.Desired > 0 {
				t.Errorf("reason %q carries no numbers", d.Reason)
			}
		})
	}
}

// TestPlanProperties checks the safety invariants on random observations. Quorums are counted
// here on their own, on the voters the leader hears (never on those that answered), and only
// when the controller asked.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	acted := map[Action]int{}
	for n := 0; n < 20000; n++ {
		o := randomObserved(rng)
		d := Plan(o)
		v := newView(o)
		learners, voters, heard := 0, 0, 0
		for _, m := range o.Members {
			switch {
			case m.Learner:
				learners++
			case m.Heard:
				voters++
				heard++
			default:
				voters++
			}
		}
		if !o.HeardKnown {
			heard = 0
		}
		acted[d.Action]++
		// Re-recording where a member is dialled (peer-url/follow-pod) is the one step taken
		// during another operation: it removes, adds and promotes no one and counts no quorum, and
		// a rollout waits for that very member to be reachable.
		if len(o.Operations) > 0 && d.Action != ActionUpdatePeerURL && (d.Action != ActionWait || d.InProgress()) {
			t.Fatalf("acts (or claims a membership change) while %s is in flight: %+v → %+v", o.Operations[0].Kind, o, d)
		}
		quorumStep := d.Action == ActionAddLearner || d.Action == ActionPromote || d.Action == ActionMoveLeader ||
			(d.Action == ActionRemove && !d.Member.Learner)
		if quorumStep && !o.HeardKnown {
			t.Fatalf("%s without asking which voters the leader hears: %+v → %+v", d.Action, o, d)
		}
		// DEP-01: while BackupReady is False no voter is removed (or moved off leadership) for a
		// scale-in, and every other step (learners, lost members, scale-out) is what it is without
		// the gate.
		if o.Backup.Holds {
			if (d.Action == ActionRemove || d.Action == ActionMoveLeader) && !d.Member.Learner && d.Member.Ordinal >= o.Desired {
				t.Fatalf("scales in while the backup is not ready: %+v → %+v", o, d)
			}
			open := o
			open.Backup = backupgate.Gate{}
			want := Plan(open)
			if d.Rule == RuleBackupNotReady {
				switch want.Rule {
				case RuleRemove, RuleRemoveUnsafe, RuleMoveLeader, RuleNoLeaderTarget, RuleHeardUnknown:
				default:
					t.Fatalf("the backup gate held %s (%s), which is no scale-in: %+v", want.Rule, want.Reason, o)
				}
			} else if d.Action != want.Action || d.Rule != want.Rule {
				t.Fatalf("the backup gate changed %s into %s: %+v", want.Rule, d.Rule, o)
			}
		}
		switch d.Action {
		case ActionAddLearner:
			if learners > 0 {
				t.Fatalf("adds while a learner exists: %+v → %+v", o, d)
			}
			if heard < quorum.Of(voters) {
				t.Fatalf("adds while the leader hears %d of %d voters: %+v → %+v", heard, voters, o, d)
			}
		case ActionRemove:
			if d.Member.Ordinal < 0 && !d.Member.Learner && d.Member.SeenFor < o.SuperfluousGrace {
				t.Fatalf("removes a member no pod stands for within its grace period: %+v → %+v", o, d)
			}
			if !d.Member.Learner {
				heardAfter := heard
				if d.Member.Heard {
					heardAfter--
				}
				if heardAfter < quorum.Of(voters-1) {
					t.Fatalf("removes a voter leaving %d heard by the leader of %d: %+v → %+v", heardAfter, voters-1, o, d)
				}
				if d.Member.Leader {
					t.Fatalf("removes the leader without moving leadership first: %+v → %+v", o, d)
				}
			}
		case ActionMoveLeader:
			if d.Target.Learner || !d.Target.Heard {
				t.Fatalf("moves leadership to a learner or a member the leader does not hear: %+v → %+v", o, d)
			}
		case ActionPromote:
			if !d.Member.Learner || !d.Member.Started {
				t.Fatalf("promotes a non-learner or an unstarted learner: %+v → %+v", o, d)
			}
			// The bucket is no authority: a seeded learner votes only with the leader's keyspace.
			if d.Member.Seeded && !d.Member.Keyspace.Match() {
				t.Fatalf("promotes a seeded learner whose keyspace is unknown or differs from the leader's: %+v → %+v", o, d)
			}
			// The learner can serve no read that needs the leader: it counts when it answered,
			// etcd checking its progress on the leader at promotion.
			heardAfter := heard
			if d.Member.Healthy {
				heardAfter++
			}
			if heardAfter < quorum.Of(voters+1) {
				t.Fatalf("promotes leaving %d heard by the leader of %d voters: %+v → %+v", heardAfter, voters+1, o, d)
			}
		case ActionUpdatePeerURL:
			// Only ever to what the member's pod advertises, and never away from the member's
			// name under the peer Service: the cluster must already dial it there (any scheme).
			if len(d.PeerURLs) == 0 || !slices.Equal(d.PeerURLs, d.Member.PodPeerURLs) {
				t.Fatalf("updates peer URLs to %v, not the pod's %v: %+v", d.PeerURLs, d.Member.PodPeerURLs, o)
			}
			if !holdsEndpoint(d.Member.PeerURLs, d.PeerURLs[0]) {
				t.Fatalf("moves %s away from its recorded endpoint %v to %v", d.Member.Name, d.Member.PeerURLs, d.PeerURLs)
			}
			if samePeerURLs(d.Member.PeerURLs, d.PeerURLs) {
				t.Fatalf("updates %s to the URLs it has: %v", d.Member.Name, d.PeerURLs)
			}
			if v.recordedForAnother(d.Member, d.PeerURLs) {
				t.Fatalf("gives %s a URL another member records (etcd refuses it): %v, %+v", d.Member.Name, d.PeerURLs, o)
			}
		case ActionSetReplicas:
			// Never delete the pod of a member: the StatefulSet never shrinks below a member's ordinal.
			if d.Replicas < o.StatefulSetReplicas && d.Replicas <= v.highest {
				t.Fatalf("shrinks the StatefulSet to %d below member ordinal %d: %+v", d.Replicas, v.highest, o)
			}
		}
		if !o.MembersKnown && o.Bootstrapped && d.Action != ActionWait && d.Rule != RuleWake && d.Rule != RuleHibernate && d.Action != ActionDone {
			t.Fatalf("acts without a member list on a bootstrapped cluster: %+v → %+v", o, d)
		}
	}
	// The generator must reach every step the invariants are about.
	for _, a := range []Action{ActionAddLearner, ActionPromote, ActionRemove, ActionMoveLeader, ActionUpdatePeerURL} {
		if acted[a] == 0 {
			t.Errorf("no random observation led to %s: %v", a, acted)
		}
	}
}

// randomPeerURLs are what the cluster records for the member of ordinal i and what its pod
// advertises (nil: unknown): the service URL on either scheme, or elsewhere, with or without
// additional URLs, in any order.
func randomPeerURLs(rng *rand.Rand, i int) (recorded, pod []string) {
	service := func() string {
		scheme := []string{"http", "https"}[rng.Intn(2)]
		host := []string{fmt.Sprintf("etcd-%d.etcd-peer.ns.svc:2380", i), "elsewhere.ns.svc:2380"}[min(rng.Intn(8), 1)]
		return scheme + "://" + host
	}
	extras := func() []string {
		all := []string{"https://10.0.0.1:2380", "https://10.0.0.2:2380", "https://far.example:2380"}
		rng.Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
		return all[:rng.Intn(len(all)+1)]
	}
	recorded = append([]string{service()}, extras()...)
	rng.Shuffle(len(recorded), func(a, b int) { recorded[a], recorded[b] = recorded[b], recorded[a] })
	switch rng.Intn(4) {
	case 0: // unknown
	case 1, 2: // in step, in another order
		pod = slices.Clone(recorded)
		rng.Shuffle(len(pod), func(a, b int) { pod[a], pod[b] = pod[b], pod[a] })
	default:
		pod = append([]string{service()}, extras()...)
	}
	return recorded, pod
}

func randomObserved(rng *rand.Rand) Observed {
	o := Observed{
		Desired:             1 + 2*rng.Intn(4),
		StatefulSetReplicas: rng.Intn(8),
		Bootstrapped:        rng.Intn(5) > 0,
		MembersKnown:        rng.Intn(6) > 0,
		RolloutInFlight:     rng.Intn(4) == 0,
		HeardKnown:          rng.Intn(4) > 0,
	}
	if rng.Intn(8) == 0 {
		o.Operations = operation.Set{{Kind: []operation.Kind{operation.KindRecovery, operation.KindDefragmentation}[rng.Intn(2)]}}
	}
	learnerAdded := false
	for i := 0; i < 8; i++ {
		if rng.Intn(3) == 0 {
			continue
		}
		m := voter(i)
		m.Healthy = rng.Intn(4) > 0
		// Mostly a member the leader hears answers too; one cut off from the leader on the peer
		// network answers all the same, and a member whose status request failed may still serve
		// a read.
		m.Heard = m.Healthy && rng.Intn(3) > 0 || rng.Intn(10) == 0
		m.DataLost = rng.Intn(8) == 0
		if !learnerAdded && rng.Intn(5) == 0 {
			m.Learner, learnerAdded = true, true
			m.Started = rng.Intn(2) == 0
			if rng.Intn(2) == 0 {
				m.Seeded = true
				m.Keyspace = []*KeyspaceComparison{nil, {Revision: 7, Error: "compacted"}, comparison("a", "a"), comparison("a", "b")}[rng.Intn(4)]
			}
		}
		m.PeerURLs, m.PodPeerURLs = randomPeerURLs(rng, i)
		o.Members = append(o.Members, m)
	}
	if rng.Intn(10) == 0 {
		o.Members = append(o.Members, Member{ID: 999, Ordinal: -1, Started: true, Healthy: rng.Intn(2) == 0, Heard: rng.Intn(2) == 0, SeenFor: time.Duration(rng.Intn(120)) * time.Second})
		o.SuperfluousGrace = time.Minute
	}
	var leaders []int
	for i, m := range o.Members {
		if !m.Learner && m.Healthy {
			leaders = append(leaders, i)
		}
	}
	if len(leaders) > 0 && rng.Intn(5) > 0 {
		l := &o.Members[leaders[rng.Intn(len(leaders))]]
		// The controller counts the leader heard when it answered as leader.
		l.Leader, l.Heard = true, l.Heard || rng.Intn(5) > 0
	}
	if !o.MembersKnown {
		o.Members = nil
	}
	if rng.Intn(4) == 0 {
		o.Backup = backupgate.Gate{Holds: true, Reason: "UploadFailed"}
	}
	return o
}

// TestPeerURLFollowsPod: a member whose pod advertises other peer URLs than the cluster records
// (its scheme moved to TLS, its additional URLs changed) is re-recorded with the pod's list,
// first of all rules, even while another operation runs; the order of the lists is no
// difference, and a member whose name under the peer Service is not among the recorded ones
// (another host or port) is never moved.
func TestPeerURLFollowsPod(t *testing.T) {
	const httpURL, httpsURL = "http://etcd-1.etcd-peer.ns.svc:2380", "https://etcd-1.etcd-peer.ns.svc:2380"
	const extraA, extraB = "https://10.0.0.1:2380", "https://etcd-1.other.example:2380"
	member := func(recorded, pod []string) Member {
		return with(voter(1), func(m *Member) { m.PeerURLs, m.PodPeerURLs = recorded, pod })
	}
	base := func(m1 Member) Observed {
		return Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, HeardKnown: true,
			Members: []Member{leader(voter(0)), m1, voter(2)}}
	}
	list := func(urls ...string) []string { return urls }
	for _, tc := range []struct {
		name     string
		o        Observed
		wantURLs []string // nil: no update
	}{
		{"pod on https, recorded http: update", base(member(list(httpURL), list(httpsURL))), list(httpsURL)},
		{"during another operation too", func() Observed {
			o := base(member(list(httpURL), list(httpsURL)))
			o.Operations = operation.Set{{Kind: operation.KindRollout}}
			return o
		}(), list(httpsURL)},
		{"in step: nothing", base(member(list(httpsURL), list(httpsURL))), nil},
		{"pod unknown: nothing", base(member(list(httpURL), nil)), nil},
		{"another host: not this rule's", base(member(list(httpURL), list("https://elsewhere.ns.svc:2380"))), nil},
		{"another port: not this rule's", base(member(list(httpURL), list("https://etcd-1.etcd-peer.ns.svc:2390"))), nil},
		{"members unknown: nothing", func() Observed {
			o := base(member(list(httpURL), list(httpsURL)))
			o.MembersKnown = false
			return o
		}(), nil},
		{"additional URL added: update to the pod's list", base(member(list(httpsURL), list(httpsURL, extraA))), list(httpsURL, extraA)},
		{"additional URL removed: update to the pod's list", base(member(list(extraA, httpsURL), list(httpsURL))), list(httpsURL)},
		{"additional URL replaced: update", base(member(list(extraA, httpsURL), list(httpsURL, extraB))), list(httpsURL, extraB)},
		{"same URLs in etcd's sorted order: nothing", base(member(list(extraB, extraA, httpsURL), list(httpsURL, extraA, extraB))), nil},
		{"scheme and extras at once: update", base(member(list(httpURL), list(httpsURL, extraA))), list(httpsURL, extraA)},
		{"service URL not recorded, only extras: not this rule's", base(member(list(extraA), list(httpsURL, extraA))), nil},
		{"a URL another member still records: that member goes first", func() Observed {
			o := base(member(list(httpsURL), list(httpsURL, extraA)))
			o.Members[2].PeerURLs = []string{extraA, "https://etcd-2.etcd-peer.ns.svc:2380"}
			return o
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if tc.wantURLs == nil {
				if d.Action == ActionUpdatePeerURL {
					t.Fatalf("updated: %+v", d)
				}
				return
			}
			if d.Action != ActionUpdatePeerURL || d.Rule != RuleUpdatePeerURL || !slices.Equal(d.PeerURLs, tc.wantURLs) || d.Member == nil || d.Member.ID != 101 {
				t.Fatalf("Plan = %+v, want %s of etcd-1 to %v", d, ActionUpdatePeerURL, tc.wantURLs)
			}
			for _, u := range append(slices.Clone(tc.o.Members[1].PeerURLs), tc.wantURLs...) {
				if !strings.Contains(d.Reason, u) {
					t.Errorf("reason %q lacks %s", d.Reason, u)
				}
			}
		})
	}
}

// TestBackupWaitIsAScaleInProgress: a scale-in waiting for the backup is a membership change in
// progress, so ScaleOperationInProgress stays True and carries MembershipWaitBackupNotReady.
func TestBackupWaitIsAScaleInProgress(t *testing.T) {
	d := Plan(Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, HeardKnown: true,
		Backup: backupgate.Gate{Holds: true}, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3), voter(4)}})
	if d.Rule != RuleBackupNotReady || !d.InProgress() || d.Rule.CamelCase() != "MembershipWaitBackupNotReady" {
		t.Fatalf("Plan = %s (in progress %v), want %s in progress", d.Rule, d.InProgress(), RuleBackupNotReady)
	}
}

// TestPeerURLMovedBetweenMembers: an additional URL moved from one member to another is taken
// off the first before the second gets it, whatever order etcd lists them in.
func TestPeerURLMovedBetweenMembers(t *testing.T) {
	const moved = "https://10.0.0.7:2380"
	svc := func(i int) string { return fmt.Sprintf("https://etcd-%d.etcd-peer.ns.svc:2380", i) }
	giver := with(voter(1), func(m *Member) { m.PeerURLs, m.PodPeerURLs = []string{moved, svc(1)}, []string{svc(1)} })
	taker := with(voter(2), func(m *Member) { m.PeerURLs, m.PodPeerURLs = []string{svc(2)}, []string{svc(2), moved} })
	for _, tc := range []struct {
		name    string
		members []Member
	}{
		{"taker listed first", []Member{leader(voter(0)), taker, giver}},
		{"giver listed first", []Member{leader(voter(0)), giver, taker}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, HeardKnown: true, Members: tc.members}
			d := Plan(o)
			if d.Action != ActionUpdatePeerURL || d.Member.ID != giver.ID || !slices.Equal(d.PeerURLs, []string{svc(1)}) {
				t.Fatalf("Plan = %+v, want %x's URLs to %s first", d, giver.ID, svc(1))
			}
			for i := range o.Members {
				if o.Members[i].ID == giver.ID {
					o.Members[i].PeerURLs = d.PeerURLs
				}
			}
			if d = Plan(o); d.Action != ActionUpdatePeerURL || d.Member.ID != taker.ID || !slices.Equal(d.PeerURLs, []string{svc(2), moved}) {
				t.Fatalf("then Plan = %+v, want %x's URLs to include %s", d, taker.ID, moved)
			}
		})
	}
}
