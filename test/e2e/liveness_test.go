package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestWedgedMemberRestartedByLiveness: in a 3-member cluster with the writer and the auditor
// running, etcd-1's etcd process is frozen (SIGSTOP: it runs, its sockets accept, nothing
// answers). Its liveness probe (GET /metrics, every 10 s, restarted after 6 failures) must
// restart the container, no sooner than a minute after the freeze, and the member must rejoin
// (Ready again) while the other two keep the quorum: no acknowledged write lost, the history
// linearizable. The figure is the time from the freeze to the restart and to Ready again.
func TestWedgedMemberRestartedByLiveness(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cluster, e := startCluster(ctx, t, s, "e2e-wedged-")
	const wedged = 1
	restarts := func(ctx context.Context) (int32, bool, error) {
		pods, err := cluster.Pods(ctx)
		if err != nil {
			return 0, false, err
		}
		for _, p := range pods {
			if p.Name != cluster.PodName(wedged) {
				continue
			}
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == resources.EtcdContainerName {
					return cs.RestartCount, ready, nil
				}
			}
		}
		return 0, false, fmt.Errorf("pod %s not found", cluster.PodName(wedged))
	}
	before, _, err := restarts(ctx)
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
		n, _, err := restarts(ctx)
		if err != nil {
			return false, err
		}
		if n > before {
			restartedAfter = time.Since(frozen)
			return true, nil
		}
		return false, fmt.Errorf("restart count %d after %s", n, time.Since(frozen).Round(time.Second))
	})
	e.waitFor(ctx, "the restarted member Ready again", func(ctx context.Context) (bool, error) {
		_, ready, err := restarts(ctx)
		return ready, err
	})
	readyAfter := time.Since(frozen)
	time.Sleep(2 * time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures wedged-member: restarted after %s, Ready again after %s; %s", restartedAfter.Round(100*time.Millisecond),
		readyAfter.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s restartedAfter=%-6s readyAfter=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d ackedWrites=%-5d lost=%d\n",
		"wedged-member-liveness", restartedAfter.Round(100*time.Millisecond), readyAfter.Round(100*time.Millisecond),
		report.QuorumLossMs, report.LongestWriteGapMs, report.AckedWrites, report.LostAckedWrites)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	if report.QuorumLossMs > 0 {
		t.Errorf("quorum lost for %d ms while one member of three was wedged", report.QuorumLossMs)
	}
	// Six failed probes 10 s apart: the first failure ends its 10 s timeout, so no restart comes
	// before about a minute.
	if restartedAfter < 50*time.Second {
		t.Errorf("restarted %s after the freeze: sooner than the probe's minute of silence", restartedAfter)
	}
}

// TestStuckMemberPodDeleted: DEP-01 operator scenario 9 with the operator's notReadyThreshold at
// 20 s. etcd-2's peer port is muted (the leader no longer hears it; it still answers its kubelet
// and the operator): its readiness (/readyz, a linearizable read) fails, its liveness (/metrics)
// does not, so the kubelet leaves it running, NotReady. Once NotReady past the threshold, the
// membership controller deletes its pod (RestartNonParticipating: the leader hears the other
// two, a quorum of three); the recreated pod has a network without the fault and the member
// rejoins, Ready, with the writer and the auditor running: no acknowledged write lost, the
// history linearizable, no quorum loss; the container was never restarted by liveness.
func TestStuckMemberPodDeleted(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	framework.StartOperator(t, s.Cluster.RESTConfig(), framework.OperatorOptions{
		FeatureGates: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true},
		EtcdMember: &configv1alpha1.EtcdMemberConfiguration{
			UnknownThreshold: metav1.Duration{Duration: 10 * time.Second}, NotReadyThreshold: metav1.Duration{Duration: 20 * time.Second}},
	})
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, "e2e-stuck-", 3)
	const stuck = 2
	pod := func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := cluster.Pods(ctx)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			if pods[i].Name == cluster.PodName(stuck) {
				return &pods[i], nil
			}
		}
		return nil, fmt.Errorf("pod %s not found", cluster.PodName(stuck))
	}
	before, err := pod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(2 * time.Second)
	if err := s.Sim.Mute(cluster.PodKey(stuck), int(resources.ServerPort(etcd))); err != nil {
		t.Fatal(err)
	}
	muted := time.Now()
	e.waitNotReady(ctx, stuck)
	var deletedAfter time.Duration
	e.waitFor(ctx, "the stuck member's pod deleted and recreated", func(ctx context.Context) (bool, error) {
		p, err := pod(ctx)
		if err != nil {
			return false, err
		}
		if p.UID != before.UID {
			deletedAfter = time.Since(muted)
			return true, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == resources.EtcdContainerName && cs.RestartCount > 0 {
				return false, fmt.Errorf("the muted member's etcd was restarted (%d) by liveness", cs.RestartCount)
			}
		}
		return false, fmt.Errorf("pod %s still the same after %s", p.Name, time.Since(muted).Round(time.Second))
	})
	e.waitFor(ctx, "the recreated member Ready", func(ctx context.Context) (bool, error) {
		p, err := pod(ctx)
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
	readyAfter := time.Since(muted)
	time.Sleep(2 * time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures stuck-member: pod deleted after %s, Ready again after %s; %s", deletedAfter.Round(100*time.Millisecond),
		readyAfter.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s deletedAfter=%-6s readyAfter=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d ackedWrites=%-5d lost=%d\n",
		"stuck-member-pod-deleted", deletedAfter.Round(100*time.Millisecond), readyAfter.Round(100*time.Millisecond),
		report.QuorumLossMs, report.LongestWriteGapMs, report.AckedWrites, report.LostAckedWrites)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	if report.QuorumLossMs > 0 {
		t.Errorf("quorum lost for %d ms while one member of three was stuck", report.QuorumLossMs)
	}
	if deletedAfter < 20*time.Second {
		t.Errorf("pod deleted %s after the fault: sooner than notReadyThreshold", deletedAfter)
	}
	got, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeMemberRestart); c == nil ||
		!strings.Contains(c.Message, "deleting pod "+cluster.PodName(stuck)) && c.Reason != memberhealth.RuleDone.CamelCase() {
		t.Errorf("MemberRestart condition %+v", c)
	}
}
