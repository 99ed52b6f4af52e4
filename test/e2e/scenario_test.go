package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	fromVersion = "3.6.8"
	toVersion   = "3.7.3"
	etcdName    = "etcd"
)

// env is what a scenario's hooks act on.
type env struct {
	t        *testing.T
	stack    *stack.Stack
	cluster  *stack.EtcdCluster
	operator *framework.RunningOperator
	opts     framework.OperatorOptions
	// backup is the cluster's backup (nil: none).
	backup *backupEnv
	// instruments run from after the fault until the end of the rollout.
	instruments *scenariopkg.Instruments
	// bumpedImage is the image the scenario bumped to, once it has.
	bumpedImage string
	// apiLink is the operator's link to the apiserver when the scenario asked for one.
	apiLink *framework.APIServerLink
}

// restartOperator stops the operator and starts it again (with opts, e.g. other gates), as a pod
// restart with a changed configuration would.
func (e *env) restartOperator(opts framework.OperatorOptions) {
	e.t.Helper()
	e.stopOperator()
	e.startOperator(opts)
}

// startOperator starts the operator with opts once stopOperator has stopped it.
func (e *env) startOperator(opts framework.OperatorOptions) {
	e.t.Helper()
	e.opts = opts
	e.operator = framework.StartOperator(e.t, e.stack.Cluster.RESTConfig(), opts)
}

// stopOperator stops the operator, as a pod gone for a while would be.
func (e *env) stopOperator() {
	e.t.Helper()
	if err := e.operator.Stop(); err != nil {
		e.t.Fatalf("stopping the operator: %v", err)
	}
}

// waitFor polls cond until it holds or the scenario's context ends.
func (e *env) waitFor(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// waitNotReady waits until pod i of the cluster is not ready (a fault took effect).
func (e *env) waitNotReady(ctx context.Context, i int) {
	e.t.Helper()
	if err := e.cluster.WaitNotReady(ctx, i); err != nil {
		e.t.Fatal(err)
	}
}

type scenario struct {
	name     string
	replicas int32
	// promise is what the design promises for this rollout, asserted after it.
	promise scenariopkg.Promise
	// beforeBump injects the fault the rollout starts under.
	beforeBump func(ctx context.Context, e *env)
	// atBump acts with the instruments running, right before the image changes.
	atBump func(ctx context.Context, e *env)
	// afterBump acts during the rollout (kill a member, restart the operator, change the
	// template again, ...).
	afterBump func(ctx context.Context, e *env)
	// fromImage is what the members run before (default fromVersion); bumpImage is the image to
	// bump to (default toVersion); finalImage is what the rollout ends on when afterBump changes
	// it again (default bumpImage).
	fromImage, bumpImage, finalImage string
	// verify checks what the rollout left once its figures are in.
	verify func(ctx context.Context, e *env)
	// quorumLost: the fault leaves no quorum, so the instruments start without waiting for a
	// leader to settle on.
	quorumLost bool
	// wantEvents are Event reasons that must have been recorded on the cluster's namespace.
	wantEvents []string
	// tune adjusts the OnDelete controller's configuration; concurrency is the
	// maxConcurrentMemberUpdates it sets, for the deletion auditor.
	tune        func(*configv1alpha1.OnDeleteControllerConfiguration)
	concurrency int
	// backup backs the cluster up to a real S3 server (createBackedUpCluster): the rollout is
	// gated on BackupReady (DEP-01), and e.backup is the store a fault can take away.
	backup bool
	// apiLink starts the operator behind a link to the apiserver a fault can cut (e.apiLink).
	apiLink bool
	// record, when set, receives the rollout's figures (the operation × fault matrix's table).
	record func(matrixFigures)
}

// operatorDefaults are the operator's options as users run it: the quorum-aware rollout on.
var operatorDefaults = framework.OperatorOptions{FeatureGates: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true}}

// idleBaseline is the window before the bump in which the instruments run with no rollout: its
// longest write gap is the run's idle jitter, the yardstick for the gap at the leader step.
const idleBaseline = 2 * time.Second

