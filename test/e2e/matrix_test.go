package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
)

// The operation × fault matrix: every operation the operator runs, crossed with a fault injected
// once the operation is observably under way (the first member pod replaced, the first learner
// added, the scale-in's condition set, the restoring member's volume gone), under the writer, the
// deletion auditor and the linearizability check. Each cell states its promise (quorum loss
// allowed or not; acknowledged writes lost: 0; converged after the fault is healed, within the
// operation's bound) and asserts it with the instruments. A cell is one t.Run, named
// <operation>/<fault>.
//
// `make test` runs the cheap cells only (matrixCheap); `make matrix` (E2E_MATRIX=all) runs every
// cell and prints one table at the end of the run (printMatrix), which `make soak` repeats.

// matrixEnv selects every cell instead of the cheap ones.
const matrixEnv = "E2E_MATRIX"

// Fault ids: the matrix's columns, in the table's order.
const (
	faultKill      = "member-sigkill"
	faultPartition = "member-partitioned"
	faultOperator  = "operator-restarted"
	faultAPIServer = "apiserver-unreachable"
	faultStore     = "store-unreachable"
)

var matrixFaults = []string{faultKill, faultPartition, faultOperator, faultAPIServer, faultStore}

const (
	// partitionHold is how long a partitioned member stays cut off before it is healed: longer
	// than the kubelet takes to turn it not Ready and the operator to decide on that.
	partitionHold = 15 * time.Second
	// apiServerOutage is the outage of the apiserver, as the operator sees it.
	apiServerOutage = 30 * time.Second
	// storeOutage is how long the backup store stays away: long enough for BackupReady to go
	// False (a few delta periods) and for the operation to meet it.
	storeOutage = 30 * time.Second
)

// matrixFigures is what one cell measured, the table's cell.
type matrixFigures struct {
	quorumLossMs  int64
	lost          int
	leaderChanges int
	took          time.Duration
	linearizable  bool
	completed     bool
}

// matrixOperation is a row: how to run the operation with a fault injected mid-way.
type matrixOperation struct {
	id string
	// cells by fault id; a fault without a cell is TODO (not built yet) in the table.
	cells map[string]matrixCell
}

// matrixCell is one cell: run it, or say why not (n/a: the fault cannot meet the operation;
// todo: not built yet).
type matrixCell struct {
	run      func(t *testing.T, record func(matrixFigures))
	na, todo string
}

// matrixCheap are the cells `make test` runs (each replaces the e2e test it grew from:
// TestRolloutMemberKilledMidRollout, TestRolloutOperatorRestarted, TestScaleOutOperatorRestarted).
var matrixCheap = []string{"rollout/" + faultKill, "rollout/" + faultOperator, "scale-out-3-to-5/" + faultOperator}

// injectFault puts fault on member victim of e's cluster, holds it and heals it; it returns once
// the fault is lifted (a SIGKILLed member is brought back by its restartPolicy, the operator is
// running again).
func injectFault(ctx context.Context, e *env, fault string, victim int) {
	t := e.t
	t.Helper()
	start := time.Now()
	switch fault {
	case faultKill:
		if err := e.cluster.KillMember(victim); err != nil {
			t.Fatal(err)
		}
	case faultPartition:
		if err := e.cluster.PartitionMember(ctx, victim); err != nil {
			t.Fatal(err)
		}
		sleepCtx(ctx, partitionHold-time.Since(start))
		// A member the operator replaced meanwhile has a new network, without the fault.
		if err := e.cluster.HealMember(victim); err != nil {
			t.Logf("healing: %v", err)
		}
	case faultOperator:
		e.restartOperator(e.opts)
	case faultAPIServer:
		if e.apiLink == nil {
			t.Fatal("the operator runs without a link to cut (scenario.apiLink)")
		}
		e.apiLink.Cut()
		sleepCtx(ctx, apiServerOutage)
		e.apiLink.Restore()
	case faultStore:
		if e.backup == nil {
			t.Fatal("the cluster has no backup store to take away (scenario.backup)")
		}
		if err := e.backup.s3.Stop(); err != nil {
			t.Fatal(err)
		}
		sleepCtx(ctx, storeOutage)
		if err := e.backup.s3.Start(ctx); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	t.Logf("fault %s on %s injected and lifted after %s", fault, e.cluster.PodName(victim), time.Since(start).Round(100*time.Millisecond))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// leaderName is the name of the member that leads, "" when none answered.
func (e *env) leaderName(ctx context.Context) string {
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e))
	if err != nil {
		return ""
	}
	leader, ok := cs.Leader()
	if !ok {
		return ""
	}
	return leader.Name
}

