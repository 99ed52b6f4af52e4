package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/seeding"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// scaleScenario changes spec.replicas from → to under a writer and monitors, optionally after a
// fault, and checks that the members end up exactly the pods, with no learner and no write lost.
type scaleScenario struct {
	name     string
	from, to int32
	// beforeScale injects a fault or a disturbance; during acts while the change runs.
	beforeScale func(ctx context.Context, e *env)
	during      func(ctx context.Context, e *env)
	// after checks more once the membership settled.
	after func(ctx context.Context, e *env)
	// preloadMB is written into the keyspace before the scale (the learner has to catch up with it).
	preloadMB int
	// skipScale: the scenario changes no replicas (e.g. a member's volume is lost) and only
	// waits for the membership to heal.
	skipScale bool
	// promise is what the design promises for the change, asserted with the instruments' figures
	// (required: a scenario whose fault takes the quorum away says why, Promise.Waived).
	promise scenariopkg.Promise
	// opts are the options the scenario's operator was started with, for restarts (default
	// operatorDefaults).
	opts *framework.OperatorOptions
	// record, when set, receives the figures (the operation × fault matrix's table).
	record func(matrixFigures)
	// backup backs the cluster up to a real S3 server (backupSpec): a restore is possible.
	backup bool
	// namespace is the one inParallel chose (the operator watches only it); "" generates one.
	namespace string
}

// memberList asks the members for the member list over mTLS, as a client would.
func memberList(ctx context.Context, e *env) ([]etcdclient.Member, error) {
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e))
	if err != nil {
		return nil, err
	}
	if _, ok := cs.Leader(); !ok {
		return nil, fmt.Errorf("no leader answered")
	}
	return cs.MemberList, nil
}

// endpointTargets are the cluster's current member endpoints as etcdclient targets.
func endpointTargets(e *env) []etcdclient.Target {
	var targets []etcdclient.Target
	for _, ep := range e.cluster.Endpoints()() {
		targets = append(targets, etcdclient.Target{Name: ep.Name, Address: ep.Address, ServerName: ep.ServerName})
	}
	return targets
}

// membershipSettled: the member list is exactly the members of pods etcd-0..n-1 (named as the
// pods, or <prefix>-<pod> with spec.memberNamePrefix), all voters and started, every pod ready,
// the StatefulSet at n, and the Etcd's ScaleOperationInProgress False.
func membershipSettled(ctx context.Context, e *env, n int) (bool, string) {
	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		return false, err.Error()
	}
	members, err := memberList(ctx, e)
	if err != nil {
		return false, err.Error()
	}
	var names []string
	for _, m := range members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			return false, fmt.Sprintf("member %q (%x) learner=%v started=%v", m.Name, m.ID, m.IsLearner, len(m.ClientURLs) > 0)
		}
		names = append(names, m.Name)
	}
	sort.Strings(names)
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, resources.MemberNameOf(etcd, e.cluster.PodName(i)))
	}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		return false, fmt.Sprintf("members %v, want %v", names, want)
	}
	e.cluster.Replicas = n
	st, err := e.cluster.State(ctx)
	if err != nil {
		return false, err.Error()
	}
	sts, err := e.cluster.StatefulSet(ctx)
	if err != nil {
		return false, err.Error()
	}
	if st.Ready != n || st.Terminating != 0 || sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != n {
		return false, fmt.Sprintf("pods: %s, StatefulSet replicas %v", st, *sts.Spec.Replicas)
	}
	if etcd, err = e.cluster.Get(ctx); err != nil {
		return false, err.Error()
	}
	for _, c := range etcd.Status.Conditions {
		if c.Type == druidv1alpha1.ConditionTypeScaleOperationInProgress && c.Status != druidv1alpha1.ConditionFalse {
			return false, "ScaleOperationInProgress: " + c.Message
		}
	}
	return true, ""
}

// voterWatch records when each member first shows up as a started voter.
type voterWatch struct {
	start  time.Time
	voters map[string]time.Duration
}

