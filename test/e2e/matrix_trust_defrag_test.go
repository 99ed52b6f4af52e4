package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
)

// The matrix's ca-rotation and defragmentation rows, and the store-unreachable cells of the
// operations that wait while BackupReady is False (scale-in, the CA rotation's restarts,
// defragmentation).

const (
	// storeHeld is how long a store cell watches the operation hold once BackupReady is False and
	// the operation says it waits: three times what a step takes here, so a step that was not
	// held would show (TestRolloutWaitsForBackupStore's figure).
	storeHeld = 15 * time.Second
	// storeGrace: a step the operator decided on a status read before BackupReady turned False
	// may still land just after; the hold is judged from then on.
	storeGrace = 2 * time.Second
	// storeWaitBound is how long the operation may take to say it waits for the backup: a
	// defragmentation run that finished before the gate held waits at the schedule's next run,
	// up to a minute later.
	storeWaitBound = 2 * time.Minute
)

// heldOperation is an operation that must not go on while BackupReady is False.
type heldOperation struct {
	what string
	// step says where the operation stands (a step changes it) and whether it is done.
	step func(ctx context.Context) (state string, done bool, err error)
	// waiting: the operation says it waits for the backup (its condition or Event).
	waiting func(ctx context.Context) (bool, error)
}

// holdWhileStoreAway is the store-unreachable fault for an operation that waits while
// BackupReady is False: takeStoreAway, then holdThenBringStoreBack.
func holdWhileStoreAway(ctx context.Context, e *env, op heldOperation) {
	e.t.Helper()
	holdThenBringStoreBack(ctx, e, op, takeStoreAway(ctx, e))
}

// takeStoreAway stops the cell's S3 server and waits until BackupReady is False (the agents'
// failed uploads reported: longer than a fixed outage could promise); it returns when the store
// stopped.
func takeStoreAway(ctx context.Context, e *env) time.Time {
	t := e.t
	t.Helper()
	if e.backup == nil {
		t.Fatal("the cluster has no backup store to take away")
	}
	if err := e.backup.s3.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	e.waitFor(ctx, "BackupReady False with the store away", backupReadyIs(e.cluster, druidv1alpha1.ConditionFalse))
	t.Logf("BackupReady False %s after the store stopped", time.Since(stopped).Round(100*time.Millisecond))
	return stopped
}

// holdDone: the operation is over, or has nothing left that the gate holds.
func holdDone(ctx context.Context, e *env, op heldOperation) bool {
	e.t.Helper()
	sleepCtx(ctx, storeGrace)
	_, done := firstStep(ctx, e, op)
	return done
}

// firstStep is op's step, asked again while it cannot be read (a StatefulSet not observed yet, no
// leader answering for a moment).
func firstStep(ctx context.Context, e *env, op heldOperation) (state string, done bool) {
	e.t.Helper()
	e.waitFor(ctx, "where "+op.what+" stands", func(ctx context.Context) (bool, error) {
		var err error
		state, done, err = op.step(ctx)
		return err == nil, err
	})
	return state, done
}