// hook runs one of the scenario's steps with the running instruments at hand.
func (e *env) hook(step func(ctx context.Context, e *env)) scenariopkg.Hook {
	if step == nil {
		return nil
	}
	return func(ctx context.Context, in *scenariopkg.Instruments) error {
		e.instruments = in
		step(ctx, e)
		return nil
	}
}

// run executes one scenario, prints its figures and asserts its promise.
func run(t *testing.T, sc scenario) {
	if err := sc.promise.Validate(); err != nil {
		t.Fatalf("scenario %s: %v", sc.name, err)
	}
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	replicas := sc.replicas
	if replicas == 0 {
		replicas = 3
	}
	e := &env{t: t, stack: s, opts: framework.OperatorOptions{FeatureGates: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true}, OnDelete: sc.tune}}
	if sc.apiLink {
		e.apiLink = framework.NewAPIServerLink()
		e.opts.APIServerLink = e.apiLink
	}
	e.operator = framework.StartOperator(t, s.Cluster.RESTConfig(), e.opts)
	fromImage := sc.fromImage
	if fromImage == "" {
		fromImage = framework.EtcdImage(fromVersion)
	}
	var cluster *stack.EtcdCluster
	if sc.backup {
		e.backup = createBackedUpClusterWith(ctx, e, "e2e-"+sc.name+"-", fromImage, replicas, nil)
		cluster = e.cluster
		e.waitFor(ctx, "BackupReady True before the rollout", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	} else {
		cluster = createClusterNamed(ctx, e, "e2e-"+sc.name+"-", etcdName, fromImage, replicas, nil)
	}
	checkMembersNonRoot(ctx, t, cluster)

	// The fault comes first and the instruments start once it has settled (a stable leader a
	// quorum agrees on): the figures measure the rollout under the fault, not the fault itself.
	if sc.beforeBump != nil {
		sc.beforeBump(ctx, e)
	}
	image := sc.bumpImage
	if image == "" {
		image = framework.EtcdImage(toVersion)
	}
	e.bumpedImage = image
	res, err := scenariopkg.Run(ctx, scenariopkg.Spec{
		Cluster: cluster, Image: image, FinalImage: sc.finalImage,
		Writer:     workload.WriterOptions{Rate: 40, RequestTimeout: 200 * time.Millisecond},
		QuorumLost: sc.quorumLost, Concurrency: sc.concurrency, Idle: idleBaseline,
		AtBump: e.hook(sc.atBump), AfterBump: e.hook(sc.afterBump),
		WantEvents: sc.wantEvents,
	})
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	t.Logf("instruments started after the fault settled in %s: leader %s (term %d), %d members answering",
		res.Settled.Took.Round(10*time.Millisecond), res.Settled.Leader, res.Settled.Term, res.Settled.Answering)
	report, bumped := res.Report, res.Bumped
	t.Logf("figures %s: rollout=%s %s", sc.name, res.Duration.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s rollout=%-6s quorumLossMs=%-6d timeoutUnconfirmedMs=%-6d longestWriteGapMs=%-6d leaderStepGapMs=%-5d idleJitterMs=%-5d failedWrites=%-4d (timeouts=%d refusals=%d) ackedWrites=%-5d lost=%d leaderChanges=%d promise=%q\n",
		sc.name, res.Duration.Round(100*time.Millisecond), res.QuorumLossMs, res.QuorumUnconfirmedMs, res.LongestWriteGapMs,
		res.LeaderStepGapMs, res.IdleJitterMs, res.FailedWrites, res.WriteTimeouts, res.WriteRefusals,
		res.AckedWrites, res.LostAckedWrites, res.LeaderChanges, sc.promise)
	if sc.record != nil {
		sc.record(matrixFigures{quorumLossMs: res.QuorumLossMs, lost: res.LostAckedWrites, leaderChanges: res.LeaderChanges,
			took: res.Duration, linearizable: res.Report.LinearizabilityError == "", completed: res.Completed})
	}
	if res.Report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", res.Report.LinearizabilityError)
	}
	if !res.Completed {
		t.Fatalf("rollout did not complete: %s", res.Note)
	}
	recordFigures(sc.name, res.Rollout)

	// With the quorum already lost no member participates once its readiness has caught up, so
	// every deletion may be a non-participating one: no role is needed then.
	if replicas > 1 && !sc.quorumLost {
		checkRolesFromMembers(ctx, t, e)
	}
	checkPromise(t, sc.promise, res.Report)
	for _, reason := range sc.wantEvents {
		events := res.Events[reason]
		if len(events) == 0 {
			t.Errorf("no %s Event within %s", reason, scenariopkg.EventDelivery)
		}
		for _, ev := range events {
			t.Logf("event %s", ev)
		}
	}

	checkWrites(t, report, res.RecorderErr)
	if sc.verify != nil {
		sc.verify(ctx, e)
	}
	if res.AuditErr != nil {
		t.Errorf("deletion audit incomplete: %v", res.AuditErr)
	}
	for _, ep := range report.LeaderEpochs {
		t.Logf("leader epoch at %s: term %d leader %s", ep.At.Sub(bumped).Round(10*time.Millisecond), ep.Term, ep.Leader)
	}
	for _, q := range report.QuorumLosses {
		t.Logf("quorum loss from %s for %dms", q.Start.Sub(bumped).Round(10*time.Millisecond), q.Ms)
		// What the members answered then: the evidence behind the figure.
		for _, p := range report.Participation {
			if !p.At.Before(q.Start.Add(-100*time.Millisecond)) && !p.At.After(q.Start.Add(time.Duration(q.Ms+100)*time.Millisecond)) {
				t.Logf("  at %s %s participating=%v %s %s", p.At.Sub(bumped).Round(time.Millisecond), p.Member, p.Participating, p.Class, p.Error)
			}
		}
	}
	for _, q := range report.QuorumUnconfirmed {
		t.Logf("quorum unconfirmed (probe timeouts) from %s for %dms", q.Start.Sub(bumped).Round(10*time.Millisecond), q.Ms)
	}
	for _, d := range res.Deletions {
		t.Logf("at %s deleted %s participating=%v revision=%s strategy=%s%s", d.At.Sub(bumped).Round(10*time.Millisecond), d.Pod, d.Participating, d.Revision, d.Strategy,
			rejoinedNote(d.RejoinedByProbe))
		switch {
		case d.Violation == "":
		case d.Strategy == appsv1.OnDeleteStatefulSetStrategyType:
			t.Errorf("participating pod %s deleted by the OnDelete controller while: %s", d.Pod, d.Violation)
		case sc.promise.NoQuorumLoss:
			t.Errorf("under %s participating pod %s deleted while: %s", d.Strategy, d.Pod, d.Violation)
		default:
			// The Kubernetes StatefulSet controller's doing (the gate was off): the very
			// behaviour this operator replaces, reported but not ours to fail on.
			t.Logf("under %s the StatefulSet controller deleted participating %s while: %s", d.Strategy, d.Pod, d.Violation)
		}
	}
}