func (w *voterWatch) poll(ctx context.Context, e *env) {
	members, err := memberList(ctx, e)
	if err != nil {
		return
	}
	for _, m := range members {
		if !m.IsLearner && m.Name != "" {
			if _, seen := w.voters[m.Name]; !seen {
				w.voters[m.Name] = time.Since(w.start)
			}
		}
	}
}

// scaleNoQuorumLoss is the promise of a membership change no fault takes a quorum from.
var scaleNoQuorumLoss = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "a membership change moves leadership only when the leader is removed (ScaleInMoveLeader), which the scenario asserts by its Event"}

// scaleDuringRollout: the rollout hands leadership over as well as the change may move it.
var scaleDuringRollout = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "the rollout running with the change hands leadership over once per leader replaced, and the scale-out may run before or after it"}

// scaleHibernate: replicas 0 stops every member, by request.
var scaleHibernate = scenariopkg.Promise{LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "replicas 0 stops every member: the quorum is gone, by request, until they are back, and the members elect a leader then"}

func runScale(t *testing.T, sc scaleScenario) {
	runScaleWith(t, sc, framework.StartOperator(t, sharedStack(t).Cluster.RESTConfig(), operatorDefaults))
}

// runScaleWith runs sc with op, an operator started with operatorDefaults that may serve
// other scenarios' clusters at the same time, as one operator serves many Etcds.
func runScaleWith(t *testing.T, sc scaleScenario, op *framework.RunningOperator) {
	if err := sc.promise.Validate(); err != nil {
		t.Fatalf("scale scenario %s: %v", sc.name, err)
	}
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s, opts: operatorDefaults, operator: op}
	if sc.opts != nil {
		e.opts = *sc.opts
	}
	var cluster *stack.EtcdCluster
	namespace := sc.namespace
	if namespace == "" {
		namespace = "e2e-scale-" + sc.name + "-"
	}
	if sc.backup {
		e.backup = createBackedUpCluster(ctx, e, namespace, sc.from)
		cluster = e.backup.cluster
	} else {
		cluster = createCluster(ctx, e, namespace, sc.from)
	}
	framework.Eventually(t, time.Minute, "initial membership", func(ctx context.Context) (bool, string) {
		return membershipSettled(ctx, e, int(sc.from))
	})
	if sc.preloadMB > 0 {
		preload(ctx, e, sc.preloadMB)
	}
	if sc.beforeScale != nil {
		sc.beforeScale(ctx, e)
	}
	expected := sc.from
	if sc.to < expected {
		expected = sc.to
	}
	rec := startRecorder(ctx, t, cluster, int(expected))
	time.Sleep(time.Second) // a baseline before anything happens

	started := time.Now()
	if !sc.skipScale {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(etcd.DeepCopy())
		etcd.Spec.Replicas = sc.to
		if err := s.Client.Patch(ctx, etcd, patch); err != nil {
			t.Fatalf("scaling to %d: %v", sc.to, err)
		}
	}
	if sc.during != nil {
		sc.during(ctx, e)
	}
	watch := &voterWatch{start: started, voters: map[string]time.Duration{}}
	watch.poll(ctx, e)
	initialVoters := map[string]bool{}
	for name := range watch.voters {
		initialVoters[name] = true
	}
	deadline := time.Now().Add(4 * time.Minute)
	last := ""
	// Without a fault the cluster stays quorate throughout, so its status must say so at every
	// look: a joining member counted as a voter before it votes shows as a false quorum loss.
	statusWatched := sc.beforeScale == nil && sc.during == nil && !sc.skipScale
	for {
		watch.poll(ctx, e)
		if statusWatched {
			checkStatusDuringScale(ctx, t, e, max(sc.from, sc.to))
		}
		ok, msg := membershipSettled(ctx, e, int(sc.to))
		if ok {
			break
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("membership did not settle at %d: %s", sc.to, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(started)
	if sc.after != nil {
		sc.after(ctx, e)
	}
	time.Sleep(time.Second) // the writer shows the cluster serving at the new size

	report, recErr := rec.Stop(ctx)
	var promoted []string
	for name, d := range watch.voters {
		if !initialVoters[name] {
			promoted = append(promoted, fmt.Sprintf("%s@%s", name, d.Round(100*time.Millisecond)))
		}
	}
	sort.Strings(promoted)
	fmt.Printf("e2e scale %-22s %d→%d settled=%-6s promoted=[%s] quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d %s\n",
		sc.name, sc.from, sc.to, took.Round(100*time.Millisecond), strings.Join(promoted, " "), report.QuorumLossMs, report.LongestWriteGapMs,
		report.FailedWrites, report.AckedWrites, report.LostAckedWrites, report.LeaderChanges, report.Linearizability.Summary())
	if sc.record != nil {
		sc.record(matrixFigures{quorumLossMs: report.QuorumLossMs, lost: report.LostAckedWrites, leaderChanges: report.LeaderChanges,
			took: took, linearizable: report.LinearizabilityError == ""})
	}
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	for _, q := range report.QuorumLosses {
		t.Logf("quorum loss from %s for %dms", q.Start.Sub(started).Round(10*time.Millisecond), q.End.Sub(q.Start).Milliseconds())
	}
	checkPromise(t, sc.promise, report)
	checkLeases(ctx, t, e, int(sc.to))
	checkStatusMembers(ctx, t, e, int(sc.to))
	logEvents(ctx, t, e)
}

// checkStatusDuringScale fails when the Etcd's status, read at one moment of a scale without a
// fault, says the quorum is lost or counts more voters than the cluster ever has.
func checkStatusDuringScale(ctx context.Context, t *testing.T, e *env, most int32) {
	t.Helper()
	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		return
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); c != nil && c.Status == druidv1alpha1.ConditionFalse {
		t.Errorf("Ready False during the scale: %s: %s", c.Reason, c.Message)
	}
	if n := etcd.Status.ClusterSize; n != nil && *n > most {
		t.Errorf("status.clusterSize %d during a scale that never has more than %d voters", *n, most)
	}
}

// checkStatusMembers waits until the Etcd's status lists exactly the n members etcd lists, by
// name and ID, Ready, one of them Leader and the others Member (no learner left), with
// clusterSize n.
func checkStatusMembers(ctx context.Context, t *testing.T, e *env, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e.waitFor(ctx, fmt.Sprintf("status.members and clusterSize for %d members", n), func(ctx context.Context) (bool, error) {
		members, err := memberList(ctx, e)
		if err != nil {
			return false, err
		}
		ids := map[string]string{}
		for _, m := range members {
			ids[m.Name] = fmt.Sprintf("%x", m.ID)
		}
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		st := etcd.Status
		if st.ClusterSize == nil || int(*st.ClusterSize) != n || len(st.Members) != n {
			return false, fmt.Errorf("clusterSize %d (-1: unset), %d members in status", ptr.Deref(st.ClusterSize, -1), len(st.Members))
		}
		leaders := 0
		for _, m := range st.Members {
			id := ptr.Deref(m.ID, "")
			if id == "" || id != ids[m.Name] {
				return false, fmt.Errorf("status member %s has ID %q, etcd lists %q", m.Name, id, ids[m.Name])
			}
			if m.Status != druidv1alpha1.EtcdMemberStatusReady || m.Role == nil {
				return false, fmt.Errorf("status member %s: %s (%s), role %v", m.Name, m.Status, m.Reason, m.Role)
			}
			switch *m.Role {
			case druidv1alpha1.EtcdRoleLeader:
				leaders++
			case druidv1alpha1.EtcdRoleMember:
			default:
				return false, fmt.Errorf("status member %s has role %s", m.Name, *m.Role)
			}
		}
		if leaders != 1 {
			return false, fmt.Errorf("%d leaders in status.members", leaders)
		}
		return true, nil
	})
}

// checkLeases: one Lease per member, and, once a removed member has left the cluster and its pod
// is gone, none for it (the Etcd reconciler looks again every 10 s while one lingers).
func checkLeases(ctx context.Context, t *testing.T, e *env, n int) {
	t.Helper()
	sel := resources.SelectorLabels(&druidv1alpha1.Etcd{})
	sel[resources.LabelInstance] = e.cluster.Name
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, e.cluster.PodName(i))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	e.waitFor(ctx, fmt.Sprintf("member leases %v", want), func(ctx context.Context) (bool, error) {
		leases := &coordinationv1.LeaseList{}
		if err := e.stack.Client.List(ctx, leases, client.InNamespace(e.cluster.Namespace), client.MatchingLabels(sel)); err != nil {
			return false, err
		}
		var got []string
		for _, l := range leases.Items {
			got = append(got, l.Name)
		}
		sort.Strings(got)
		return strings.Join(got, ",") == strings.Join(want, ","), fmt.Errorf("member leases %v", got)
	})
}

