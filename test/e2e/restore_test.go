package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// backupEnv is an Etcd backed up to a real S3 server (versitygw) the pods reach on the node
// simulator's gateway.
type backupEnv struct {
	*env
	// s3 is the S3 server the backups go to (stopped and started again by scenarios).
	s3    *s3server.Server
	store backupstore.Store
	// deltaPeriod is the Etcd's spec.backup.deltaSnapshotPeriod: the bound on what a restore may
	// lose.
	deltaPeriod time.Duration
	// lostEarlier are the writes an earlier restore of this cluster lost: not counted again.
	lostEarlier map[string]bool
}

// createBackedUpCluster creates an Etcd backed up to a fresh bucket (backupSpec) and waits until
// it has converged.
func createBackedUpCluster(ctx context.Context, e *env, prefix string, replicas int32) *backupEnv {
	e.t.Helper()
	return createBackedUpClusterWith(ctx, e, prefix, framework.EtcdImage(fromVersion), replicas, nil)
}

// createBackedUpClusterWith is createBackedUpCluster with members that run image and tune
// applied to the members' backup Secret and backup spec before the Etcd is created (a throttle
// in front of the server, another schedule). The test's own view of the store (b.store) reaches
// the server directly.
func createBackedUpClusterWith(ctx context.Context, e *env, prefix, image string, replicas int32,
	tune func(srv *s3server.Server, secret map[string][]byte, backup *druidv1alpha1.BackupSpec)) *backupEnv {
	t := e.t
	t.Helper()
	srv := s3server.StartT(t, e.stack.Network.GatewayIP(), backupBucket)
	b := &backupEnv{env: e, s3: srv, lostEarlier: map[string]bool{}}
	var storePrefix string
	createClusterNamed(ctx, e, prefix, etcdName, image, replicas, func(ctx context.Context, ns string, etcd *druidv1alpha1.Etcd) error {
		storePrefix = ns + "/" + etcd.Name
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-backup"}, Data: srv.SecretData()}
		etcd.Spec.Backup = backupSpec(storePrefix, secret.Name)
		if tune != nil {
			tune(srv, secret.Data, etcd.Spec.Backup)
		}
		if err := e.stack.Client.Create(ctx, secret); err != nil {
			return err
		}
		b.deltaPeriod = etcd.Spec.Backup.DeltaSnapshotPeriod.Duration
		return nil
	})
	store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: backupBucket, Prefix: storePrefix, Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	b.store = store
	return b
}

// snapshots lists what the store holds.
func (b *backupEnv) snapshots(ctx context.Context) ([]snapshot.Snapshot, error) {
	objects, err := b.store.List(ctx, snapshot.Dir)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, o.Key)
	}
	snaps, _ := snapshot.ParseAll(keys)
	return snaps, nil
}

// waitDeltaAfter waits for a delta snapshot taken after t: the writes acknowledged before t are
// in the backup.
func (b *backupEnv) waitDeltaAfter(ctx context.Context, t time.Time) {
	b.waitFor(ctx, "a delta snapshot after "+t.Format(time.RFC3339), func(ctx context.Context) (bool, error) {
		snaps, err := b.snapshots(ctx)
		for _, s := range snaps {
			if s.Kind == snapshot.KindDelta && s.CreatedOn.After(t) {
				return true, nil
			}
		}
		return false, err
	})
}

// wipeVolume deletes member i's claim and pod, as after a disk failure: the StatefulSet
// controller recreates both, the new volume empty.
func wipeVolume(ctx context.Context, e *env, i int) {
	claim := "data-" + e.cluster.PodName(i)
	if err := e.stack.Kube.CoreV1().PersistentVolumeClaims(e.cluster.Namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting claim %s: %v", claim, err)
	}
	if err := e.stack.Kube.CoreV1().Pods(e.cluster.Namespace).Delete(ctx, e.cluster.PodName(i), metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting pod: %v", err)
	}
}

var restoredRevision = regexp.MustCompile(`revision (\d+) of (\d+)`)

// restoreOutcome is what one loss-and-restore measured.
type restoreOutcome struct {
	name string
	// rto is the write outage: from the last write acknowledged before the restore to the first
	// after it.
	rto time.Duration
	// sinceDelta is from the last delta the restore applied to the fault; lost the acknowledged
	// writes missing afterwards (all of them acknowledged after that delta).
	sinceDelta  time.Duration
	lost, acked int
	// lostBeforeDelta are the writes lost that the backup held (acknowledged before the last
	// delta the restore applied): each one fails the test.
	lostBeforeDelta int
	restored        string
	// revision is the revision the restore reached (its last snapshot's end revision).
	revision int64
}

// lose wipes the volumes of members, waits until the cluster serves again (restored from the
// backup by itself) with n members settled, and checks what was kept.
func (b *backupEnv) lose(ctx context.Context, name string, rec *workload.Recorder, n int, members ...int) restoreOutcome {
	b.t.Helper()
	return b.loseWith(ctx, name, rec, n, nil, members...)
}