// followerAmong is the first of the ordinals (in order) that is not the leader: a fault there
// takes a voter away without forcing an election, so a promise of no quorum loss can be made.
func (e *env) followerAmong(ctx context.Context, ordinals ...int) int {
	leader := e.leaderName(ctx)
	for _, i := range ordinals {
		if e.cluster.PodName(i) != leader && !strings.HasSuffix(leader, "-"+e.cluster.PodName(i)) {
			return i
		}
	}
	return ordinals[0]
}

// outdatedVictim is the highest ordinal whose pod is not at the update revision and not being
// deleted, avoiding the leader where another is left: the member the rollout replaces next.
func (e *env) outdatedVictim(ctx context.Context) int {
	sts, err := e.cluster.StatefulSet(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	pods, err := e.cluster.Pods(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	leader := e.leaderName(ctx)
	var candidates []int
	for i := e.cluster.Replicas - 1; i >= 0; i-- {
		for _, p := range pods {
			if p.Name == e.cluster.PodName(i) && p.DeletionTimestamp == nil && p.Labels[appsv1.StatefulSetRevisionLabel] != sts.Status.UpdateRevision {
				candidates = append(candidates, i)
			}
		}
	}
	for _, i := range candidates {
		if e.cluster.PodName(i) != leader {
			return i
		}
	}
	if len(candidates) > 0 {
		return candidates[0]
	}
	return 0
}

// rolloutCell is the rollout (3.6.8 → 3.7.3 on 3 members) with fault injected once the first
// member runs the new revision.
func rolloutCell(fault string, promise scenariopkg.Promise) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		run(t, scenario{name: "matrix-rollout-" + fault, promise: promise, record: record,
			backup: fault == faultStore, apiLink: fault == faultAPIServer,
			afterBump: func(ctx context.Context, e *env) {
				e.waitUpdated(ctx, 1)
				injectFault(ctx, e, fault, e.outdatedVictim(ctx))
			}})
	}}
}

// scaleCell is a membership change from → to with fault injected once it is under way: a
// learner in the member list (scale-out), the first member removed or the condition set
// (scale-in). The victim is a member that stays, and not the leader.
func scaleCell(from, to int32, fault string, promise scenariopkg.Promise) matrixCell {
	sc := scaleScenario{name: fmt.Sprintf("matrix-%d-to-%d-%s", from, to, fault), from: from, to: to, promise: promise}
	return membershipCell(fault, sc, func(ctx context.Context, e *env) {
		if to > from {
			e.waitLearner(ctx)
		} else {
			e.waitScaleInUnderWay(ctx, int(from))
		}
		injectFault(ctx, e, fault, e.followerAmong(ctx, 1, 2, 0))
	})
}

// replacedOrdinal is the member whose volume the member-replacement row loses.
const replacedOrdinal = 2

// replacementCell is TestMemberVolumeLost's replacement (etcd-2's volume lost on 3 members: the
// operator removes the member and adds it again through a learner) with fault injected once the
// replacement is under way: the new member in the member list, a learner unless it was promoted
// before it was seen. The victim is a member that stays, and not the leader.
func replacementCell(fault string, promise scenariopkg.Promise) matrixCell {
	sc := scaleScenario{name: "matrix-replacement-" + fault, from: 3, to: 3, skipScale: true, promise: promise}
	return membershipCell(fault, sc, func(ctx context.Context, e *env) {
		name := e.cluster.PodName(replacedOrdinal)
		old := memberID(ctx, e, name)
		loseVolumeWith(replacedOrdinal, func(ctx context.Context, e *env) {
			var state string
			e.waitFor(ctx, "the replacement under way (a learner, or "+name+" under a new ID)", func(ctx context.Context) (bool, error) {
				members, err := memberList(ctx, e)
				for _, m := range members {
					if m.IsLearner || (m.Name == name && m.ID != old) {
						state = fmt.Sprintf("member %q %x learner=%v started=%v (was %x)", m.Name, m.ID, m.IsLearner, len(m.ClientURLs) > 0, old)
						return true, nil
					}
				}
				return false, err
			})
			e.t.Logf("replacement under way: %s", state)
			injectFault(ctx, e, fault, e.followerAmong(ctx, 0, 1))
		})(ctx, e)
	})
}

