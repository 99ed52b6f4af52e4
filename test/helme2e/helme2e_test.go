package helme2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// requireHelm skips without bin/helm, except under CI=true, like stack.RequireEnvironment.
func requireHelm(t *testing.T) {
	t.Helper()
	if _, err := HelmBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// The chart as users install it: the manager is the Deployment's pod on the node simulator,
// with the chart's ServiceAccount, RBAC and configuration. With the gate on it rolls an Etcd
// with a dead member quorum-aware (dead member first, no deletion against DEP-07's invariant);
// `helm upgrade` with the gate off rolls the manager, which switches the StatefulSet back to
// RollingUpdate without deleting a member pod.
func TestHelmInstalledOperatorRollsQuorumAware(t *testing.T) {
	stack.RequireEnvironment(t)
	requireHelm(t)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()

	op, managerBefore := installForTest(ctx, t, s, InstallOptions{QuorumAware: true})
	if err := CheckRunsFromImage(managerBefore, "manager"); err != nil {
		t.Error(err)
	}

	const dead = 0
	// One member of three dead: the quorum carries it, and the leader is among the members the
	// rollout replaces and can hand over.
	promise := scenario.Handover
	res, err := RunRollout(ctx, s, RolloutOptions{
		Namespace: "helm-e2e", Name: "etcd",
		From: framework.EtcdImage("3.6.8"), To: framework.EtcdImage("3.7.3"),
		Dead: dead, Timeout: 3 * time.Minute,
		Progress: func(line string) { t.Log(line) },
	})
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	cluster := res.Cluster
	t.Logf("rollout=%s %s", res.Duration.Round(100*time.Millisecond), res.Report.Summary())
	for _, d := range res.Deletions {
		t.Logf("at %s deleted %s participating=%v revision=%s", d.At.Sub(res.Bumped).Round(10*time.Millisecond), d.Pod, d.Participating, d.Revision)
	}
	if !res.Completed {
		t.Fatalf("rollout did not complete in time; last view: strategy %s, reason %q, pods %+v", res.Last.Strategy, res.Last.Reason, res.Last.Pods)
	}
	if res.Last.Strategy != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("StatefulSet updateStrategy = %s with the gate on, want OnDelete", res.Last.Strategy)
	}
	for _, b := range promise.Broken(res.Report) {
		t.Errorf("promise broken: %s", b)
	}
	if res.RecorderErr != nil {
		t.Errorf("write audit: %v", res.RecorderErr)
	}
	if res.Report.AckedWrites == 0 {
		t.Error("no write acknowledged: the writer measured nothing")
	}
	if res.Report.LostAckedWrites != 0 {
		t.Errorf("%d acknowledged writes lost: %v", res.Report.LostAckedWrites, res.Report.LostKeys)
	}
	if res.AuditErr != nil {
		t.Errorf("deletion audit incomplete: %v", res.AuditErr)
	}
	// The member pods' own containers ran from the image too: member-init to completion,
	// member-agent beside etcd.
	if pods, err := cluster.Pods(ctx); err != nil {
		t.Errorf("listing member pods: %v", err)
	} else {
		for i := range pods {
			for _, c := range []string{resources.MemberInitContainerName, resources.MemberAgentContainerName} {
				if err := CheckRunsFromImage(&pods[i], c); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if len(res.Deletions) == 0 || res.Deletions[0].Pod != cluster.PodName(dead) {
		t.Errorf("first deletion %+v, want the dead member %s", res.Deletions, cluster.PodName(dead))
	}
	for _, d := range res.Deletions {
		if d.Violation != "" {
			t.Errorf("participating pod %s deleted while: %s", d.Pod, d.Violation)
		}
	}
	if log, err := op.ManagerLog(ctx); err != nil {
		t.Errorf("reading the manager log: %v", err)
	} else if strings.Contains(log, "forbidden") {
		t.Errorf("the API server refused the chart's ServiceAccount something:\n%s", forbiddenLines(log))
	}
	if t.Failed() {
		return // the gate flip proves nothing after a failed rollout
	}

	t.Run("helm upgrade gate off", func(t *testing.T) {
		before, err := cluster.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		auditor, err := cluster.AuditDeletions(ctx, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		managerAfter, err := op.SetQuorumAware(ctx, false)
		if err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		if managerAfter.UID == managerBefore.UID {
			t.Error("the manager pod was not replaced: it would keep running with the gate on")
		}
		// The StatefulSet controller has acted on RollingUpdate once its revisions agree:
		// a pod it wanted to replace would keep them apart.
		sts := waitStatefulSet(ctx, t, cluster, func(sts *appsv1.StatefulSet) bool {
			return sts.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
				sts.Status.ObservedGeneration >= sts.Generation &&
				sts.Status.CurrentRevision == sts.Status.UpdateRevision &&
				sts.Status.UpdatedReplicas == sts.Status.Replicas
		})
		deletions, auditErr := auditor.Stop()
		if auditErr != nil {
			t.Errorf("deletion audit incomplete: %v", auditErr)
		}
		for _, d := range deletions {
			t.Errorf("pod %s deleted by the strategy switch", d.Pod)
		}
		after, err := cluster.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, change := range stack.PodsChanged(before, after) {
			t.Errorf("after the strategy switch: %s", change)
		}
		t.Logf("StatefulSet %s: updateStrategy %s, revision %s", sts.Name, sts.Spec.UpdateStrategy.Type, sts.Status.UpdateRevision)
	})
}

// installForTest installs the chart for one test (helm homes in its temp dir), uninstalls it at
// the end with the manager's log on failure, and returns the manager's Ready pod.
func installForTest(ctx context.Context, t *testing.T, s *stack.Stack, o InstallOptions) (*Operator, *corev1.Pod) {
	t.Helper()
	o.WorkDir = t.TempDir()
	op, err := Install(ctx, s, o)
	if err != nil {
		t.Fatalf("installing the chart: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if log, err := op.ManagerLog(context.Background()); err == nil {
				t.Logf("manager log:\n%s", tail(log, 6000))
			}
		}
		if err := op.Uninstall(context.Background()); err != nil {
			t.Errorf("uninstalling: %v", err)
		}
	})
	manager, err := op.WaitManagerReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return op, manager
}

func waitStatefulSet(ctx context.Context, t *testing.T, c *stack.EtcdCluster, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	t.Helper()
	var last *appsv1.StatefulSet
	framework.Eventually(t, 2*time.Minute, "the StatefulSet", func(context.Context) (bool, string) {
		sts, err := c.StatefulSet(ctx)
		if err != nil {
			return false, "reading the StatefulSet: " + err.Error()
		}
		last = sts
		return cond(sts), fmt.Sprintf("strategy %s, generation %d observed %d, revisions current %s update %s",
			sts.Spec.UpdateStrategy.Type, sts.Generation, sts.Status.ObservedGeneration, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
	})
	return last
}

func forbiddenLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "forbidden") {
			out = append(out, l)
		}
	}
	return tail(strings.Join(out, "\n"), 3000)
}