// checkPromise fails on every part of the promise the figures break. A probe answered "leader
// changed" (a request in flight while leadership moved) is asked again once, as clientv3 does,
// so a leadership move that leaves a leader in a few milliseconds is no loss; the count of such
// retries is logged.
func checkPromise(t *testing.T, p scenariopkg.Promise, report workload.Report) {
	t.Helper()
	if report.ProbeLeaderChangedRetries > 0 {
		t.Logf("%d probes answered \"leader changed\" and were asked again", report.ProbeLeaderChangedRetries)
	}
	if p.Waived != "" {
		t.Logf("not promised: %s", p.Waived)
	}
	for _, b := range p.Broken(report) {
		t.Errorf("promise broken: %s", b)
	}
}

// inParallel lets a long test that mostly waits (for probes, grace periods, a store) run beside
// the other such tests: it starts an operator of its own that watches only a namespace of its own,
// prefix plus a random suffix, as separate installations would, and returns that namespace,
// which createCluster* then use as it is. The figures of such tests are times the test waits
// for, not the quorum-loss figures of the rollout scenarios, which run one at a time.
func inParallel(t *testing.T, prefix string, opts framework.OperatorOptions) (namespace string, op *framework.RunningOperator) {
	t.Helper()
	s := sharedStack(t)
	t.Parallel()
	namespace = prefix + utilrand.String(5)
	opts.WatchNamespaces = []string{namespace}
	return namespace, framework.StartOperator(t, s.Cluster.RESTConfig(), opts)
}

