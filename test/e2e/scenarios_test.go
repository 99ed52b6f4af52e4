package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
)

const etcdContainer = "etcd"

// kill makes member i dead: its etcd container crashes on every start, so it stays down (Dead:
// CrashLoopBackOff) until the rollout replaces it and the fault is lifted.
func kill(i int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		e.stack.Sim.CrashOnStart(e.cluster.PodKey(i), etcdContainer, true)
		if err := e.stack.Sim.Kill(e.cluster.PodKey(i), etcdContainer); err != nil {
			e.t.Fatal(err)
		}
		e.waitNotReady(ctx, i)
	}
}

// fixed lifts the crash fault: what the update repairs.
func fixed(pods ...int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		for _, i := range pods {
			e.stack.Sim.CrashOnStart(e.cluster.PodKey(i), etcdContainer, false)
		}
	}
}

// waitUpdated waits until at least n members run the update revision (the rollout is under way).
func (e *env) waitUpdated(ctx context.Context, n int) {
	e.t.Helper()
	e.waitFor(ctx, fmt.Sprintf("%d members at the bumped template", n), func(ctx context.Context) (bool, error) {
		st, err := e.cluster.State(ctx)
		// Until the Etcd controller has written the bumped image, every pod is "updated" to the old revision.
		return err == nil && st.Image == e.bumpedImage && st.UpdateRevision != "" && st.Updated >= n, err
	})
}

// TestRolloutHealthy: followers first, then leadership moved to an updated member (MoveLeader)
// before the leader's pod goes: exactly one leader change and no quorum loss.
func TestRolloutHealthy(t *testing.T) {
	run(t, scenario{name: "healthy", promise: scenariopkg.Handover, wantEvents: []string{"LeadershipHandedOver"}})
}

func TestRolloutOneMemberDead(t *testing.T) {
	run(t, scenario{name: "one-dead", promise: scenariopkg.Handover, beforeBump: kill(0), afterBump: fixed(0)})
}