// membershipCell runs sc on runScaleWith with during acting while it runs, on an operator of
// its own (behind a link to the apiserver for the apiserver fault), the cluster backed up for
// the store fault.
func membershipCell(fault string, sc scaleScenario, during func(ctx context.Context, e *env)) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		opts := operatorDefaults
		if fault == faultAPIServer {
			opts.APIServerLink = framework.NewAPIServerLink()
		}
		op := framework.StartOperator(t, sharedStack(t).Cluster.RESTConfig(), opts)
		sc.opts, sc.record, sc.backup = &opts, record, fault == faultStore
		sc.during = func(ctx context.Context, e *env) {
			e.apiLink = opts.APIServerLink
			during(ctx, e)
		}
		runScaleWith(t, sc, op)
	}}
}

// downgradeCell is TestRolloutDowngrade (3.7.3 → 3.6.8 on 3 members) with fault injected once
// the first member runs the old version (the new revision), on the member replaced next.
func downgradeCell(fault string, promise scenariopkg.Promise, events ...string) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		sc := downgradeScenario(3, nil, events...)
		sc.name, sc.promise, sc.record = "matrix-downgrade-"+fault, promise, record
		sc.backup, sc.apiLink = fault == faultStore, fault == faultAPIServer
		sc.afterBump = func(ctx context.Context, e *env) {
			e.waitUpdated(ctx, 1)
			injectFault(ctx, e, fault, e.outdatedVictim(ctx))
		}
		run(t, sc)
	}}
}

// volumeMoveCell is TestStorageClassChanged (3 members to volumes of another class and size)
// with fault injected once the first member is on its new volume, on the member moved next.
func volumeMoveCell(fault string, promise scenariopkg.Promise) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		runVolumeMove(t, volumeMove{name: "matrix-volume-" + fault, replicas: 3, promise: promise, record: record,
			backup: fault == faultStore, apiLink: fault == faultAPIServer,
			during: func(ctx context.Context, e *env) {
				e.waitFor(ctx, "a member on its new volume", func(ctx context.Context) (bool, error) {
					moved, _, err := e.onNewClaims(ctx)
					return len(moved) > 0, err
				})
				injectFault(ctx, e, fault, e.unmovedVictim(ctx))
			}})
	}}
}

// onNewClaims are the ordinals whose pod mounts the claim of the Etcd's claim template
// (resources.DesiredClaims), and those whose pod, not being deleted, does not.
func (e *env) onNewClaims(ctx context.Context) (moved, unmoved []int, err error) {
	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	claim := resources.DesiredClaims(etcd).Name
	pods, err := e.cluster.Pods(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i := range e.cluster.Replicas {
		name := e.cluster.PodName(i)
		for _, p := range pods {
			if p.Name != name {
				continue
			}
			on := slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim+"-"+name
			})
			switch {
			case on:
				moved = append(moved, i)
			case p.DeletionTimestamp == nil:
				unmoved = append(unmoved, i)
			}
		}
	}
	return moved, unmoved, nil
}

// unmovedVictim is the highest ordinal still on its old volume, avoiding the leader where
// another is left: the member the move takes next.
func (e *env) unmovedVictim(ctx context.Context) int {
	_, unmoved, err := e.onNewClaims(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(unmoved) == 0 {
		return 0
	}
	slices.Reverse(unmoved)
	return e.followerAmong(ctx, unmoved...)
}

// waitScaleInUnderWay waits until the scale-in has begun: a member removed, or
// ScaleOperationInProgress True.
func (e *env) waitScaleInUnderWay(ctx context.Context, from int) {
	e.t.Helper()
	e.waitFor(ctx, "the scale-in under way (a member removed or ScaleOperationInProgress True)", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress); c != nil && c.Status == druidv1alpha1.ConditionTrue {
			return true, nil
		}
		members, err := memberList(ctx, e)
		return err == nil && len(members) < from, err
	})
}