// createCluster creates an Etcd of replicas members at fromVersion in a namespace of its own
// (prefix plus a generated suffix, or the namespace inParallel chose) and waits until it has converged. The namespace is deleted at
// the end, so a scenario can run again and again in the same stack (go test -count, make soak);
// on failure the evidence is printed first.
func createCluster(ctx context.Context, e *env, prefix string, replicas int32) *stack.EtcdCluster {
	e.t.Helper()
	return createClusterWith(ctx, e, prefix, replicas, nil)
}

// createClusterWith is createCluster with stack.CreateEtcdWith's hook (objects in the namespace,
// changes to the Etcd before it is created).
func createClusterWith(ctx context.Context, e *env, prefix string, replicas int32,
	prepare func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error) *stack.EtcdCluster {
	e.t.Helper()
	return createClusterNamed(ctx, e, prefix, etcdName, framework.EtcdImage(fromVersion), replicas, prepare)
}

// createClusterNamed is createClusterWith for an Etcd of another name, whose members run image.
func createClusterNamed(ctx context.Context, e *env, prefix, name, image string, replicas int32,
	prepare func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error) *stack.EtcdCluster {
	t := e.t
	t.Helper()
	cluster, err := e.stack.CreateEtcdWith(ctx, prefix, name, replicas, image, prepare)
	if err != nil {
		t.Fatal(err)
	}
	e.cluster = cluster
	t.Cleanup(func() {
		// The members go now; the namespace in the background (teardowns.wait in TestMain):
		// each scenario's namespace is its own, so the next scenario need not wait for it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.stack.RemoveMembers(ctx, cluster); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
		teardowns.start(cluster.Namespace, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			return e.stack.DeleteNamespace(ctx, cluster.Namespace)
		})
	})
	t.Cleanup(func() { dumpOnFailure(t, e) }) // runs first: the namespace still holds the evidence
	if err := cluster.WaitConverged(ctx, image); err != nil {
		t.Fatalf("initial cluster: %v", err)
	}
	return cluster
}

// startRecorder starts the writer (40/s, short per-request deadlines) and the readyz monitors,
// with a quorum of expected/2+1.
func startRecorder(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster, expected int) *workload.Recorder {
	t.Helper()
	return startRecorderWith(ctx, t, cluster, cluster.PKI.ClientMaterial(), expected)
}