func TestRolloutOneMemberHung(t *testing.T) {
	run(t, scenario{name: "one-hung", promise: scenariopkg.Handover, beforeBump: func(ctx context.Context, e *env) {
		if err := e.cluster.HangMember(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}})
}

func TestRolloutOneMemberPartitioned(t *testing.T) {
	run(t, scenario{name: "one-partitioned", promise: scenariopkg.Handover, beforeBump: func(ctx context.Context, e *env) {
		if err := e.cluster.PartitionMember(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestRolloutMemberKilledMidRollout and TestRolloutOperatorRestarted are the matrix's cells
// rollout/member-sigkill and rollout/operator-restarted now (matrix_test.go).

func TestRolloutTwoMembersDead(t *testing.T) {
	// Quorum is already lost before the bump: the rollout must still complete (dead members
	// first) and the cluster recover.
	run(t, scenario{name: "two-dead", quorumLost: true,
		promise: scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges,
			Waived: "two of three members dead: the quorum is lost before the bump and comes back only as the rollout replaces them, " +
				"and leadership is then won by election"},
		beforeBump: func(ctx context.Context, e *env) { kill(0)(ctx, e); kill(1)(ctx, e) },
		afterBump:  fixed(0, 1)})
}

func TestRolloutTemplateChangedAgain(t *testing.T) {
	// The same etcd 3.7.3 under another image name: a new revision mid-rollout, so pods already
	// updated to the first one count as outdated again.
	again := "registry.k8s.io/etcd:3.7.3-0"
	run(t, scenario{name: "template-changed-again", promise: scenariopkg.Handover, finalImage: again, afterBump: func(ctx context.Context, e *env) {
		e.waitUpdated(ctx, 1)
		if err := e.cluster.SetImage(ctx, again); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestRolloutGateOffThenOn turns the gate off while the member our controller replaced has not
// rejoined yet (its new etcd crashes on start until the test lifts that): OnDelete is kept, with
// the reason in status and an Event, until it has; then the StatefulSet controller takes over,
// and the gate goes on again after its first pod. No quorum loss, and no deletion, by either
// controller, while another member was terminating or not back.
func TestRolloutGateOffThenOn(t *testing.T) {
	run(t, scenario{name: "gate-off-then-on",
		promise: scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
			Waived: "while the gate is off the StatefulSet controller replaces a pod without a handover: if that is the leader, " +
				"etcd transfers leadership at shutdown to any follower, possibly an outdated one our controller hands over from again"},
		afterBump: func(ctx context.Context, e *env) {
			for i := 0; i < e.cluster.Replicas; i++ {
				e.stack.Sim.CrashOnStart(e.cluster.PodKey(i), etcdContainer, true)
			}
			e.waitFor(ctx, "a member pod replaced by the OnDelete controller and not back", func(ctx context.Context) (bool, error) {
				sts, err := e.cluster.StatefulSet(ctx)
				if err != nil || sts.Status.UpdateRevision == "" {
					return false, err
				}
				pods, err := e.cluster.Pods(ctx)
				for _, p := range pods {
					if p.Labels[appsv1.StatefulSetRevisionLabel] == sts.Status.UpdateRevision && !framework.PodReady(&p) {
						return true, nil
					}
				}
				return false, err
			})
			off := e.opts
			off.FeatureGates = map[string]bool{"QuorumAwareUpdatesWithOnDelete": false}
			e.restartOperator(off)
			e.waitFor(ctx, "the hold in status (AllMembersUpdated reason UpdateStrategyHeld)", func(ctx context.Context) (bool, error) {
				etcd, err := e.cluster.Get(ctx)
				if err != nil {
					return false, err
				}
				c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersUpdated)
				if c == nil || c.Reason != "UpdateStrategyHeld" {
					return false, nil
				}
				t.Logf("status while held: %s: %s", c.Reason, c.Message)
				return true, nil
			})
			if sts, err := e.cluster.StatefulSet(ctx); err != nil || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
				t.Fatalf("the StatefulSet left OnDelete while a replaced member was not back (err %v)", err)
			}
			fixed(0, 1, 2)(ctx, e)
			e.waitFor(ctx, "the StatefulSet handed to RollingUpdate", func(ctx context.Context) (bool, error) {
				sts, err := e.cluster.StatefulSet(ctx)
				return err == nil && sts.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType, err
			})
			holds := scenariopkg.EventsWithin(ctx, e.cluster, "HoldOndeleteUpdatedNotReady", scenariopkg.EventDelivery)
			if len(holds) == 0 {
				t.Errorf("no HoldOndeleteUpdatedNotReady Event within %s", scenariopkg.EventDelivery)
			}
			for _, h := range holds {
				t.Logf("hold: %s", h)
			}
			// The StatefulSet controller takes over; give it one pod, then hand back.
			e.waitUpdated(ctx, 2)
			on := e.opts
			on.FeatureGates = map[string]bool{"QuorumAwareUpdatesWithOnDelete": true}
			e.restartOperator(on)
		}})
}

// eventsWithReasonPrefix lists "reason: message" of the cluster's Events whose reason starts with prefix.
func (e *env) eventsWithReasonPrefix(ctx context.Context, prefix string) []string {
	e.t.Helper()
	events, err := e.cluster.EventsWithReason(ctx, prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	return events
}

func TestRolloutBadImageThenFixed(t *testing.T) {
	good := framework.EtcdImage(toVersion)
	run(t, scenario{name: "bad-image-then-fixed", promise: scenariopkg.Handover, bumpImage: "quay.io/coreos/etcd:v9.9.9", finalImage: good,
		afterBump: func(ctx context.Context, e *env) {
			// One pod is replaced and cannot pull its image; the controller must hold there.
			e.waitFor(ctx, "a pod failing to pull", func(ctx context.Context) (bool, error) {
				pods, err := e.cluster.Pods(ctx)
				for _, p := range pods {
					for _, cs := range p.Status.ContainerStatuses {
						if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
							return true, nil
						}
					}
				}
				return false, err
			})
			time.Sleep(3 * time.Second) // long enough for a wrong controller to delete a second pod
			st, err := e.cluster.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Ready < e.cluster.Replicas-1 {
				t.Fatalf("the controller went on past a pod that cannot start: %s", st)
			}
			if err := e.cluster.SetImage(ctx, good); err != nil {
				t.Fatal(err)
			}
		}})
}

func TestRolloutSingleNode(t *testing.T) {
	run(t, scenario{name: "single-node", replicas: 1,
		promise: scenariopkg.Promise{LeaderChanges: 0,
			Waived: "one member: replacing it takes the only voter away, and there is nobody to hand over to (it comes back as the same member, so leadership does not change)"}})
}

func TestRolloutFiveMembersOneDead(t *testing.T) {
	run(t, scenario{name: "5-one-dead", replicas: 5, promise: scenariopkg.Handover, beforeBump: kill(0), afterBump: fixed(0)})
}

// TestRolloutHandoverFails: every handover fails, and the leader still goes last without a
// quorum loss: after handover.maxAttempts failures it is deleted as the leader, etcd hands
// leadership over at its shutdown, and the controller says so (HandoverFailed, then
// LeaderDeleted with the rule participating/leader-handover-failed).
//
// The failure comes from a handover timeout no MoveLeader can meet (1 ns: the call ends on the
// client before it is sent). The fault, a leader partitioned from its transferee, cannot
// be set up against this planner: it picks the transferee among the members that are ready and
// answer Status, by applied index, and a member cut off from the leader stops applying and fails
// its linearizable /readyz within seconds, so it is never picked; only a partition landing in the
// milliseconds between the decision and the MoveLeader would do, which a test cannot aim at.
// The partition itself is tested on real members without a kubelet, where nothing turns the cut
// off member unready (test/integration TestHandoverRetriesAnotherTransferee and
// TestHandoverFailuresFallBackToDeletingTheLeader: transferees muted with iptables, every
// MoveLeader to them fails by etcd's own timeout, the next attempt goes to another member).
func TestRolloutHandoverFails(t *testing.T) {
	run(t, scenario{name: "handover-fails", promise: scenariopkg.Handover,
		wantEvents: []string{"HandoverFailed", "LeaderDeleted"},
		tune: func(c *configv1alpha1.OnDeleteControllerConfiguration) {
			c.Handover.Timeout = metav1.Duration{Duration: time.Nanosecond}
			c.Handover.MaxAttempts = 1
		},
		afterBump: func(ctx context.Context, e *env) {
			// Events stay; lastOperation moves on with the next decision, so the check reads them.
			e.waitFor(ctx, "the leader deleted after the failed handover (a LeaderDeleted Event naming participating/leader-handover-failed)", func(ctx context.Context) (bool, error) {
				for _, ev := range e.eventsWithReasonPrefix(ctx, "LeaderDeleted") {
					if strings.Contains(ev, string(rollout.RuleLeaderHandoverFailed)) {
						return true, nil
					}
				}
				return false, nil
			})
		}})
}

// TestRolloutHandoverPartitioned: the leader is partitioned from the member it hands leadership
// to, a real fault on the network: the transferee is muted (nobody can reach its peer port, so
// the leader does not hear it while it still hears the leader), so the MoveLeader fails by etcd's
// own behaviour (the leader's TimeoutNow arrives, the transferee's campaign is heard by no one)
// and the controller's bounded wait. The failure is recorded with its target, the next attempt
// goes to another member, which takes over; the old leader, a follower now, is not deleted while
// the muted member cannot serve a read, and goes once it is healed: exactly one leader change and
// no quorum loss.
//
// Aiming the fault: the planner picks the transferee by applied index among members that are
// ready, and a member the leader does not hear fails its linearizable /readyz (turning not ready
// after two probe periods, ~4 s). So the fault is set while no decision can be made, with the
// operator stopped once the last follower has been replaced and every updated member is back;
// the writer is paused first, so every member has applied the same index and the planner's
// tie-break (the lowest ordinal) names the transferee, which is the one muted. The operator is
// then started again: its first decision is the handover, well inside the muted member's ready
// window. The handover timeout is 1 s, shorter than the 5 s after which the muted member's
// stale stream connections time out and its messages find another way to the leader.
// Five members, so the leader keeps a quorum of heard members (4 of 5) while one is muted. The
// pause is the scenario's longest write gap.
func TestRolloutHandoverPartitioned(t *testing.T) {
	run(t, scenario{name: "handover-partitioned", replicas: 5, promise: scenariopkg.Handover,
		wantEvents: []string{"HandoverFailed", "LeadershipHandedOver"},
		tune: func(c *configv1alpha1.OnDeleteControllerConfiguration) {
			c.Handover.Timeout = metav1.Duration{Duration: time.Second}
		},
		afterBump: func(ctx context.Context, e *env) {
			followers := int(e.cluster.Replicas) - 1
			e.waitUpdated(ctx, followers) // the last follower's replacement created, not back yet
			e.stopOperator()
			e.waitFor(ctx, "every replaced follower ready, the outdated leader left", func(ctx context.Context) (bool, error) {
				st, err := e.cluster.State(ctx)
				return err == nil && st.Updated == followers && st.Ready == int(e.cluster.Replicas), err
			})
			writer := e.instruments.Recorder.Writer()
			if err := writer.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // the last put's commit reaches every member
			leader := e.currentLeader()
			target := 0 // the lowest ordinal that does not lead
			if e.cluster.PodName(target) == leader {
				target = 1
			}
			muted := e.cluster.PodName(target)
			if err := e.stack.Sim.Mute(e.cluster.PodKey(target), int(resources.DefaultServerPort)); err != nil {
				t.Fatal(err)
			}
			t.Logf("writer paused, %s muted (the leader %s does not hear it); operator starting", muted, leader)
			e.startOperator(e.opts)

			failed := "moving leadership from " + leader + " to " + muted + " failed"
			e.waitFor(ctx, "a HandoverFailed Event: "+failed, func(ctx context.Context) (bool, error) {
				return slices.ContainsFunc(e.eventsWithReasonPrefix(ctx, "HandoverFailed"), func(ev string) bool {
					return strings.Contains(ev, failed)
				}), nil
			})
			e.waitFor(ctx, "leadership handed over from "+leader+" to another member (LeadershipHandedOver)", func(ctx context.Context) (bool, error) {
				return len(e.eventsWithReasonPrefix(ctx, "LeadershipHandedOver")) > 0, nil
			})
			for _, ev := range e.eventsWithReasonPrefix(ctx, "LeadershipHandedOver") {
				if strings.Contains(ev, " to "+muted) {
					t.Errorf("leadership went to the muted member: %s", ev)
				}
			}
			writer.Resume()
			// The old leader, a follower now, waits for the muted member: it cannot serve a read
			// (wait/handover-target-unheard) until its readiness probe fails too
			// (wait/updated-not-participating).
			e.waitFor(ctx, "the old leader's deletion held for "+muted, func(ctx context.Context) (bool, error) {
				c, err := e.allMembersUpdated(ctx)
				if err != nil || c == nil || !strings.Contains(c.Message, muted) ||
					(c.Reason != rollout.RuleHandoverTargetUnheard.CamelCase() && c.Reason != rollout.RuleUpdatedNotParticipating.CamelCase()) {
					return false, err
				}
				t.Logf("status: %s: %s", c.Reason, c.Message)
				return true, nil
			})
			if pods, err := e.cluster.Pods(ctx); err != nil || !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == leader && p.DeletionTimestamp == nil }) {
				t.Fatalf("the old leader %s was deleted while %s was cut off (err %v)", leader, muted, err)
			}
			if err := e.stack.Sim.Heal(e.cluster.PodKey(target)); err != nil {
				t.Fatal(err)
			}
		}})
}

// currentLeader is the leader of the newest term the instruments' leader monitor has seen.
func (e *env) currentLeader() string {
	e.t.Helper()
	epochs := e.instruments.Recorder.LeaderMonitor().Snapshot().Epochs
	if len(epochs) == 0 || epochs[len(epochs)-1].Leader == "" {
		e.t.Fatalf("the leader monitor has seen no named leader: %+v", epochs)
	}
	return epochs[len(epochs)-1].Leader
}

// TestRolloutLaggingFollower: a member the rollout has replaced comes back behind a slow link
// to its peers, so it lags the leader's applied index while it stays ready. Replacing the next
// outdated member would leave the lagging one as one of the two voters the quorum needs: the
// catch-up gate waits (AllMembersUpdated reason WaitCatchUp, naming the member) decision after
// decision; once the link is healed the rollout goes on, with no quorum loss.
//
// Why a slow link: a member cut off from the leader loses it after an election timeout, its
// linearizable /readyz fails and it turns not ready, so it is simply not participating
// (wait/updated-not-participating). Behind a link that delays the peers' packets it keeps its
// leader (heartbeats arrive late, well within the election timeout) and applies every entry
// late by the delay: a steady lag of about delay × write rate, while its /readyz, which goes
// through the leader once, answers in about twice the delay. The operator's Status calls and
// the kubelet's probes come from the node, not from a peer, so they are not delayed and the lag
// they see is the member's. An outdated lagging member would just be replaced first, so the
// fault goes on a member that remains.
//
// A slow disk was measured first and is not enough: throttled fsyncs (blkio write IOPS) make
// the follower apply in batches, and between batches its lag falls to the bound and below, so
// the gate let a deletion through within a few decisions (see laggingLinkDelay).
//
// The controller must not decide between the replaced member's return and the fault. Every new
// etcd crashes on start from before the bump, so the first replacement cannot rejoin and the
// controller holds (an updated pod that has not rejoined blocks every participating deletion);
// the link is slowed while it holds, and the replacement starts behind it once the crash is
// lifted.
func TestRolloutLaggingFollower(t *testing.T) {
	run(t, scenario{name: "lagging-follower", promise: scenariopkg.Handover,
		tune: func(c *configv1alpha1.OnDeleteControllerConfiguration) {
			c.MaxAppliedIndexLag = ptr.To[int64](laggingMaxAppliedIndexLag)
		},
		beforeBump: func(ctx context.Context, e *env) {
			for i := 0; i < e.cluster.Replicas; i++ {
				e.stack.Sim.CrashOnStart(e.cluster.PodKey(i), etcdContainer, true)
			}
		},
		afterBump: func(ctx context.Context, e *env) {
			var held []int
			e.waitFor(ctx, "the first member replaced and in its sandbox, its etcd crashing (the controller holds)", func(ctx context.Context) (bool, error) {
				held = e.updatedNotReady(ctx)
				if len(held) == 0 {
					return false, nil
				}
				_, err := e.stack.Sim.PodIP(e.cluster.PodKey(held[0])) // the fault goes on its network
				return err == nil, nil
			})
			if st, err := e.cluster.State(ctx); err != nil || st.Updated != 1 {
				t.Fatalf("the controller did not hold at the first replacement: %+v, %v", st, err)
			}
			lagging := e.cluster.PodName(held[0])
			var peers []string
			for i := 0; i < e.cluster.Replicas; i++ {
				if i == held[0] {
					continue
				}
				ip, err := e.stack.Sim.PodIP(e.cluster.PodKey(i))
				if err != nil {
					t.Fatal(err)
				}
				peers = append(peers, ip)
			}
			if err := e.stack.Sim.DelayFrom(e.cluster.PodKey(held[0]), laggingLinkDelay, peers...); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s starts behind a slow link to its peers %v (%s each way)", lagging, peers, laggingLinkDelay)
			fixed(0, 1, 2)(ctx, e)
			e.waitCatchUp(ctx, lagging)
			if err := e.stack.Sim.Heal(e.cluster.PodKey(held[0])); err != nil {
				t.Fatal(err)
			}
		}})
}

const (
	// laggingLinkDelay is the slow link's delay each way. Measured in this scenario (a writer at
	// 40/s, the operator sampling every member's Status at once): behind 250 ms the member lagged
	// 10 entries at every decision over 20 s (16 once) and stayed ready. A slow disk instead
	// (blkio at 30 write IOPS) gave lags of 3 to 25 whose dips let the gate through 2 times in 9
	// decisions; at 20 IOPS and below /readyz came near or past the probe's 2 s timeout.
	laggingLinkDelay = 250 * time.Millisecond
	// laggingMaxAppliedIndexLag is the gate's bound: above a healthy member's lag (0 or 1 at
	// 40 writes/s), well below the delayed member's.
	laggingMaxAppliedIndexLag = 2
	// catchUpHolds is how many decisions in a row must wait for the lagging member: one could be
	// a sample's luck; several show the gate holds while the lag lasts.
	catchUpHolds = 3
)

// waitCatchUp waits until the catch-up gate has held the rollout for pod over catchUpHolds
// decisions (AllMembersUpdated reason WaitCatchUp naming it; each decision's message has new
// applied indexes) and checks that no pod was replaced meanwhile. A wait naming other members
// only is logged and waited past.
func (e *env) waitCatchUp(ctx context.Context, pod string) {
	e.t.Helper()
	st, err := e.cluster.State(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var holds []string
	other := ""
	e.waitFor(ctx, fmt.Sprintf("the catch-up gate waiting for %s over %d decisions (AllMembersUpdated reason WaitCatchUp)", pod, catchUpHolds), func(ctx context.Context) (bool, error) {
		c, err := e.allMembersUpdated(ctx)
		if err != nil || c == nil || c.Reason != rollout.RuleCatchUp.CamelCase() || (len(holds) > 0 && c.Message == holds[len(holds)-1]) {
			return false, err
		}
		if !strings.Contains(c.Message, pod) {
			if c.Message != other {
				other = c.Message
				e.t.Logf("a catch-up wait not naming %s: %s", pod, c.Message)
			}
			return false, nil
		}
		holds = append(holds, c.Message)
		e.t.Logf("status: %s: %s", c.Reason, c.Message)
		return len(holds) >= catchUpHolds, nil
	})
	if now, err := e.cluster.State(ctx); err != nil || now.Updated != st.Updated {
		e.t.Fatalf("a pod was replaced while the gate waited for %s: before %s, now %s (%v)", pod, st, now, err)
	}
}

// allMembersUpdated is the cluster's AllMembersUpdated condition, nil while it has none.
func (e *env) allMembersUpdated(ctx context.Context) (*druidv1alpha1.Condition, error) {
	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		return nil, err
	}
	return druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersUpdated), nil
}

// TestRolloutPartialBatch: 5 members replaced two at a time (the quorum's headroom). Every new
// etcd crashes on start until lifted, so the first batch stalls; then all but one recover. The
// stalled member keeps using up part of the headroom: the auditor (batch-aware) checks that no
// deletion ever left more voters unavailable than the headroom allows, and the rollout finishes
// once the last one is lifted.
func TestRolloutPartialBatch(t *testing.T) {
	run(t, scenario{name: "partial-batch", replicas: 5, concurrency: 2, promise: scenariopkg.Handover,
		tune: func(c *configv1alpha1.OnDeleteControllerConfiguration) { c.MaxConcurrentMemberUpdates = 2 },
		afterBump: func(ctx context.Context, e *env) {
			for i := 0; i < e.cluster.Replicas; i++ {
				e.stack.Sim.CrashOnStart(e.cluster.PodKey(i), etcdContainer, true)
			}
			var stalled []int
			e.waitFor(ctx, "a batch of two replaced members, both not back", func(ctx context.Context) (bool, error) {
				stalled = e.updatedNotReady(ctx)
				return len(stalled) >= 2, nil
			})
			t.Logf("batch stalled: %v; lifting the fault for all but %s", stalled, e.cluster.PodName(stalled[len(stalled)-1]))
			for i := 0; i < e.cluster.Replicas; i++ {
				if i != stalled[len(stalled)-1] {
					fixed(i)(ctx, e)
				}
			}
			last := stalled[len(stalled)-1]
			e.waitFor(ctx, "every other member replaced and back while one stalls", func(ctx context.Context) (bool, error) {
				st, err := e.cluster.State(ctx)
				stalledNow := e.updatedNotReady(ctx)
				return err == nil && st.Updated == e.cluster.Replicas && st.Terminating == 0 &&
					len(stalledNow) == 1 && stalledNow[0] == last, err
			})
			if etcd, err := e.cluster.Get(ctx); err == nil {
				if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersUpdated); c != nil {
					t.Logf("status while %s stalls: %s: %s", e.cluster.PodName(last), c.Reason, c.Message)
				}
			}
			fixed(last)(ctx, e)
		}})
}

// updatedNotReady lists the ordinals of pods at the update revision that are not ready.
func (e *env) updatedNotReady(ctx context.Context) []int {
	sts, err := e.cluster.StatefulSet(ctx)
	if err != nil || sts.Status.UpdateRevision == "" {
		return nil
	}
	pods, _ := e.cluster.Pods(ctx)
	var out []int
	for i := 0; i < e.cluster.Replicas; i++ {
		for _, p := range pods {
			if p.Name == e.cluster.PodName(i) && p.Labels[appsv1.StatefulSetRevisionLabel] == sts.Status.UpdateRevision && !framework.PodReady(&p) {
				out = append(out, i)
			}
		}
	}
	return out
}
