package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// TestStorageClassChanged moves a running three-member cluster to volumes of another storage
// class and size with the writer, the quorum monitor and the linearizability check on. The
// StatefulSet is created again without its pods under a claim template of a new name, and the
// rollout replaces the members one at a time, the leader last: each comes back on a new, empty
// claim and rejoins as a learner. Then: 0 ms quorum loss, no acknowledged write lost, every
// member on a claim of the new class with a new member ID, and the old claims still there.
func TestStorageClassChanged(t *testing.T) { runStorageClassChange(t, 3) }

// TestStorageClassChangedFiveMembers is TestStorageClassChanged on five members.
func TestStorageClassChangedFiveMembers(t *testing.T) {
	soakOnly(t, "TestStorageClassChanged on five members")
	runStorageClassChange(t, 5)
}

// volumeMoveNoQuorumLoss is the promise of a move to new volumes no fault disturbs.
var volumeMoveNoQuorumLoss = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "every member, the leader last, comes back on an empty volume: leadership moves with the members and the count is not the move's promise"}

// volumeMove moves a cluster of replicas members to volumes of another class and size
// (runVolumeMove).
type volumeMove struct {
	name     string
	replicas int32
	promise  scenariopkg.Promise
	// during acts once the StatefulSet is created again on the new claim template (the move
	// under way); the move must still complete once it returns.
	during func(ctx context.Context, e *env)
	// backup backs the cluster up to a real S3 server (e.backup); apiLink starts the operator
	// behind a link to the apiserver a fault can cut (e.apiLink).
	backup, apiLink bool
	// record, when set, receives the figures (the operation × fault matrix's table).
	record func(matrixFigures)
}

func runStorageClassChange(t *testing.T, replicas int32) {
	runVolumeMove(t, volumeMove{name: fmt.Sprintf("volume-%d", replicas), replicas: replicas, promise: volumeMoveNoQuorumLoss})
}

func runVolumeMove(t *testing.T, vm volumeMove) {
	if err := vm.promise.Validate(); err != nil {
		t.Fatalf("volume move %s: %v", vm.name, err)
	}
	replicas := vm.replicas
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s, opts: operatorDefaults}
	if vm.apiLink {
		e.apiLink = framework.NewAPIServerLink()
		e.opts.APIServerLink = e.apiLink
	}
	e.operator = framework.StartOperator(t, s.Cluster.RESTConfig(), e.opts)
	prefix := "e2e-" + vm.name + "-"
	var cluster *stack.EtcdCluster
	if vm.backup {
		e.backup = createBackedUpCluster(ctx, e, prefix, replicas)
		cluster = e.cluster
	} else {
		cluster = createCluster(ctx, e, prefix, replicas)
	}
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
	if vm.during != nil {
		vm.during(rolloutCtx, e)
	}
	if err := cluster.WaitConverged(rolloutCtx, image); err != nil {
		t.Fatalf("the members did not move to the new volumes: %v", err)
	}
	moved := time.Since(changed)
	time.Sleep(time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures %s: moved=%s %s", vm.name, moved.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s moved=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		vm.name, moved.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	if vm.record != nil {
		vm.record(matrixFigures{quorumLossMs: report.QuorumLossMs, lost: report.LostAckedWrites, leaderChanges: report.LeaderChanges,
			took: moved, linearizable: report.LinearizabilityError == "", completed: true})
	}
	checkWrites(t, report, recErr)
	for _, q := range report.QuorumLosses {
		t.Logf("quorum loss from %s for %dms", q.Start.Sub(changed).Round(10*time.Millisecond), q.Ms)
	}
	checkPromise(t, vm.promise, report)
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
	// The change is reported done, naming the old claims kept with their data.
	var kept []string
	for i := range cluster.Replicas {
		kept = append(kept, "data-"+cluster.PodName(i))
	}
	waitVolumeChange(ctx, e, cluster, volumechange.RuleDone, kept)
}