// restoreCell is a restore from the backup with fault injected once the restoring member's new
// pod exists. With one member (TestRestoreFromBackup's first half) the member's volume is lost
// and the fault falls on it; with three (its second half, DEP-01 scenario 10) two volumes are
// lost, a majority, and the fault falls on the survivor, the member that still holds data. Every
// write acknowledged before the last delta snapshot must survive (backupEnv.loseWith).
func restoreCell(fault string, replicas int32) matrixCell {
	return matrixCell{run: func(t *testing.T, record func(matrixFigures)) {
		opts := operatorDefaults
		if fault == faultAPIServer {
			opts.APIServerLink = framework.NewAPIServerLink()
		}
		namespace, op := inParallel(t, "e2e-matrix-restore-", opts)
		opts.WatchNamespaces = []string{namespace}
		s := sharedStack(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		e := &env{t: t, stack: s, opts: opts, operator: op, apiLink: opts.APIServerLink}
		b := createBackedUpCluster(ctx, e, namespace, replicas)
		e.backup = b
		rec := startRecorder(ctx, t, e.cluster, int(replicas))
		lost, victim := []int{0}, 0
		if replicas > 1 {
			lost = nil
			for i := 1; i < int(replicas); i++ {
				lost = append(lost, i)
			}
		}
		started := time.Now()
		out := b.loseWith(ctx, "matrix-"+fault, rec, int(replicas), func(ctx context.Context) {
			e.waitFor(ctx, "the restoring member's new pod", func(ctx context.Context) (bool, error) {
				_, err := s.Sim.PodIP(e.cluster.PodKey(lost[0]))
				return err == nil, nil
			})
			injectFault(ctx, e, fault, victim)
		}, lost...)
		took := time.Since(started)
		report, recErr := rec.Stop(ctx)
		record(matrixFigures{quorumLossMs: report.QuorumLossMs, lost: out.lostBeforeDelta, leaderChanges: report.LeaderChanges,
			took: took, linearizable: report.LinearizabilityError == "", completed: true})
		if recErr != nil {
			t.Errorf("recorder: %v", recErr)
		}
		if report.LinearizabilityError != "" {
			t.Errorf("history not linearizable (the writes lost within the RPO excluded): %s", report.LinearizabilityError)
		}
		t.Logf("writer: %s; restore took %s, %d writes lost within the RPO", report.Summary(), took.Round(100*time.Millisecond), out.lost)
	}}
}

// Promises of the cells.
var (
	// matrixKillRollout: the kill may fall while the replaced member is not back.
	matrixKillRollout = scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges,
		Waived: "the kill takes the quorum when it falls before the replaced member serves again (two of three away), " +
			"and the member killed may be the leader: an election, not a handover"}
	// matrixPartitionRollout: likewise for a partition, which lasts partitionHold.
	matrixPartitionRollout = scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges,
		Waived: "the partition takes a second member of three away while the first is being replaced: " +
			"the quorum is lost until the replaced member serves again, and leadership may move by election"}
	// matrixScaleFault: a follower that stays goes away for a while; the quorum holds.
	matrixScaleFault = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
		Waived: "a membership change moves leadership only when the leader is removed; the fault is on a follower"}
)

// matrixMemberAway: a member fault while the member being replaced (a replacement, a volume
// move) is not a serving voter takes a second member of three away.
func matrixMemberAway(what string) scenariopkg.Promise {
	return scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges,
		Waived: "the fault takes a second member of three away while " + what + " is not a serving voter: " +
			"the quorum is lost until one of them serves again, and the leader may step down (an election)"}
}

