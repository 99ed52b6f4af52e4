package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

const backupBucket = "backups"

// TestBackupsToObjectStore runs a 3-member cluster backing up to a real S3 server (versitygw on
// the host, reached by the pods over the node simulator's bridge) under the writer: the first
// full snapshot and the deltas make BackupReady True; an annotation on the Etcd takes a full
// snapshot on demand; the cron schedule takes one; every object reads back with its size and
// checksum, the full snapshots are bbolt files and the deltas chain without a gap. Then the store
// is stopped: BackupReady goes False with the reason while the cluster keeps taking writes, and
// True again once the store is back. No acknowledged write is lost.
func TestBackupsToObjectStore(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-backup-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	srv, err := s3server.New(s3server.Options{Host: s.Network.GatewayIP(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.CreateBucket(ctx, backupBucket); err != nil {
		t.Fatal(err)
	}

	e := &env{t: t, stack: s}
	var prefix string
	created := time.Now()
	cluster := createClusterWith(ctx, e, namespace, 3, func(ctx context.Context, ns string, etcd *druidv1alpha1.Etcd) error {
		prefix = ns + "/" + etcd.Name
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-backup"}, Data: srv.SecretData()}
		if err := s.Client.Create(ctx, secret); err != nil {
			return err
		}
		etcd.Spec.Backup = backupSpec(prefix, "etcd-backup")
		return nil
	})
	t.Cleanup(func() { dumpAgentsOnFailure(t, s, cluster) })
	store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: backupBucket, Prefix: prefix, Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}

	rec := startRecorder(ctx, t, cluster, 3)
	e.waitFor(ctx, "BackupReady True (first full snapshot and a delta)", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	firstReady := time.Since(created) // from the Etcd's creation: the cluster forms, then backs up

	// On demand: a new value of the annotation on the Etcd.
	request := time.Now().UTC().Format(time.RFC3339Nano)
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	metav1.SetMetaDataAnnotation(&etcd.ObjectMeta, resources.AnnotationFullSnapshot, request)
	requested := time.Now()
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	var onDemand string
	e.waitFor(ctx, "the on-demand full snapshot", func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: memberlease.FullSnapshotLeaseName(etcd)}, lease); err != nil {
			return false, err
		}
		onDemand = lease.Annotations[memberlease.AnnotationSnapshotKey]
		return lease.Annotations[memberlease.AnnotationFullSnapshotHandled] == request, nil
	})
	onDemandAfter := time.Since(requested)
	if _, err := store.Stat(ctx, onDemand); err != nil {
		t.Fatalf("the on-demand snapshot %s recorded on the Lease is not in the store: %v", onDemand, err)
	}

	// On schedule: the cron fires every minute.
	e.waitFor(ctx, "a scheduled full snapshot", func(ctx context.Context) (bool, error) {
		n, err := sumMetric(ctx, cluster, `etcd_conductor_backup_snapshots_total{kind="Full",rule="`+backup.RuleFullScheduled+`"}`)
		return n >= 1, err
	})

	chain := verifyStore(ctx, t, store)

	// The store goes away: BackupReady False with the reason, the cluster keeps serving.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	e.waitFor(ctx, "BackupReady False while the store is down", backupReadyIs(cluster, druidv1alpha1.ConditionFalse))
	detected := time.Since(stopped)
	etcd, err = cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeBackupReady)
	t.Logf("store down: BackupReady %s %s: %s", down.Status, down.Reason, down.Message)
	if down.Reason != memberlease.ReasonStoreUnreachable && down.Reason != memberlease.ReasonUploadFailed {
		t.Errorf("BackupReady reason %s while the store is down, want %s or %s", down.Reason, memberlease.ReasonStoreUnreachable, memberlease.ReasonUploadFailed)
	}
	eps := cluster.Endpoints()()
	cc := dialMember(t, eps[0], cluster.PKI.ClientMaterial().Config)
	if _, err := pb.NewKVClient(cc).Put(ctx, &pb.PutRequest{Key: []byte("backup-outage"), Value: []byte("served")}); err != nil {
		t.Errorf("a write while the store is down: %v", err)
	}
	if ready := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeReady); ready == nil || ready.Status != druidv1alpha1.ConditionTrue {
		t.Errorf("Ready %+v while only the store is down", ready)
	}

	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	e.waitFor(ctx, "BackupReady True once the store is back", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	recovered := time.Since(restarted)
	after := verifyStore(ctx, t, store)
	if after.EndRevision() <= chain.EndRevision() {
		t.Errorf("no newer snapshot after the store came back: revision %d, before the outage %d", after.EndRevision(), chain.EndRevision())
	}

	report, recErr := rec.Stop(ctx)
	checkWrites(t, report, recErr)
	checkPromise(t, backupPromise, report)
	t.Logf("figures backup: firstReady=%s onDemand=%s outageDetected=%s recovered=%s %s", firstReady.Round(100*time.Millisecond),
		onDemandAfter.Round(100*time.Millisecond), detected.Round(100*time.Millisecond), recovered.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s firstBackupReady=%-6s onDemandFull=%-6s storeDownDetected=%-6s backupRecovered=%-6s quorumLossMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d\n",
		"backup-to-s3", firstReady.Round(100*time.Millisecond), onDemandAfter.Round(100*time.Millisecond), detected.Round(100*time.Millisecond),
		recovered.Round(100*time.Millisecond), report.QuorumLossMs, report.FailedWrites, report.AckedWrites, report.LostAckedWrites)
}