// holdThenBringStoreBack, with the store away since stopped and BackupReady False, checks that
// the operation is not done, watches it take no step while it says it waits for the backup, for
// storeHeld, and starts the store again. The caller then waits for the operation to finish.
func holdThenBringStoreBack(ctx context.Context, e *env, op heldOperation, stopped time.Time) {
	t := e.t
	t.Helper()
	sleepCtx(ctx, storeGrace)
	state, done := firstStep(ctx, e, op)
	if done {
		// Either it ended before the gate could hold (asked before BackupReady turned False), or it
		// did not wait (asked after): the hold was not shown either way.
		t.Fatalf("%s was over %s after BackupReady turned False (the store stopped %s ago): it ended before the gate could hold, or did not wait",
			op.what, storeGrace, time.Since(stopped).Round(100*time.Millisecond))
	}
	t.Logf("with BackupReady False, %s stands at %s", op.what, state)
	heldFrom := time.Now()
	var saidWaiting time.Duration = -1
	for {
		now, _, err := op.step(ctx)
		if err == nil && now != state {
			t.Errorf("%s went on while BackupReady is False: %s → %s", op.what, state, now)
			break
		}
		if saidWaiting < 0 {
			if ok, _ := op.waiting(ctx); ok {
				saidWaiting = time.Since(heldFrom)
			}
		}
		if saidWaiting >= 0 && time.Since(heldFrom) >= max(storeHeld, saidWaiting+storeHeld/3) {
			break
		}
		if time.Since(heldFrom) > storeWaitBound {
			t.Errorf("%s did not say it waits for the backup (%s) within %s of BackupReady False", op.what, backupgate.Wait, storeWaitBound)
			break
		}
		if ok, err := backupReadyIs(e.cluster, druidv1alpha1.ConditionFalse)(ctx); !ok && err != nil {
			t.Logf("with the store still away: %v", err)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	if err := e.backup.s3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("store back after %s: %s held for %s with BackupReady False (said it waits %s in)", time.Since(stopped).Round(100*time.Millisecond),
		op.what, time.Since(heldFrom).Round(100*time.Millisecond), saidWaiting.Round(100*time.Millisecond))
}

// rolloutHeld is a rolling restart as a heldOperation: its step is the member pods not at the
// update revision and not terminating (a deletion takes one away), its wait AllMembersUpdated's
// reason.
func rolloutHeld(e *env, what string) heldOperation {
	reason := rollout.RuleBackupNotReady.CamelCase()
	return heldOperation{what: what,
		step: func(ctx context.Context) (string, bool, error) {
			sts, err := e.cluster.StatefulSet(ctx)
			if err != nil {
				return "", false, err
			}
			if sts.Status.ObservedGeneration < sts.Generation {
				return "", false, fmt.Errorf("the StatefulSet controller has not seen generation %d yet", sts.Generation)
			}
			pods, err := e.cluster.Pods(ctx)
			if err != nil {
				return "", false, err
			}
			var outdated []string
			for _, p := range framework.Observe(sts, pods).Pods {
				if !p.Terminating && rollout.IsOutdated(p, sts.Status.UpdateRevision) {
					outdated = append(outdated, p.Name)
				}
			}
			sort.Strings(outdated)
			return "outdated [" + strings.Join(outdated, " ") + "]", len(outdated) == 0, nil
		},
		waiting: func(ctx context.Context) (bool, error) {
			c, err := e.allMembersUpdated(ctx)
			return err == nil && c != nil && c.Reason == reason, err
		}}
}

// caRotationCell is TestCARotatedThroughBundle with fault injected once the first member runs the
// template with the old+new bundle, on the member the restart replaces next (not the leader). The
// store is taken away then too, but the gate holds only once BackupReady is False, seconds later:
// the hold is watched in the first restart if any of it is left, else in the rotation's second
// restart (the new CA alone), which is then asked with the store still away.
func caRotationCell(fault string, promise scenariopkg.Promise) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		if fault == faultStore {
			var stopped time.Time
			held := false
			hold := func(ctx context.Context, e *env, restart string) {
				if held {
					return
				}
				if stopped.IsZero() {
					stopped = takeStoreAway(ctx, e)
				}
				op := rolloutHeld(e, "the CA rotation's "+restart)
				if restart == "first restart" && holdDone(ctx, e, op) {
					t.Logf("the first restart was over when BackupReady turned False: the hold is watched in the second")
					return
				}
				holdThenBringStoreBack(ctx, e, op, stopped)
				held = true
			}
			runCARotationThroughBundle(t, caRotationRun{promise: promise, record: record, backup: true,
				duringRestart: func(ctx context.Context, e *env) { hold(ctx, e, "first restart") },
				duringNewOnly: func(ctx context.Context, e *env) { hold(ctx, e, "second restart") }})
			return
		}
		runCARotationThroughBundle(t, caRotationRun{promise: promise, record: record, apiLink: fault == faultAPIServer,
			duringRestart: func(ctx context.Context, e *env) { injectFault(ctx, e, fault, e.outdatedVictim(ctx)) }})
	}}
}