// matrixRows is the whole matrix, in the table's order.
func matrixRows() []matrixOperation {
	return []matrixOperation{
		{id: "rollout", cells: map[string]matrixCell{
			faultKill:      rolloutCell(faultKill, matrixKillRollout),
			faultPartition: rolloutCell(faultPartition, matrixPartitionRollout),
			faultOperator:  rolloutCell(faultOperator, scenariopkg.Handover),
			faultAPIServer: rolloutCell(faultAPIServer, scenariopkg.Handover),
			faultStore:     rolloutCell(faultStore, scenariopkg.Handover),
		}},
		{id: "scale-out-3-to-5", cells: map[string]matrixCell{
			faultKill:      scaleCell(3, 5, faultKill, matrixScaleFault),
			faultPartition: scaleCell(3, 5, faultPartition, matrixScaleFault),
			faultOperator:  scaleCell(3, 5, faultOperator, scaleNoQuorumLoss),
			faultAPIServer: scaleCell(3, 5, faultAPIServer, scaleNoQuorumLoss),
			faultStore:     scaleCell(3, 5, faultStore, scaleNoQuorumLoss),
		}},
		{id: "scale-in-5-to-3", cells: map[string]matrixCell{
			faultKill:      scaleCell(5, 3, faultKill, matrixScaleFault),
			faultPartition: scaleCell(5, 3, faultPartition, matrixScaleFault),
			faultOperator:  scaleCell(5, 3, faultOperator, scaleNoQuorumLoss),
			faultAPIServer: scaleCell(5, 3, faultAPIServer, scaleNoQuorumLoss),
			faultStore:     scaleInStoreCell(),
		}},
		{id: "restore", cells: map[string]matrixCell{
			// A member fault needs a member besides the restoring one: the survivor of a
			// three-member cluster that lost two volumes.
			faultKill:      restoreCell(faultKill, 3),
			faultPartition: restoreCell(faultPartition, 3),
			faultOperator:  restoreCell(faultOperator, 1),
			faultAPIServer: restoreCell(faultAPIServer, 1),
			faultStore:     restoreCell(faultStore, 1),
		}},
		{id: "member-replacement", cells: map[string]matrixCell{
			faultKill:      replacementCell(faultKill, matrixMemberAway("the replaced member")),
			faultPartition: replacementCell(faultPartition, matrixMemberAway("the replaced member")),
			faultOperator:  replacementCell(faultOperator, scaleNoQuorumLoss),
			faultAPIServer: replacementCell(faultAPIServer, scaleNoQuorumLoss),
			faultStore:     replacementCell(faultStore, scaleNoQuorumLoss),
		}},
		{id: "downgrade", cells: map[string]matrixCell{
			faultKill:      downgradeCell(faultKill, matrixKillRollout),
			faultPartition: downgradeCell(faultPartition, matrixPartitionRollout),
			faultOperator:  downgradeCell(faultOperator, scenariopkg.Handover, "LeadershipHandedOver"),
			faultAPIServer: downgradeCell(faultAPIServer, scenariopkg.Handover, "LeadershipHandedOver"),
			faultStore:     downgradeCell(faultStore, scenariopkg.Handover, "LeadershipHandedOver"),
		}},
		{id: "volume-move", cells: map[string]matrixCell{
			faultKill:      volumeMoveCell(faultKill, matrixMemberAway("the member being moved")),
			faultPartition: volumeMoveCell(faultPartition, matrixMemberAway("the member being moved")),
			faultOperator:  volumeMoveCell(faultOperator, volumeMoveNoQuorumLoss),
			faultAPIServer: volumeMoveCell(faultAPIServer, volumeMoveNoQuorumLoss),
			faultStore:     volumeMoveCell(faultStore, volumeMoveNoQuorumLoss),
		}},
		{id: "ca-rotation", cells: map[string]matrixCell{
			faultKill:      caRotationCell(faultKill, matrixKillRollout),
			faultPartition: caRotationCell(faultPartition, matrixPartitionRollout),
			faultOperator:  caRotationCell(faultOperator, scenariopkg.Handover),
			faultAPIServer: caRotationCell(faultAPIServer, scenariopkg.Handover),
			faultStore:     caRotationCell(faultStore, scenariopkg.Handover),
		}},
		{id: "defragmentation", cells: map[string]matrixCell{
			faultKill:      defragCell(faultKill),
			faultPartition: defragCell(faultPartition),
			faultOperator:  defragCell(faultOperator),
			faultAPIServer: defragCell(faultAPIServer),
			faultStore:     defragCell(faultStore),
		}},
	}
}