// backupPromise: backups and a store outage are the member agents' business, beside etcd; they
// take nothing from the quorum and move no leadership.
var backupPromise = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: 0}

// backupSpec backs up to the test bucket: a full snapshot every minute, deltas every 3 s.
func backupSpec(prefix, secret string) *druidv1alpha1.BackupSpec {
	return &druidv1alpha1.BackupSpec{
		Store: &druidv1alpha1.StoreSpec{
			Provider:  ptr.To(druidv1alpha1.StorageProvider("S3")),
			Container: ptr.To(backupBucket),
			Prefix:    prefix,
			SecretRef: &corev1.SecretReference{Name: secret},
		},
		FullSnapshotSchedule:    ptr.To("* * * * *"),
		DeltaSnapshotPeriod:     &metav1.Duration{Duration: 3 * time.Second},
		GarbageCollectionPolicy: ptr.To(druidv1alpha1.GarbageCollectionPolicy("LimitBased")),
		MaxBackupsLimitBasedGC:  ptr.To(int32(4)),
		GarbageCollectionPeriod: &metav1.Duration{Duration: 20 * time.Second},
	}
}

func backupReadyIs(cluster *stack.EtcdCluster, want druidv1alpha1.ConditionStatus) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeBackupReady)
		if c == nil {
			return false, fmt.Errorf("no BackupReady condition")
		}
		if c.Status != want {
			return false, fmt.Errorf("BackupReady %s %s: %s", c.Status, c.Reason, c.Message)
		}
		return true, nil
	}
}

// verifyStore reads every snapshot back (the store checks size and SHA-256 as it reads), checks
// that full snapshots are bbolt databases and deltas decode, and that the latest chain has no gap.
func verifyStore(ctx context.Context, t *testing.T, store backupstore.Store) snapshot.Chain {
	t.Helper()
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	fulls, deltas, bytesRead := 0, 0, int64(0)
	for _, o := range objs {
		keys = append(keys, o.Key)
		snap, err := snapshot.Parse(o.Key)
		if err != nil {
			t.Errorf("foreign object %s in the backup prefix", o.Key)
			continue
		}
		r, err := store.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			t.Fatalf("reading %s back: %v", o.Key, err)
		}
		bytesRead += int64(len(body))
		switch snap.Kind {
		case snapshot.KindFull:
			fulls++
			// A bbolt file starts with a meta page: 16 bytes of page header, then the magic.
			if len(body) < 20 || !bytes.Equal(body[16:20], []byte{0xed, 0xda, 0x0c, 0xed}) {
				t.Errorf("full snapshot %s (%d bytes) is not a bbolt database", o.Key, len(body))
			}
		case snapshot.KindDelta:
			deltas++
			f, err := snapshot.DecodeDelta(bytes.NewReader(body))
			if err != nil {
				t.Errorf("delta %s: %v", o.Key, err)
			} else if f.StartRevision != snap.StartRevision || f.EndRevision != snap.EndRevision {
				t.Errorf("delta %s holds revisions %d..%d", o.Key, f.StartRevision, f.EndRevision)
			}
		}
	}
	snaps, _ := snapshot.ParseAll(keys)
	chain, ok := snapshot.Latest(snaps)
	if !ok {
		t.Fatalf("no full snapshot in the store: %v", keys)
	}
	if chain.Gap != "" {
		t.Errorf("the latest chain has a gap: %s", chain.Gap)
	}
	t.Logf("store: %d full, %d delta snapshots (%d bytes, all verified); latest %s + %d deltas up to revision %d",
		fulls, deltas, bytesRead, chain.Full.Name(), len(chain.Deltas), chain.EndRevision())
	return chain
}

// sumMetric adds a sample's value over every member-agent's backup metrics (the leader may move).
func sumMetric(ctx context.Context, cluster *stack.EtcdCluster, sample string) (float64, error) {
	pods, err := cluster.Pods(ctx)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(resources.BackupMetricsPort))) + "/metrics"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		if err != nil {
			continue // a member restarting; the others count
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				total += f
			}
		}
		_ = resp.Body.Close()
	}
	return total, nil
}

// dumpAgentsOnFailure prints the member-agents' logs, where the backup loop logs.
func dumpAgentsOnFailure(t *testing.T, s *stack.Stack, cluster *stack.EtcdCluster) {
	if !t.Failed() || cluster == nil {
		return
	}
	for i := range cluster.Replicas {
		path, err := s.Sim.Logs(cluster.PodKey(i), resources.MemberAgentContainerName)
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(path); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("member-agent log of %s:\n%s", cluster.PodName(i), strings.Join(lines, "\n"))
		}
	}
}
