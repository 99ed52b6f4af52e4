package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
)

// TestRolloutWaitsForBackupStore: DEP-01 postpones rolling updates while BackupReady is False. A
// 3-member cluster backs up to a real S3 server; the store is stopped, BackupReady goes False,
// and the image is bumped: no member pod is replaced and AllMembersUpdated says
// WaitBackupNotReady, for as long as the store is down. Once it is back, BackupReady goes True
// and the rollout completes. The writer runs throughout and no acknowledged write is lost.
func TestRolloutWaitsForBackupStore(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-backup-gate-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	b := createBackedUpCluster(ctx, e, namespace, 3)
	srv, cluster := b.s3, e.cluster
	t.Cleanup(func() { dumpAgentsOnFailure(t, s, cluster) })
	rec := startRecorder(ctx, t, cluster, 3)
	e.waitFor(ctx, "BackupReady True", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "BackupReady False while the store is down", backupReadyIs(cluster, druidv1alpha1.ConditionFalse))
	before, err := cluster.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.SetImage(ctx, framework.EtcdImage(toVersion)); err != nil {
		t.Fatal(err)
	}
	bumped := time.Now()
	reason := rollout.RuleBackupNotReady.CamelCase()
	e.waitFor(ctx, "AllMembersUpdated "+reason, func(ctx context.Context) (bool, error) {
		c, err := e.allMembersUpdated(ctx)
		return err == nil && c != nil && c.Reason == reason, err
	})
	// The store stays down for a while: nothing is replaced meanwhile. 15 s is three times what a
	// rollout step takes here, so a step that was not held would show.
	held := 15 * time.Second
	deadline := time.Now().Add(held)
	for time.Now().Before(deadline) {
		st, err := cluster.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Terminating > 0 || (st.Image == framework.EtcdImage(toVersion) && st.Updated > 0 && st.UpdateRevision != before.UpdateRevision) {
			t.Fatalf("a member was replaced while BackupReady is False: before %s, now %s", before, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c, err := e.allMembersUpdated(ctx)
	if err != nil || c == nil || c.Reason != reason {
		t.Fatalf("AllMembersUpdated %+v (%v) after %s with the store down, want reason %s", c, err, held, reason)
	}
	t.Logf("held with the store down: AllMembersUpdated %s: %s", c.Reason, c.Message)

	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	e.waitFor(ctx, "BackupReady True once the store is back", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	backupBack := time.Since(restarted)
	if err := cluster.WaitConverged(ctx, framework.EtcdImage(toVersion)); err != nil {
		t.Fatalf("the rollout did not complete once the store was back: %v", err)
	}
	rolled := time.Since(restarted)
	report, recErr := rec.Stop(ctx)
	checkWrites(t, report, recErr)
	// Held, then rolled out once the store is back: a rollout's promise.
	checkPromise(t, scenariopkg.Handover, report)
	fmt.Printf("e2e %-28s heldFor=%-6s backupBack=%-6s rolledAfterStoreBack=%-6s quorumLossMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d\n",
		"rollout-waits-for-backup", time.Since(bumped).Round(time.Second), backupBack.Round(100*time.Millisecond), rolled.Round(100*time.Millisecond),
		report.QuorumLossMs, report.FailedWrites, report.AckedWrites, report.LostAckedWrites)
}
