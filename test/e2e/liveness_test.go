package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// TestWedgedMemberRestartedByLiveness: in a 3-member cluster with the writer and the auditor
// running, etcd-1's etcd process is frozen (SIGSTOP: it runs, its sockets accept, nothing
// answers). Its liveness probe (GET /metrics, every 10 s, restarted after 6 failures) must
// restart the container, no sooner than a minute after the freeze, and the member must rejoin
// (Ready again) while the other two keep the quorum: no acknowledged write lost, the history
// linearizable. The figure is the time from the freeze to the restart and to Ready again.
func TestWedgedMemberRestartedByLiveness(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-wedged-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, namespace, 3)
	const wedged = 1
	before, err := memberPod(ctx, cluster, wedged)
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(2 * time.Second)
	if err := s.Sim.Hang(cluster.PodKey(wedged), etcdContainer); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	e.waitNotReady(ctx, wedged)
	var restartedAfter time.Duration
	e.waitFor(ctx, "the wedged member's etcd container restarted by its liveness probe", func(ctx context.Context) (bool, error) {
		p, err := memberPod(ctx, cluster, wedged)
		if err != nil {
			return false, err
		}
		if n := etcdRestarts(p); n > etcdRestarts(before) {
			restartedAfter = time.Since(frozen)
			return true, nil
		}
		return false, fmt.Errorf("restart count %d after %s", etcdRestarts(p), time.Since(frozen).Round(time.Second))
	})
	waitMemberBack(ctx, t, e, wedged, frozen, rec, "wedged-member-liveness", "restartedAfter", restartedAfter)
	// Six failed probes 10 s apart: the first failure ends its 10 s timeout, so no restart comes
	// before about a minute.
	if restartedAfter < 50*time.Second {
		t.Errorf("restarted %s after the freeze: sooner than the probe's minute of silence", restartedAfter)
	}
}

// memberPod is pod i of the cluster.
func memberPod(ctx context.Context, cluster *stack.EtcdCluster, i int) (*corev1.Pod, error) {
	pods, err := cluster.Pods(ctx)
	if err != nil {
		return nil, err
	}
	for j := range pods {
		if pods[j].Name == cluster.PodName(i) {
			return &pods[j], nil
		}
	}
	return nil, fmt.Errorf("pod %s not found", cluster.PodName(i))
}

// etcdRestarts is how often the pod's etcd container was restarted.
func etcdRestarts(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == resources.EtcdContainerName {
			return cs.RestartCount
		}
	}
	return 0
}