// logEvents shows the membership controller's Events: each step and refusal.
func logEvents(ctx context.Context, t *testing.T, e *env) {
	events, err := e.stack.Kube.CoreV1().Events(e.cluster.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	sort.Slice(events.Items, func(i, j int) bool { return events.Items[i].FirstTimestamp.Before(&events.Items[j].FirstTimestamp) })
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == "Etcd" && ev.Source.Component == "etcd-conductor" {
			t.Logf("event %s %s: %s", ev.Type, ev.Reason, ev.Message)
		}
	}
}

func TestScaleOut1To3(t *testing.T) {
	runScale(t, scaleScenario{name: "1-to-3", promise: scaleNoQuorumLoss, from: 1, to: 3})
}
func TestScaleOut3To5(t *testing.T) {
	runScale(t, scaleScenario{name: "3-to-5", promise: scaleNoQuorumLoss, from: 3, to: 5})
}
func TestScaleIn5To3(t *testing.T) {
	runScale(t, scaleScenario{name: "5-to-3", promise: scaleNoQuorumLoss, from: 5, to: 3})
}
func TestScaleIn3To1(t *testing.T) {
	runScale(t, scaleScenario{name: "3-to-1", promise: scaleNoQuorumLoss, from: 3, to: 1})
}

// memberID is the ID of member name in the member list, 0 when absent.
func memberID(ctx context.Context, e *env, name string) uint64 {
	members, err := memberList(ctx, e)
	if err != nil {
		return 0
	}
	for _, m := range members {
		if m.Name == name {
			return m.ID
		}
	}
	return 0
}