// TestMatrix runs the operation × fault matrix: the cheap cells, or every cell with
// E2E_MATRIX=all (make matrix).
func TestMatrix(t *testing.T) {
	all := os.Getenv(matrixEnv) == "all"
	for _, op := range matrixRows() {
		for _, fault := range matrixFaults {
			cell, ok := op.cells[fault]
			id := op.id + "/" + fault
			switch {
			case !ok || cell.todo != "" || cell.na != "":
				continue
			case !all && !slices.Contains(matrixCheap, id):
				continue
			}
			t.Run(id, func(t *testing.T) {
				matrix.ran(op.id, fault)
				t.Cleanup(func() { matrix.done(op.id, fault, t.Failed(), t.Skipped()) })
				cell.run(t, func(f matrixFigures) { matrix.record(op.id, fault, f) })
			})
		}
	}
}

// matrix holds what the cells measured, printed once at the end of the run.
var matrix matrixTable

type matrixTable struct {
	mu      sync.Mutex
	results map[string][]matrixResult
}

type matrixResult struct {
	figures  *matrixFigures
	verdict  string
	finished bool
}

func (m *matrixTable) ran(op, fault string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.results == nil {
		m.results = map[string][]matrixResult{}
	}
	k := op + "/" + fault
	m.results[k] = append(m.results[k], matrixResult{})
}

func (m *matrixTable) record(op, fault string, f matrixFigures) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.results[op+"/"+fault]
	rs[len(rs)-1].figures = &f
}

func (m *matrixTable) done(op, fault string, failed, skipped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.results[op+"/"+fault]
	r := &rs[len(rs)-1]
	r.finished = true
	switch {
	case failed:
		r.verdict = "FAIL"
	case skipped:
		r.verdict = "SKIP"
	default:
		r.verdict = "PASS"
	}
	// Each cell as it ends, so that a run cut short still shows what it measured.
	fmt.Printf("matrix %-40s %s\n", op+"/"+fault, r.cell())
}

// cell is one run's figures: "PASS ql=0ms lost=0 lc=1 42s".
func (r matrixResult) cell() string {
	if r.figures == nil {
		return r.verdict + " (no figures: failed before measuring)"
	}
	f := r.figures
	lin := ""
	if !f.linearizable {
		lin = " NOT-LINEARIZABLE"
	}
	return fmt.Sprintf("%s ql=%dms lost=%d lc=%d %s%s", r.verdict, f.quorumLossMs, f.lost, f.leaderChanges, f.took.Round(time.Second), lin)
}

// printMatrix writes the table: rows operations, columns faults, each cell the figures of every
// run (ql: quorum loss, lost: acknowledged writes lost, lc: leader changes, then the operation's
// duration), or n/a or TODO with the reason below the table. Nothing when no cell ran.
func printMatrix(w io.Writer) {
	matrix.mu.Lock()
	defer matrix.mu.Unlock()
	if len(matrix.results) == 0 {
		return
	}
	var notes []string
	fmt.Fprintf(w, "\n=== operation × fault matrix (ql quorum loss, lost acknowledged writes lost, lc leader changes, duration) ===\n")
	fmt.Fprintf(w, "| operation |")
	for _, f := range matrixFaults {
		fmt.Fprintf(w, " %s |", f)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(matrixFaults)))
	for _, op := range matrixRows() {
		fmt.Fprintf(w, "| %s |", op.id)
		for _, fault := range matrixFaults {
			cell, ok := op.cells[fault]
			k := op.id + "/" + fault
			var text string
			switch {
			case ok && cell.na != "":
				text = "n/a"
				notes = append(notes, fmt.Sprintf("%s n/a: %s", k, cell.na))
			case !ok || cell.todo != "":
				text = "TODO"
				why := "not built yet"
				if ok {
					why = cell.todo
				}
				notes = append(notes, fmt.Sprintf("%s TODO: %s", k, why))
			default:
				var runs []string
				for _, r := range matrix.results[k] {
					if r.finished {
						runs = append(runs, r.cell())
					}
				}
				text = strings.Join(runs, "<br>")
				if text == "" {
					text = "not run"
				}
			}
			fmt.Fprintf(w, " %s |", text)
		}
		fmt.Fprintln(w)
	}
	sort.Strings(notes)
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}