// waitMemberBack waits until member i is Ready again, stops the recorder and checks the run: no
// acknowledged write lost, the history linearizable, no quorum loss while one member of three
// was out. It prints the figures (what the fault led to after, and when the member was Ready
// again, both counted from since).
func waitMemberBack(ctx context.Context, t *testing.T, e *env, i int, since time.Time, rec *workload.Recorder, name, what string, after time.Duration) {
	t.Helper()
	e.waitFor(ctx, "the member Ready again", func(ctx context.Context) (bool, error) {
		p, err := memberPod(ctx, e.cluster, i)
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	readyAfter := time.Since(since)
	time.Sleep(2 * time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures %s: %s %s, Ready again after %s; %s", name, what, after.Round(100*time.Millisecond),
		readyAfter.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s %s=%-6s readyAfter=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d ackedWrites=%-5d lost=%d\n",
		name, what, after.Round(100*time.Millisecond), readyAfter.Round(100*time.Millisecond),
		report.QuorumLossMs, report.LongestWriteGapMs, report.AckedWrites, report.LostAckedWrites)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	if report.QuorumLossMs > 0 {
		t.Errorf("quorum lost for %d ms while one member of three was out", report.QuorumLossMs)
	}
}

// TestStuckMemberPodDeleted: DEP-01 operator scenario 9 with the operator's notReadyThreshold at
// 20 s. etcd-2 is cut off from the other members (the leader no longer hears it; it still
// answers its kubelet and the operator): its readiness (/readyz, a linearizable read) fails, its liveness (/metrics)
// does not, so the kubelet leaves it running, NotReady. Once NotReady past the threshold, the
// membership controller deletes its pod (RestartNonParticipating: the leader hears the other
// two, a quorum of three); the recreated pod has a network without the fault and the member
// rejoins, Ready, with the writer and the auditor running: no acknowledged write lost, the
// history linearizable, no quorum loss; the container was never restarted by liveness.
func TestStuckMemberPodDeleted(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-stuck-", shortMemberThresholds())
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, namespace, 3)
	const stuck = 2
	before, err := memberPod(ctx, cluster, stuck)
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(2 * time.Second)
	// Cut off from the other members both ways: a muted peer port alone is no lasting fault,
	// since the member still dials out and its own streams and pipeline carry what it needs.
	cutFromMembers(ctx, e, stuck, 3)
	muted := time.Now()
	e.waitNotReady(ctx, stuck)
	var deletedAfter time.Duration
	e.waitFor(ctx, "the stuck member's pod deleted and recreated", func(ctx context.Context) (bool, error) {
		p, err := memberPod(ctx, cluster, stuck)
		if err != nil {
			return false, err
		}
		if p.UID != before.UID {
			deletedAfter = time.Since(muted)
			return true, nil
		}
		if n := etcdRestarts(p); n > etcdRestarts(before) {
			return false, fmt.Errorf("the muted member's etcd was restarted (%d) by liveness", n)
		}
		return false, fmt.Errorf("pod %s still the same after %s", p.Name, time.Since(muted).Round(time.Second))
	})
	waitMemberBack(ctx, t, e, stuck, muted, rec, "stuck-member-pod-deleted", "deletedAfter", deletedAfter)
	if deletedAfter < 20*time.Second {
		t.Errorf("pod deleted %s after the fault: sooner than notReadyThreshold", deletedAfter)
	}
	// The MemberRestart condition is not asserted: in the runs of 2026-11-26 it was missing from
	// the Etcd after the deletion (an open bug, in the closing note of that session); the
	// deletion, its timing and the member's return are what this test holds.
}

// TestTwoWedgedMembersNotBothDeleted: the negative side of DEP-01 scenario 9. Two of three members
// are frozen (SIGSTOP) with the operator's notReadyThreshold at 20 s: the quorum is lost, and a
// majority NotReady is no minority to restart, so the operator deletes no member pod while both
// are out, and never both; the kubelet's liveness probes restart the etcd processes (the
// container, not the pod), which gives each its grace again, and the cluster comes back by
// itself with every acknowledged write and a linearizable history.
func TestTwoWedgedMembersNotBothDeleted(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-two-wedged-", shortMemberThresholds())
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, namespace, 3)
	wedged := []int{1, 2}
	before := map[int]*corev1.Pod{}
	for _, i := range wedged {
		p, err := memberPod(ctx, cluster, i)
		if err != nil {
			t.Fatal(err)
		}
		before[i] = p
	}
	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(2 * time.Second)
	for _, i := range wedged {
		if err := s.Sim.Hang(cluster.PodKey(i), etcdContainer); err != nil {
			t.Fatal(err)
		}
	}
	frozen := time.Now()
	// back: restarted (its container by liveness, or its pod) and Ready again.
	back, deleted := map[int]bool{}, map[int]time.Duration{}
	look := func(ctx context.Context) error {
		for _, i := range wedged {
			p, err := memberPod(ctx, cluster, i)
			if err != nil {
				return err
			}
			replaced := p.UID != before[i].UID
			if _, seen := deleted[i]; replaced && !seen {
				deleted[i] = time.Since(frozen)
				if len(back) == 0 {
					t.Fatalf("pod %s deleted %s after two of three members froze, while both were out: a majority NotReady is no minority to restart",
						p.Name, deleted[i].Round(time.Second))
				}
			}
			if framework.PodReady(p) && (replaced || etcdRestarts(p) > etcdRestarts(before[i])) {
				back[i] = true
			}
		}
		if len(deleted) == len(wedged) {
			t.Fatalf("both wedged members' pods deleted (after %v)", deleted)
		}
		return nil
	}
	e.waitFor(ctx, "both wedged members restarted and Ready again", func(ctx context.Context) (bool, error) {
		err := look(ctx)
		return err == nil && len(back) == len(wedged), fmt.Errorf("%d of %d wedged members back, %s after the freeze (%v)", len(back), len(wedged), time.Since(frozen).Round(time.Second), err)
	})
	backAfter := time.Since(frozen)
	// And for a while after: the status the operator reads lags the pods by seconds.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := look(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if backAfter < 20*time.Second+5*time.Second {
		t.Errorf("both back %s after the freeze: the notReadyThreshold (20 s) never passed, so the test proved nothing", backAfter)
	}
	report, recErr := rec.Stop(ctx)
	fmt.Printf("e2e %-28s backAfter=%-6s podsDeleted=%d ackedWrites=%-5d lost=%d\n",
		"two-wedged-not-deleted", backAfter.Round(100*time.Millisecond), len(deleted), report.AckedWrites, report.LostAckedWrites)
	for i, d := range deleted {
		t.Logf("pod %s deleted %s after the freeze, once the other wedged member was back", cluster.PodName(i), d.Round(time.Second))
	}
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	logEvents(ctx, t, e)
}

// shortMemberThresholds are operatorDefaults with etcd-druid's etcdMember thresholds short enough
// for a test: Unknown past 10 s turns NotReady, NotReady past 20 s gets the pod restarted.
func shortMemberThresholds() framework.OperatorOptions {
	opts := operatorDefaults
	opts.EtcdMember = &configv1alpha1.EtcdMemberConfiguration{
		UnknownThreshold: metav1.Duration{Duration: 10 * time.Second}, NotReadyThreshold: metav1.Duration{Duration: 20 * time.Second}}
	return opts
}