// waitReplaced waits until member i is in the member list under an ID other than old: it was
// removed and added again.
func (e *env) waitReplaced(ctx context.Context, i int, old uint64) {
	e.t.Helper()
	e.waitFor(ctx, e.cluster.PodName(i)+" replaced", func(ctx context.Context) (bool, error) {
		id := memberID(ctx, e, e.cluster.PodName(i))
		return id != 0 && id != old, nil
	})
}

// loseVolume deletes member i's claim and pod, as after a disk failure: the StatefulSet
// controller recreates both, the new volume empty.
func loseVolume(i int) func(ctx context.Context, e *env) {
	return loseVolumeWith(i, nil)
}

// loseVolumeWith is loseVolume with mid called right after the claim and pod are deleted (a
// fault injected while the replacement is under way); the member must still be replaced once it
// returns.
func loseVolumeWith(i int, mid func(ctx context.Context, e *env)) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		old := memberID(ctx, e, e.cluster.PodName(i))
		if old == 0 {
			e.t.Fatalf("%s is no member before its volume is lost", e.cluster.PodName(i))
		}
		claim := "data-" + e.cluster.PodName(i)
		if err := e.stack.Kube.CoreV1().PersistentVolumeClaims(e.cluster.Namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
			e.t.Fatalf("deleting claim %s: %v", claim, err)
		}
		if err := e.stack.Kube.CoreV1().Pods(e.cluster.Namespace).Delete(ctx, e.cluster.PodName(i), metav1.DeleteOptions{}); err != nil {
			e.t.Fatalf("deleting pod: %v", err)
		}
		if mid != nil {
			mid(ctx, e)
		}
		e.waitReplaced(ctx, i, old)
	}
}