// startRecorderWith is startRecorder for members reached with material (plaintext members).
func startRecorderWith(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster, material conductortls.ClientMaterial, expected int) *workload.Recorder {
	t.Helper()
	rec, err := workload.NewRecorder(cluster.Endpoints(), material, workload.RecorderOptions{
		Expected: expected,
		Writer:   workload.WriterOptions{Rate: 40, RequestTimeout: 200 * time.Millisecond},
		Quorum:   workload.QuorumOptions{Probe: workload.ProbeReadyz},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return rec
}

// writeAWhile runs the writer and the readyz monitors (startRecorderWith) on cluster for 5 s
// through material, and fails the test when an acknowledged write was lost or the history is not
// linearizable.
func writeAWhile(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster, material conductortls.ClientMaterial) workload.Report {
	t.Helper()
	rec := startRecorderWith(ctx, t, cluster, material, cluster.Replicas)
	time.Sleep(5 * time.Second)
	report, recErr := rec.Stop(ctx)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	return report
}

// checkWrites fails the test when the writer's audit did not run, lost an acknowledged write or
// saw nothing at all.
func checkWrites(t *testing.T, report workload.Report, recErr error) {
	t.Helper()
	if recErr != nil {
		t.Errorf("recorder: %v", recErr)
	}
	if report.AuditError != "" {
		t.Errorf("acknowledged-write audit could not run: %s", report.AuditError)
	}
	if report.LostAckedWrites != 0 {
		t.Errorf("%d acknowledged writes lost: %v", report.LostAckedWrites, report.LostKeys)
	}
	if report.AckedWrites == 0 {
		t.Errorf("the writer got no write acknowledged: the measurement saw nothing")
	}
}

// dumpOnFailure prints what a person would look at first.
func dumpOnFailure(t *testing.T, e *env) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if etcd, err := e.cluster.Get(ctx); err == nil {
		for _, c := range etcd.Status.Conditions {
			t.Logf("condition %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		if op := etcd.Status.LastOperation; op != nil {
			t.Logf("lastOperation: %s %s", op.State, op.Description)
		}
	}
	pods, _ := e.cluster.Pods(ctx)
	for _, p := range pods {
		var states []string
		for _, cs := range p.Status.ContainerStatuses {
			st := "?"
			switch {
			case cs.State.Running != nil:
				st = "Running"
			case cs.State.Waiting != nil:
				st = "Waiting/" + cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				st = "Terminated/" + cs.State.Terminated.Reason
			}
			states = append(states, fmt.Sprintf("%s:%s ready=%v restarts=%d", cs.Name, st, cs.Ready, cs.RestartCount))
		}
		t.Logf("pod %s rev=%s ip=%s deleting=%v %s", p.Name, p.Labels["controller-revision-hash"], p.Status.PodIP,
			p.DeletionTimestamp != nil, strings.Join(states, "; "))
		if log, err := e.stack.Sim.Logs(e.cluster.Namespace+"/"+p.Name, "etcd"); err == nil {
			t.Logf("etcd log of %s: %s", p.Name, log)
			// The stack's directory is gone after the run: its last complaints go with the test.
			for _, line := range lastComplaints(log, 8) {
				t.Logf("  %s: %s", p.Name, line)
			}
		}
	}
}

// lastComplaints are the last n warning or error lines of a member's JSON log file.
func lastComplaints(path string, n int) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
			out = append(out, line)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// checkRolesFromMembers: the controller must have learnt the roles from the members over mTLS
// (not from the leases) for the participating deletions it made. Its Events say which source.
func checkRolesFromMembers(ctx context.Context, t *testing.T, e *env) {
	t.Helper()
	viaLease := 0
	direct := scenariopkg.Within(ctx, scenariopkg.EventDelivery, func(ctx context.Context) []string {
		events := &corev1.EventList{}
		if err := e.stack.Client.List(ctx, events, client.InNamespace(e.cluster.Namespace)); err != nil {
			t.Fatal(err)
		}
		var direct []string
		viaLease = 0
		for _, ev := range events.Items {
			switch {
			case strings.Contains(ev.Message, "(roles: direct)"):
				direct = append(direct, ev.Message)
			case strings.Contains(ev.Message, "(roles: lease"):
				viaLease++
			}
		}
		return direct
	})
	if len(direct) == 0 {
		t.Errorf("no participating deletion used roles from the members within %s (%d used leases)", scenariopkg.EventDelivery, viaLease)
	}
}

// checkMembersNonRoot checks on the node that every etcd ran as the pod template's non-root user
// (the namespace's restricted Pod Security admitted the template; this shows it took effect).
func checkMembersNonRoot(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster) {
	t.Helper()
	owners, err := cluster.DataDirOwners(ctx)
	if err != nil {
		t.Fatalf("reading the members' data directories: %v", err)
	}
	for pod, uid := range owners {
		if int64(uid) != resources.MemberUID {
			t.Errorf("%s: etcd created its data directory as uid %d, want %d", pod, uid, resources.MemberUID)
		}
	}
}

// rejoinedNote names the updated pods not Ready yet that the auditor found back in the quorum at
// a deletion (their /readyz passed).
func rejoinedNote(pods []string) string {
	if len(pods) == 0 {
		return ""
	}
	return " (not Ready yet but /readyz passed: " + strings.Join(pods, ", ") + ")"
}