// loseWith is lose with mid called right after the volumes are wiped (a fault injected while
// the restore is under way); the restore must still complete once it returns.
func (b *backupEnv) loseWith(ctx context.Context, name string, rec *workload.Recorder, n int, mid func(ctx context.Context), members ...int) restoreOutcome {
	t := b.t
	t.Helper()
	etcd, err := b.cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldID := etcd.Status.ClusterID
	b.waitDeltaAfter(ctx, time.Now().Add(time.Second))
	fault := time.Now()
	for _, i := range members {
		wipeVolume(ctx, b.env, i)
	}
	// What the store holds at the fault: the restored cluster's own snapshots (and garbage
	// collection) change it later.
	atFault, err := b.snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mid != nil {
		mid(ctx)
	}
	// The operator records the new cluster ID; the restoring member reports what it restored
	// on its Lease.
	var restorer string
	b.waitFor(ctx, "a new cluster ID", func(ctx context.Context) (bool, error) {
		etcd, err := b.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		return etcd.Status.ClusterID != "" && etcd.Status.ClusterID != oldID, nil
	})
	var restored string
	for i := 0; i < n; i++ {
		lease, err := b.stack.Kube.CoordinationV1().Leases(b.cluster.Namespace).Get(ctx, b.cluster.PodName(i), metav1.GetOptions{})
		if err == nil && restoredRevision.MatchString(lease.Annotations[memberlease.AnnotationStartDecision]) {
			restorer, restored = lease.Name, lease.Annotations[memberlease.AnnotationStartDecision]
		}
	}
	if restored == "" {
		t.Fatalf("no member Lease reports a restore")
	}
	framework.Eventually(t, 3*time.Minute, "membership back at "+strconv.Itoa(n), func(ctx context.Context) (bool, string) {
		return membershipSettled(ctx, b.env, n)
	})

	// The last delta applied: the one ending at the restored revision.
	m := restoredRevision.FindStringSubmatch(restored)
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	var lastDelta time.Time
	for _, s := range atFault {
		if s.EndRevision == rev && !s.CreatedOn.After(fault) && (s.Kind == snapshot.KindDelta || lastDelta.IsZero()) {
			lastDelta = s.CreatedOn
		}
	}
	if lastDelta.IsZero() {
		t.Fatalf("no snapshot in the store ends at the restored revision %d: %s", rev, restored)
	}
	writes := rec.Writer().Snapshot()
	summary := restored
	if _, after, ok := strings.Cut(restored, "; restored: "); ok {
		summary = after
	}
	out := restoreOutcome{name: name, sinceDelta: fault.Sub(lastDelta), restored: restorer + ": " + summary, revision: rev}
	// The outage: the longest gap between acknowledgements around the fault (the last write the
	// old cluster took to the first the restored one took).
	var prev time.Time
	for _, a := range writes.Acked {
		if !prev.IsZero() && a.At.After(fault) && a.At.Sub(prev) > out.rto {
			out.rto = a.At.Sub(prev)
		}
		if a.At.After(fault.Add(-time.Second)) {
			prev = a.At
		}
	}
	// Every write acknowledged before the last delta was taken must be there; one acknowledged
	// after it may be lost (that is the RPO).
	lost, err := workload.VerifyAcknowledged(ctx, b.cluster.Endpoints()(), b.cluster.PKI.ClientMaterial(), writes)
	if err != nil {
		t.Fatalf("auditing acknowledged writes: %v", err)
	}
	ackedAt := map[string]time.Time{}
	for _, a := range writes.Acked {
		ackedAt[a.Key] = a.At
		if a.At.Before(fault) {
			out.acked++
		}
	}
	var lostNow []string
	for _, k := range lost {
		if !b.lostEarlier[k] {
			lostNow = append(lostNow, k)
			b.lostEarlier[k] = true
		}
	}
	lost = lostNow
	var withinRPO []string
	for _, k := range lost {
		if ackedAt[k].Before(lastDelta) {
			t.Errorf("write %s acknowledged at %s, before the last delta snapshot (%s), was lost", k, ackedAt[k].Format(time.RFC3339Nano), lastDelta.Format(time.RFC3339))
			out.lostBeforeDelta++
			continue
		}
		withinRPO = append(withinRPO, k)
	}
	// The reads saw these before the fault and see them gone after it: a rollback the restore
	// makes by design. They alone are left out of the recorder's linearizability check; a
	// write lost before the last delta stays in and fails it too.
	rec.Exclude(withinRPO...)
	out.lost = len(lost)
	if out.rto == 0 {
		t.Errorf("no write was acknowledged after the restore")
	}
	fmt.Printf("e2e restore %-12s rto=%-7s writesLost=%d of %d (acked in the %s between the last delta and the fault; deltaSnapshotPeriod %s) restored by %s\n",
		name, out.rto.Round(100*time.Millisecond), out.lost, out.acked, out.sinceDelta.Round(100*time.Millisecond), b.deltaPeriod, out.restored)
	return out
}

// TestRestoreFromBackup: a single-node cluster that loses its volume restores on start; scaled to
// three, it loses two of three volumes (quorum lost with a majority without data, DEP-01
// scenario 10) and comes back by itself from the backup. One cluster for both, to keep the
// suite short.
func TestRestoreFromBackup(t *testing.T) {
	namespace, op := inParallel(t, "e2e-restore-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s, opts: operatorDefaults, operator: op}
	b := createBackedUpCluster(ctx, e, namespace, 1)
	rec := startRecorder(ctx, t, e.cluster, 1)

	b.lose(ctx, "single-node", rec, 1, 0)

	etcd, err := e.cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Replicas = 3
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "scaled to 3", func(ctx context.Context) (bool, string) {
		return membershipSettled(ctx, e, 3)
	})
	b.lose(ctx, "majority-lost", rec, 3, 1, 2)

	report, recErr := rec.Stop(ctx)
	if recErr != nil {
		t.Errorf("recorder: %v", recErr)
	}
	t.Logf("writer: %s", report.Summary())
	logEvents(ctx, t, e)
}