// corruptData stops member i's etcd for good, overwrites the magic of both bbolt meta pages
// of its database, lifts the fault and deletes the pod: the recreated pod finds an unreadable
// data dir on its old volume.
func corruptData(i int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		old := memberID(ctx, e, e.cluster.PodName(i))
		kill(i)(ctx, e)
		dir, err := e.stack.Sim.ClaimDir(ctx, e.cluster.Namespace+"/data-"+e.cluster.PodName(i))
		if err != nil {
			e.t.Fatal(err)
		}
		db := dir + "/new.etcd/member/snap/db"
		f, err := os.OpenFile(db, os.O_WRONLY, 0)
		if err != nil {
			e.t.Fatalf("opening %s: %v", db, err)
		}
		for _, off := range []int64{16, 4096 + 16} {
			if _, err := f.WriteAt([]byte("XXXX"), off); err != nil {
				e.t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			e.t.Fatal(err)
		}
		fixed(i)(ctx, e)
		if err := e.stack.Kube.CoreV1().Pods(e.cluster.Namespace).Delete(ctx, e.cluster.PodName(i), metav1.DeleteOptions{}); err != nil {
			e.t.Fatalf("deleting pod: %v", err)
		}
		e.waitReplaced(ctx, i, old)
		aside, _ := filepath.Glob(dir + "/new.etcd.aside-*")
		if len(aside) == 0 {
			e.t.Errorf("the corrupt data dir was not kept aside in %s", dir)
		}
	}
}

// waitLearner waits until the member list holds a learner (a scale-out step is under way).
func (e *env) waitLearner(ctx context.Context) {
	e.t.Helper()
	e.waitFor(ctx, "a learner", func(ctx context.Context) (bool, error) {
		members, err := memberList(ctx, e)
		for _, m := range members {
			if m.IsLearner {
				return true, nil
			}
		}
		return false, err
	})
}

func TestMemberVolumeLost(t *testing.T) {
	runScale(t, scaleScenario{name: "volume-lost", promise: scaleNoQuorumLoss, from: 3, to: 3, skipScale: true, during: loseVolume(2)})
}

func TestMemberDataCorrupt(t *testing.T) {
	runScale(t, scaleScenario{name: "data-corrupt", promise: scaleNoQuorumLoss, from: 3, to: 3, skipScale: true, during: corruptData(1)})
}

func TestScaleOutOneMemberDead(t *testing.T) {
	runScale(t, scaleScenario{name: "3-to-5-one-dead", promise: scaleNoQuorumLoss, from: 3, to: 5, beforeScale: kill(0), during: func(ctx context.Context, e *env) {
		e.waitFor(ctx, "5 voters", func(ctx context.Context) (bool, error) {
			members, err := memberList(ctx, e)
			voters := 0
			for _, m := range members {
				if !m.IsLearner {
					voters++
				}
			}
			return voters == 5, err
		})
		fixed(0)(ctx, e)
	}})
}

// preload writes mb MiB of 64 KiB values through the first member.
func preload(ctx context.Context, e *env, mb int) {
	e.t.Helper()
	eps := e.cluster.Endpoints()()
	if len(eps) == 0 {
		e.t.Fatal("no endpoint to preload through")
	}
	tlsConfig, err := e.cluster.PKI.ClientMaterial().Config(eps[0].ServerName)
	if err != nil {
		e.t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"https://" + eps[0].Address}, TLS: tlsConfig, DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithAuthority(eps[0].ServerName)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	defer cli.Close()
	value := strings.Repeat("x", 64<<10)
	start := time.Now()
	for i := 0; i < mb*16; i++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("/preload/%06d", i), value)
		cancel()
		if err != nil {
			e.t.Fatalf("preloading key %d: %v", i, err)
		}
	}
	e.t.Logf("preloaded %d MiB in %s", mb, time.Since(start).Round(100*time.Millisecond))
}

func TestScaleOut3To5With10MB(t *testing.T) {
	runScale(t, scaleScenario{name: "3-to-5-10mb", promise: scaleNoQuorumLoss, from: 3, to: 5, preloadMB: 10})
}

func TestScaleOut3To5With200MB(t *testing.T) {
	runScale(t, scaleScenario{name: "3-to-5-200mb", promise: scaleNoQuorumLoss, from: 3, to: 5, preloadMB: 200})
}

