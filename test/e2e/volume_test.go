package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestStorageClassChanged moves a running three-member cluster to volumes of another storage
// class and size with the writer, the quorum monitor and the linearizability check on. The
// StatefulSet is created again without its pods under a claim template of a new name, and the
// rollout replaces the members one at a time, the leader last: each comes back on a new, empty
// claim and rejoins as a learner. Then: 0 ms quorum loss, no acknowledged write lost, every
// member on a claim of the new class with a new member ID, and the old claims still there.
func TestStorageClassChanged(t *testing.T) { runStorageClassChange(t, 3) }

// TestStorageClassChangedFiveMembers is TestStorageClassChanged on five members.
func TestStorageClassChangedFiveMembers(t *testing.T) { runStorageClassChange(t, 5) }

func runStorageClassChange(t *testing.T, replicas int32) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, fmt.Sprintf("e2e-volume-%d-", replicas), replicas)
	image := framework.EtcdImage(fromVersion)
	idsBefore := map[string]uint64{}
	for i := range cluster.Replicas {
		idsBefore[cluster.PodName(i)] = memberID(ctx, e, cluster.PodName(i))
	}

	rec := startRecorder(ctx, t, cluster, int(replicas))
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.StorageClass = ptr.To("fast")
	etcd.Spec.StorageCapacity = ptr.To(resource.MustParse("20Gi"))
	changed := time.Now()
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	want := resources.DesiredClaims(etcd)
	e.waitFor(ctx, "the StatefulSet created again with the new claim template", func(ctx context.Context) (bool, error) {
		sts, err := cluster.StatefulSet(ctx)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		running, ok := resources.RunningClaims(sts)
		return ok && running == want, nil
	})
	rolloutCtx, cancelRollout := context.WithTimeout(ctx, 4*time.Minute)
	defer cancelRollout()
	if err := cluster.WaitConverged(rolloutCtx, image); err != nil {
		t.Fatalf("the members did not move to the new volumes: %v", err)
	}
	moved := time.Since(changed)
	time.Sleep(time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures volume-change-%d: moved=%s %s", replicas, moved.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s moved=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		fmt.Sprintf("storage-class-changed-%d", replicas), moved.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	checkWrites(t, report, recErr)
	if report.QuorumLossMs != 0 {
		t.Errorf("quorum lost for %d ms while moving to new volumes", report.QuorumLossMs)
	}
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}

	claims := &corev1.PersistentVolumeClaimList{}
	if err := s.Client.List(ctx, claims, client.InNamespace(cluster.Namespace)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.PersistentVolumeClaim{}
	for _, c := range claims.Items {
		byName[c.Name] = c
	}
	for i := range cluster.Replicas {
		pod := cluster.PodName(i)
		c, ok := byName[want.Name+"-"+pod]
		switch {
		case !ok:
			t.Errorf("%s has no claim %s-%s", pod, want.Name, pod)
		case ptr.Deref(c.Spec.StorageClassName, "") != "fast":
			t.Errorf("claim %s of class %q, want fast", c.Name, ptr.Deref(c.Spec.StorageClassName, ""))
		}
		if _, kept := byName["data-"+pod]; !kept {
			t.Errorf("the old claim data-%s is gone; its data was to be left aside", pod)
		}
		if id := memberID(ctx, e, pod); id == 0 || id == idsBefore[pod] {
			t.Errorf("%s: member %x after the move, %x before: want a new member on the new volume", pod, id, idsBefore[pod])
		}
	}
	events, _ := cluster.EventsWithReason(ctx, "VolumeRecreateStatefulset")
	if len(events) == 0 || !strings.Contains(events[0], want.Name) {
		t.Errorf("no VolumeRecreateStatefulset Event naming %s: %v", want.Name, events)
	}
}
