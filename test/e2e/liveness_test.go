package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/resources"
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