// TestScaleOut3To5Seeded: a scale-out 3→5 of a backed-up cluster (a full snapshot a minute) with
// 10 MiB in it, started once a full snapshot holds them: each new member's init step asks
// internal/decide/seeding and reports its rule on the member's Lease: seeded (seeding.RuleSeed, not a
// decline), since the snapshot is within the leader's log at the e2e's write rate; the operator
// compares each seeded learner's keyspace with the leader's before promoting it; the scale-out
// settles and no acknowledged write is lost. It mostly waits for the snapshot, so it runs beside the other
// such tests.
func TestScaleOut3To5Seeded(t *testing.T) {
	namespace, op := inParallel(t, "e2e-scale-3-to-5-seeded-", operatorDefaults)
	var preloaded time.Time
	runScaleWith(t, scaleScenario{name: "3-to-5-seeded", promise: scaleNoQuorumLoss, namespace: namespace, from: 3, to: 5, backup: true, preloadMB: 10,
		beforeScale: func(ctx context.Context, e *env) {
			preloaded = time.Now()
			e.waitFor(ctx, "a full snapshot after the preload", func(ctx context.Context) (bool, error) {
				snaps, err := e.backup.snapshots(ctx)
				for _, s := range snaps {
					if s.Kind == snapshot.KindFull && s.CreatedOn.After(preloaded) {
						return true, nil
					}
				}
				return false, err
			})
		},
		after: func(ctx context.Context, e *env) {
			leases := e.stack.Kube.CoordinationV1().Leases(e.cluster.Namespace)
			for _, i := range []int{3, 4} {
				l, err := leases.Get(ctx, e.cluster.PodName(i), metav1.GetOptions{})
				if err != nil {
					e.t.Fatal(err)
				}
				decision := l.Annotations[memberlease.AnnotationStartDecision]
				e.t.Logf("%s: %s", l.Name, decision)
				// Seeded, not any seed/ rule: a decline (seed/too-far-behind …) names one too.
				if !strings.Contains(decision, string(seeding.RuleSeed)+": ") {
					e.t.Errorf("%s was not seeded (want %s): %s", l.Name, seeding.RuleSeed, decision)
				}
				// Seeded, it was promoted only once its keyspace was the leader's: the report
				// says so, which is what makes the operator compare.
				if report, ok := memberlease.ParseStartReport(l.Annotations); !ok || !report.Seeded {
					e.t.Errorf("%s's start report does not say it was seeded: %+v", l.Name, report)
				}
			}
		}}, op)
}