// defragCell is TestScheduledDefragmentationUnderLoad with fault injected once the first member
// is defragmented; a member fault goes on a follower not defragmented yet, whose turn the run then
// has to wait for (or whose defragmentation fails, the leader and the member done serving).
func defragCell(fault string) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		runDefrag(t, defragRun{promise: defragPromise, record: record,
			backup: fault == faultStore, apiLink: fault == faultAPIServer,
			fault: func(ctx context.Context, e *env, defragmented []string) string {
				switch fault {
				case faultStore:
					holdWhileStoreAway(ctx, e, defragHeld(e))
					return ""
				case faultKill, faultPartition:
					var left []int
					for i := 0; i < e.cluster.Replicas; i++ {
						if !slices.Contains(defragmented, e.cluster.PodName(i)) {
							left = append(left, i)
						}
					}
					if len(left) == 0 {
						left = []int{0, 1, 2}
					}
					victim := e.followerAmong(ctx, left...)
					injectFault(ctx, e, fault, victim)
					return e.cluster.PodName(victim)
				default:
					injectFault(ctx, e, fault, 0)
					return ""
				}
			}})
	}}
}

// defragHeld is the defragmentation schedule as a heldOperation: its step is the count of
// Defragmented Events (runs recur: never done), its wait the DefragmentationWaiting Event of the
// backup gate.
func defragHeld(e *env) heldOperation {
	return heldOperation{what: "the defragmentation schedule",
		step: func(ctx context.Context) (string, bool, error) {
			evs, err := readDefragEvents(ctx, e.stack, e.cluster.Namespace)
			return fmt.Sprintf("%d members defragmented", len(evs.defragmented)), false, err
		},
		waiting: func(ctx context.Context) (bool, error) {
			evs, err := readDefragEvents(ctx, e.stack, e.cluster.Namespace)
			for _, w := range evs.waits {
				if strings.Contains(w, "["+string(defrag.RuleBackupNotReady)+"]") {
					return true, nil
				}
			}
			return false, err
		}}
}

// scaleInStoreCell is the scale-in 5 → 3 with the store away. A step takes seconds and the whole
// scale-in about five, BackupReady's detection about ten (the agents' next failed upload, then the
// status): a store stopped once the scale-in is under way is back in the table as a scale-in
// that ended before the gate could hold. So the store is taken away first, the scale-in is asked
// once BackupReady is False, and it must take no step (no member removed) while it says it waits,
// then finish once the store is back.
func scaleInStoreCell() matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		op := framework.StartOperator(t, sharedStack(t).Cluster.RESTConfig(), operatorDefaults)
		reason := membership.RuleBackupNotReady.CamelCase()
		var stopped time.Time
		runScaleWith(t, scaleScenario{name: "matrix-5-to-3-" + faultStore, from: 5, to: 3,
			promise: scaleNoQuorumLoss, record: record, backup: true,
			beforeScale: func(ctx context.Context, e *env) {
				e.waitFor(ctx, "BackupReady True before the store goes", backupReadyIs(e.cluster, druidv1alpha1.ConditionTrue))
				stopped = takeStoreAway(ctx, e)
			},
			during: func(ctx context.Context, e *env) {
				holdThenBringStoreBack(ctx, e, heldOperation{what: "the scale-in",
					step: func(ctx context.Context) (string, bool, error) {
						members, err := memberList(ctx, e)
						if err != nil {
							return "", false, err
						}
						var names []string
						for _, m := range members {
							names = append(names, m.Name)
						}
						sort.Strings(names)
						return "members [" + strings.Join(names, " ") + "]", len(names) <= 3, nil
					},
					waiting: func(ctx context.Context) (bool, error) {
						etcd, err := e.cluster.Get(ctx)
						if err != nil {
							return false, err
						}
						c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress)
						return c != nil && c.Reason == reason, nil
					}}, stopped)
			}}, op)
	}}
}