// waitVolumeChange waits until the VolumeChange condition says the change is done under rule and
// its message names every claim of named.
func waitVolumeChange(ctx context.Context, e *env, cluster *stack.EtcdCluster, rule ruleid.ID, named []string) {
	e.t.Helper()
	last := "none"
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e.waitFor(waitCtx, "the VolumeChange condition "+rule.CamelCase(), func(ctx context.Context) (bool, error) {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			return false, fmt.Errorf("%w (last seen: VolumeChange %s)", err, last)
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVolumeChange)
		if c == nil {
			return false, fmt.Errorf("no VolumeChange condition")
		}
		last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		if c.Status != druidv1alpha1.ConditionFalse || c.Reason != rule.CamelCase() {
			return false, fmt.Errorf("VolumeChange %s", last)
		}
		for _, n := range named {
			if !strings.Contains(c.Message, n) {
				return false, fmt.Errorf("VolumeChange does not name %s: %s", n, last)
			}
		}
		return true, nil
	})
	e.t.Logf("VolumeChange %s", last)
}

// TestStorageCapacityExpandedInPlace grows the volumes of a running three-member cluster within a
// storage class that allows volume expansion, with the writer, the quorum monitor and the
// linearizability check on. The claims grow in place (the node simulator plays the resizer and
// kubelet) and the StatefulSet is created again on the same claim template with the new size: no
// member moves, restarts or changes leadership. Then: 0 ms quorum loss, no leader change, the same
// pods, claims and member IDs, every claim's capacity at the new size, the VolumeChange condition
// at VolumeClaimsExpanded.
func TestStorageCapacityExpandedInPlace(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	e := &env{t: t, stack: s}
	var class string
	cluster := createClusterWith(ctx, e, "e2e-expand-", 3, func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error {
		// Cluster-scoped: named after the scenario's namespace, deleted with it.
		class = namespace + "-expandable"
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "nodesim.etcd-conductor/hostpath",
			AllowVolumeExpansion: ptr.To(true)}
		if err := s.Client.Create(ctx, sc); err != nil {
			return err
		}
		t.Cleanup(func() { _ = s.Client.Delete(context.Background(), sc) })
		etcd.Spec.StorageClass = ptr.To(class)
		etcd.Spec.StorageCapacity = ptr.To(resource.MustParse("1Gi"))
		return nil
	})
	image := framework.EtcdImage(fromVersion)
	type member struct {
		id       uint64
		pod      types.UID
		restarts int32
		claim    types.UID
	}
	snapshot := func() map[string]member {
		out := map[string]member{}
		pods, err := cluster.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			m := member{id: memberID(ctx, e, p.Name), pod: p.UID}
			for _, cs := range p.Status.ContainerStatuses {
				m.restarts += cs.RestartCount
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "data-" + p.Name}, pvc); err != nil {
				t.Fatal(err)
			}
			m.claim = pvc.UID
			out[p.Name] = m
		}
		return out
	}
	before := snapshot()

	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(2 * time.Second) // a baseline the growth is seen against
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	size := resource.MustParse("2Gi")
	etcd.Spec.StorageCapacity = &size
	changed := time.Now()
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "every claim at 2Gi and the StatefulSet asking for it on the same claims", func(ctx context.Context) (bool, error) {
		sts, err := cluster.StatefulSet(ctx)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if running, ok := resources.RunningClaims(sts); !ok || running.Name != "data" || running.Capacity != size.String() {
			return false, fmt.Errorf("StatefulSet claims %+v", running)
		}
		for i := range cluster.Replicas {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "data-" + cluster.PodName(i)}, pvc); err != nil {
				return false, err
			}
			if have := pvc.Status.Capacity[corev1.ResourceStorage]; have.Cmp(size) != 0 {
				return false, fmt.Errorf("claim %s at %s", pvc.Name, have.String())
			}
		}
		return true, nil
	})
	grown := time.Since(changed)
	waitVolumeChange(ctx, e, cluster, volumechange.RuleExpanded, []string{"grown in place"})
	if err := cluster.WaitConverged(ctx, image); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures volume-expanded-in-place: grown=%s %s", grown.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s grown=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		"storage-expanded-in-place", grown.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	checkWrites(t, report, recErr)
	if report.QuorumLossMs != 0 {
		t.Errorf("quorum lost for %d ms while the volumes grew", report.QuorumLossMs)
	}
	if report.LeaderChanges != 0 {
		t.Errorf("%d leader change(s) while the volumes grew, want none", report.LeaderChanges)
	}
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	after := snapshot()
	for pod, b := range before {
		if a := after[pod]; a != b {
			t.Errorf("%s: %+v before the growth, %+v after: want the same pod, member, claim and no restart", pod, b, a)
		}
	}
	if events, _ := cluster.EventsWithReason(ctx, "VolumeRecreateStatefulset"); len(events) > 0 {
		t.Errorf("members moved to new volumes: %v", events)
	}
}