// TestLearnerNeverCatchesUp: the new member's pod is cut off the network as soon as it exists, so
// the learner never starts. It stays a learner, the condition says why, the cluster keeps
// serving; scaling back to 3 removes the learner left behind.
func TestLearnerNeverCatchesUp(t *testing.T) {
	runScale(t, scaleScenario{name: "learner-stuck", promise: scaleNoQuorumLoss, from: 3, to: 3, skipScale: true, during: func(ctx context.Context, e *env) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(etcd.DeepCopy())
		etcd.Spec.Replicas = 5
		if err := e.stack.Client.Patch(ctx, etcd, patch); err != nil {
			t.Fatal(err)
		}
		e.waitFor(ctx, "pod etcd-3 with an address", func(ctx context.Context) (bool, error) {
			_, err := e.stack.Sim.PodIP(e.cluster.PodKey(3))
			return err == nil, nil
		})
		if err := e.stack.Sim.Partition(e.cluster.PodKey(3)); err != nil {
			t.Fatal(err)
		}
		e.waitLearner(ctx)
		time.Sleep(15 * time.Second) // long enough for a healthy learner to have been promoted
		members, err := memberList(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		learners, voters := 0, 0
		for _, m := range members {
			if m.IsLearner {
				learners++
			} else {
				voters++
			}
		}
		if learners != 1 || voters != 3 {
			t.Errorf("with the learner cut off: %d voters, %d learners; want 3 and 1 (not promoted, nothing more added)", voters, learners)
		}
		var last *druidv1alpha1.Condition
		waiting := scenariopkg.Within(ctx, scenariopkg.StatusWithin, func(ctx context.Context) []druidv1alpha1.Condition {
			etcd, err := e.cluster.Get(ctx)
			if err != nil {
				return nil
			}
			last = druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress)
			if last == nil || last.Status != druidv1alpha1.ConditionTrue || !strings.Contains(last.Message, "learner") {
				return nil
			}
			return []druidv1alpha1.Condition{*last}
		})
		switch {
		case len(waiting) > 0:
			t.Logf("condition while stuck: %s %s: %s", waiting[0].Status, waiting[0].Reason, waiting[0].Message)
		case last == nil:
			t.Errorf("no ScaleOperationInProgress condition within %s while the learner is cut off", scenariopkg.StatusWithin)
		default:
			t.Errorf("the condition does not say the scale waits on the learner within %s: %s %s: %s", scenariopkg.StatusWithin, last.Status, last.Reason, last.Message)
		}
		etcd, err = e.cluster.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		patch = client.MergeFrom(etcd.DeepCopy())
		etcd.Spec.Replicas = 3
		if err := e.stack.Client.Patch(ctx, etcd, patch); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestScaleOutDuringRollout: the image is bumped and the cluster scaled 3→5 at once. Resizing
// waits for the rollout, the rollout does not start while a member is being added.
func TestScaleOutDuringRollout(t *testing.T) {
	runScale(t, scaleScenario{name: "during-rollout", promise: scaleDuringRollout, from: 3, to: 5, beforeScale: func(ctx context.Context, e *env) {
		if err := e.cluster.SetImage(ctx, framework.EtcdImage(toVersion)); err != nil {
			t.Fatal(err)
		}
	}, after: func(ctx context.Context, e *env) {
		if err := e.cluster.WaitConverged(ctx, framework.EtcdImage(toVersion)); err != nil {
			t.Errorf("rollout did not complete: %v", err)
		}
	}})
}

// TestScaleInLeaderRemoved: leadership is on the highest ordinal when 5→3 starts, so it has to be
// moved off before that member is removed.
func TestScaleInLeaderRemoved(t *testing.T) {
	runScale(t, scaleScenario{name: "5-to-3-leader-last", promise: scaleNoQuorumLoss, from: 5, to: 3, beforeScale: func(ctx context.Context, e *env) {
		leadOn(ctx, e, 4)
	}, after: func(ctx context.Context, e *env) {
		if len(scenariopkg.EventsWithin(ctx, e.cluster, membership.RuleMoveLeader.CamelCase(), scenariopkg.EventDelivery)) == 0 {
			t.Errorf("no ScaleInMoveLeader Event within %s: leadership was not moved off the member removed first", scenariopkg.EventDelivery)
		}
	}})
}

// TestHibernateAndWake: replicas 0 stops every pod and keeps the membership and the volumes;
// back to 3, the same members restart from their data (the writer's acknowledged writes from
// before are audited at the end).
func TestHibernateAndWake(t *testing.T) {
	runScale(t, scaleScenario{name: "hibernate", promise: scaleHibernate, from: 3, to: 3, skipScale: true, during: func(ctx context.Context, e *env) {
		before := map[string]uint64{}
		for i := 0; i < 3; i++ {
			before[e.cluster.PodName(i)] = memberID(ctx, e, e.cluster.PodName(i))
		}
		setReplicas := func(n int32) {
			etcd, err := e.cluster.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(etcd.DeepCopy())
			etcd.Spec.Replicas = n
			if err := e.stack.Client.Patch(ctx, etcd, patch); err != nil {
				t.Fatal(err)
			}
		}
		setReplicas(0)
		e.waitFor(ctx, "no pods", func(ctx context.Context) (bool, error) {
			pods, err := e.cluster.Pods(ctx)
			return err == nil && len(pods) == 0, err
		})
		setReplicas(3)
		e.waitFor(ctx, "the same members back", func(ctx context.Context) (bool, error) {
			for name, id := range before {
				if got := memberID(ctx, e, name); got != id {
					return false, fmt.Errorf("%s is %x, was %x", name, got, id)
				}
			}
			return true, nil
		})
	}})
}

// leadOn moves leadership to member i and waits until it leads.
func leadOn(ctx context.Context, e *env, i int) {
	e.t.Helper()
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	name := e.cluster.PodName(i)
	e.waitFor(ctx, name+" leading", func(ctx context.Context) (bool, error) {
		targets := endpointTargets(e)
		cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), targets)
		if err != nil {
			return false, err
		}
		leader, ok := cs.Leader()
		if !ok {
			return false, fmt.Errorf("no leader")
		}
		if leader.Name == name {
			return true, nil
		}
		return false, pool.MoveLeader(ctx, "e2e", e.cluster.PKI.ClientMaterial(), targets, leader.Name, memberID(ctx, e, name))
	})
}

// servingReads are the members among names that serve a linearizable read now: those the
// leader hears.
func servingReads(ctx context.Context, e *env, names ...string) []string {
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	served, _ := pool.LinearizableReads(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e), names)
	return served
}

// TestScaleIn5To3TwoCutOff: 5→3 while two of the members that stay, etcd-1 and etcd-2, are cut
// off from the leader etcd-0 (every packet between them and the leader's pod dropped) but still
// answer the operator and the kubelet over their client port and talk to the other members.
// Removing etcd-4 would leave the leader hearing 2 of the 4 voters left, quorum 3: the
// membership controller waits (wait/remove-quorum, with those numbers), removes nothing and no
// quorum is lost. Healed, the scale-in completes, still without a quorum loss.
//
// Not Mute on the peer port: in the node simulator a muted member is heard by the leader again
// within seconds (see TestRolloutHandoverPartitioned; seen here too: both muted members served
// linearizable reads again during the hold), and the controller rightly went on then.
func TestScaleIn5To3TwoCutOff(t *testing.T) {
	muted := []int{1, 2}
	runScale(t, scaleScenario{name: "5-to-3-two-cut-off", promise: scaleNoQuorumLoss, from: 5, to: 3, beforeScale: func(ctx context.Context, e *env) {
		leadOn(ctx, e, 0)
		leaderIP, err := e.stack.Sim.PodIP(e.cluster.PodKey(0))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range muted {
			if err := e.stack.Sim.PartitionFrom(e.cluster.PodKey(i), leaderIP); err != nil {
				t.Fatal(err)
			}
		}
	}, during: func(ctx context.Context, e *env) {
		names := []string{e.cluster.PodName(muted[0]), e.cluster.PodName(muted[1])}
		cutOff := func(ctx context.Context) {
			if served := servingReads(ctx, e, names...); len(served) > 0 {
				t.Fatalf("%v serve linearizable reads: no longer cut off from the leader", served)
			}
		}
		fiveVoters := func(ctx context.Context) {
			members, err := memberList(ctx, e)
			if err != nil {
				t.Fatalf("while %v are cut off: %v", names, err)
			}
			if len(members) != 5 {
				t.Fatalf("%d members while %v are cut off from the leader, want all 5: %+v", len(members), names, members)
			}
		}
		var cond druidv1alpha1.Condition
		e.waitFor(ctx, "the scale-in waiting for a quorum the leader hears", func(ctx context.Context) (bool, error) {
			fiveVoters(ctx)
			etcd, err := e.cluster.Get(ctx)
			if err != nil {
				return false, err
			}
			c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress)
			if c == nil || c.Reason != membership.RuleRemoveUnsafe.CamelCase() {
				return false, fmt.Errorf("condition %+v", c)
			}
			cond = *c
			return true, nil
		})
		t.Logf("waiting: %s %s: %s", cond.Status, cond.Reason, cond.Message)
		if want := "2 of 4 remaining voters heard by the leader, quorum 3"; cond.Status != druidv1alpha1.ConditionTrue || !strings.Contains(cond.Message, want) {
			t.Errorf("condition %s %q does not say %q", cond.Status, cond.Message, want)
		}
		// Decision after decision: nothing is removed while they stay cut off.
		for hold := time.Now().Add(15 * time.Second); time.Now().Before(hold); time.Sleep(time.Second) {
			cutOff(ctx)
			fiveVoters(ctx)
		}
		for _, i := range muted {
			if err := e.stack.Sim.Heal(e.cluster.PodKey(i)); err != nil {
				t.Fatal(err)
			}
		}
	}})
}
