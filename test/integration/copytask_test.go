package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestEtcdCopyBackupsTask: etcd-druid's EtcdCopyBackupsTask on a real kube-apiserver, carried out
// by the operator against a real S3 server holding a real backup chain (a real etcd's full and
// delta snapshots, written by the member-agent's backup loop). A task created under strict field
// validation copies and Succeeds; the target then restores, under another Etcd's ownership, to the
// source's revision and keyspace, its deltas replayed and checked against the chain's digest. A
// task with waitForFinalSnapshot waits while the source holds no full snapshot taken since it was
// created, and copies once one is taken. A task to a target already holding part of the
// chain skips those objects and says so. Tasks with a missing Secret or a provider not supported
// Fail with a message naming it, and leave their target empty.
func TestEtcdCopyBackupsTask(t *testing.T) {
	env := sharedControlPlane(t)
	ns, name := testNamespace("copytask"), "source"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	c := env.Client()
	kube, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := s3server.StartT(t, "", "source")
	for _, b := range []string{"target", "final", "resumed", "newest", "untouched"} {
		if err := srv.CreateBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: srv.SecretData()}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	openStore := func(bucket string) backupstore.Store {
		t.Helper()
		s, err := backupstore.New(backupstore.Config{Provider: "S3", Container: bucket, Prefix: "etcd", Secret: srv.SecretData()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	source := openStore("source")

	// A real backup chain: the loop's first full snapshot, then deltas of writes.
	owner := snapshot.Owner{Etcd: ns + "/" + name, EtcdUID: "source-uid"}
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	cluster := startBackupLoop(loopCtx, t, kube, ns, name,
		backupstore.Flags{Provider: "S3", Container: "source", Prefix: "etcd", SecretDir: writeSecretDir(t, srv.SecretData()), Etcd: owner.Etcd, EtcdUID: owner.EtcdUID})
	cc, err := cluster.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(cc)
	var last int64
	for i := range 50 {
		resp, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "/registry/key-%02d", i%20), Value: fmt.Appendf(nil, "value-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
		if i == 30 {
			if _, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("/registry/key-03")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	framework.Eventually(t, time.Minute, "the writes in a delta", func(ctx context.Context) (bool, string) {
		rec, err := snapshotLease(ctx, kube, ns, name+"-delta-snap")
		return err == nil && rec.Revision >= last, fmt.Sprintf("%+v %v", rec, err)
	})

	newTask := func(taskName string, src, dst druidv1alpha1.StoreSpec, wait *druidv1alpha1.WaitForFinalSnapshotSpec) *druidv1alpha1.EtcdCopyBackupsTask {
		t.Helper()
		task := &druidv1alpha1.EtcdCopyBackupsTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: taskName},
			Spec: druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: src, TargetStore: dst, WaitForFinalSnapshot: wait,
				PodLabels: map[string]string{"networking.gardener.cloud/to-public-networks": "allowed"}},
		}
		if err := c.Create(ctx, task, client.FieldValidation("Strict")); err != nil {
			t.Fatal(err)
		}
		return task
	}
	s3Spec := func(bucket, secretName string) druidv1alpha1.StoreSpec {
		return druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("aws")), Container: ptr.To(bucket), Prefix: "etcd",
			SecretRef: &corev1.SecretReference{Name: secretName}}
	}
	waitCondition := func(task *druidv1alpha1.EtcdCopyBackupsTask, want druidv1alpha1.ConditionType) druidv1alpha1.Condition {
		t.Helper()
		got := &druidv1alpha1.EtcdCopyBackupsTask{}
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("EtcdCopyBackupsTask %s %s", task.Name, want), func(ctx context.Context) (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
				return false, err.Error()
			}
			cond := druidv1alpha1.FindCondition(got.Status.Conditions, want)
			return cond != nil && cond.Status == druidv1alpha1.ConditionTrue, fmt.Sprintf("%+v", got.Status)
		})
		if got.Status.ObservedGeneration == nil || *got.Status.ObservedGeneration != got.Generation {
			t.Errorf("task %s observedGeneration %v, want %d", task.Name, got.Status.ObservedGeneration, got.Generation)
		}
		return *druidv1alpha1.FindCondition(got.Status.Conditions, want)
	}

	// Snapshot names carry whole seconds: the task is created in a later second than the chain's
	// full snapshot, so that one does not end its wait.
	time.Sleep(1100 * time.Millisecond)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), CopyBackupsTasks: true, WatchNamespaces: []string{ns}})

	t.Run("copies a real chain, and the target restores to the source", func(t *testing.T) {
		cond := waitCondition(newTask("migrate", s3Spec("source", "s3"), s3Spec("target", "s3"), nil), druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if cond.Reason != "CopytaskCopied" || !strings.Contains(cond.Message, "0 already in the target") {
			t.Errorf("Succeeded %s: %s", cond.Reason, cond.Message)
		}
		want := restoreFrom(ctx, t, source, owner)
		got := restoreFrom(ctx, t, openStore("target"), snapshot.Owner{Etcd: ns + "/migrated", EtcdUID: "migrated-uid"})
		if got.Revision != want.Revision || got.Keys != want.Keys || got.Full != want.Full || got.DeltasApplied != want.DeltasApplied ||
			got.Stopped != "" || got.Checked != want.Checked || !strings.Contains(got.Checked, "digest") {
			t.Errorf("the target restores to\n  %s\nthe source to\n  %s\nwant the same, deltas replayed and checked against the digest", got, want)
		}
		if got.Revision < last {
			t.Errorf("the target restores to revision %d, the writes reached %d", got.Revision, last)
		}
		if _, err := openStore("target").Stat(ctx, snapshot.OwnerKey); err == nil {
			t.Error("the source's store claim was copied: the Etcd using the target could not claim it")
		}
	})

	t.Run("waits for a full snapshot taken since the task, then copies it", func(t *testing.T) {
		task := newTask("final", s3Spec("source", "s3"), s3Spec("final", "s3"),
			&druidv1alpha1.WaitForFinalSnapshotSpec{Enabled: true, Timeout: &metav1.Duration{Duration: 3 * time.Minute}})
		eventWithReason(t, env, ns, task.Name, "CopytaskWaitFinalSnapshot")
		if objs, err := openStore("final").List(ctx, ""); err != nil || len(objs) != 0 {
			t.Fatalf("while waiting the target holds %d objects (%v), want none", len(objs), err)
		}
		// The source cluster stopped writing; its last full snapshot is asked for on its Lease, as
		// an EtcdOpsTask would.
		if _, err := kube.CoordinationV1().Leases(ns).Patch(ctx, name+"-full-snap", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"final"}}}`, memberlease.AnnotationFullSnapshotRequest), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		cond := waitCondition(task, druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if cond.Reason != "CopytaskCopied" {
			t.Errorf("Succeeded %s: %s", cond.Reason, cond.Message)
		}
		stopLoop() // nothing more is written to the source: compare it with the target as they are
		want := restoreFrom(ctx, t, source, owner)
		got := restoreFrom(ctx, t, openStore("final"), snapshot.Owner{Etcd: ns + "/migrated", EtcdUID: "migrated-uid"})
		if got.Full != want.Full || got.Revision != want.Revision || got.Keys != want.Keys || got.Stopped != "" {
			t.Errorf("the target restores to\n  %s\nthe source to\n  %s", got, want)
		}
		if full, err := snapshot.Parse(got.Full); err != nil || full.CreatedOn.Before(task.CreationTimestamp.Truncate(time.Second)) {
			t.Errorf("the target's latest full snapshot %s (%v) was taken before the task was created (%s)", got.Full, err, task.CreationTimestamp)
		}
	})

	t.Run("a target already holding part of the backups: those are skipped", func(t *testing.T) {
		resumed := openStore("resumed")
		objs, err := source.List(ctx, snapshot.Dir)
		if err != nil || len(objs) < 3 {
			t.Fatalf("source: %d objects, %v", len(objs), err)
		}
		seeded := objs[:2]
		for _, o := range seeded {
			obj, err := source.Stat(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			r, err := source.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = resumed.Put(ctx, o.Key, r, obj.Size, obj.SHA256)
			_ = r.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		cond := waitCondition(newTask("resume", s3Spec("source", "s3"), s3Spec("resumed", "s3"), nil), druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if !strings.Contains(cond.Message, fmt.Sprintf("%d already in the target", len(seeded))) {
			t.Errorf("Succeeded: %s; want %d skipped", cond.Message, len(seeded))
		}
		all, err := resumed.List(ctx, snapshot.Dir)
		if err != nil || len(all) != len(objs) {
			t.Errorf("the resumed target holds %d snapshots (%v), the source %d", len(all), err, len(objs))
		}
	})

	t.Run("etcd-druid's manifest with every field: after the wait times out, the newest backup only", func(t *testing.T) {
		obj := readManifest(t, "copytask-every-field.yaml", ns)
		if err := unstructured.SetNestedField(obj.Object, srv.Endpoint(), "spec", "sourceStore", "endpointOverride"); err != nil {
			t.Fatal(err)
		}
		// The source takes no more snapshots: the wait for a final one times out, and the backups
		// are copied anyway, as etcd-druid's.
		if err := unstructured.SetNestedField(obj.Object, "2s", "spec", "waitForFinalSnapshot", "timeout"); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj, client.FieldValidation("Strict")); err != nil {
			t.Fatal(err)
		}
		task := &druidv1alpha1.EtcdCopyBackupsTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.GetName()}}
		cond := waitCondition(task, druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if !strings.HasPrefix(cond.Message, "copied 1 backups:") {
			t.Errorf("Succeeded: %s; want one backup (maxBackups: 1)", cond.Message)
		}
		eventWithReason(t, env, ns, task.Name, "CopytaskCopyFinalSnapshotTimedOut")
		srcObjs, err := source.List(ctx, snapshot.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range srcObjs {
			keys = append(keys, o.Key)
		}
		snaps, _ := snapshot.ParseAll(keys)
		newest, _ := snapshot.LatestOfKind(snaps, snapshot.KindFull)
		copied, err := openStore("newest").List(ctx, snapshot.Dir)
		if err != nil || len(copied) == 0 || copied[0].Key != newest.Key() {
			t.Errorf("the target holds %v (%v), want the newest backup, from %s", copied, err, newest.Key())
		}
	})

	t.Run("a missing Secret or a provider not supported fails the task, the target untouched", func(t *testing.T) {
		bad := s3Spec("untouched", "s3")
		bad.Provider = ptr.To(druidv1alpha1.StorageProvider("gcp"))
		for _, tt := range []struct {
			name     string
			src, dst druidv1alpha1.StoreSpec
			wantIn   string
		}{
			{"no-secret", s3Spec("source", "missing"), s3Spec("untouched", "s3"), "spec.sourceStore: Secret " + ns + "/missing named in secretRef does not exist"},
			{"bad-provider", s3Spec("source", "s3"), bad, `spec.targetStore: provider: backup store provider "gcp" is not supported here`},
		} {
			task := newTask(tt.name, tt.src, tt.dst, nil)
			cond := waitCondition(task, druidv1alpha1.EtcdCopyBackupsTaskFailed)
			if !strings.Contains(cond.Message, tt.wantIn) {
				t.Errorf("%s: Failed %s: %q, want it to say %q", tt.name, cond.Reason, cond.Message, tt.wantIn)
			}
			got := &druidv1alpha1.EtcdCopyBackupsTask{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil || ptr.Deref(got.Status.LastError, "") != cond.Message {
				t.Errorf("%s: lastError %v (%v), want the condition's message", tt.name, got.Status.LastError, err)
			}
		}
		if objs, err := openStore("untouched").List(ctx, ""); err != nil || len(objs) != 0 {
			t.Errorf("the failed tasks' target holds %d objects (%v), want none", len(objs), err)
		}
	})
}

// restoreFrom restores the store's latest chain, as owner, into a fresh data dir.
func restoreFrom(ctx context.Context, t *testing.T, store backupstore.Store, owner snapshot.Owner) restore.Result {
	t.Helper()
	res, err := restore.FromStore(ctx, store, owner, restore.Options{
		DataDir: filepath.Join(t.TempDir(), "restored.etcd"), Name: "etcd-0", PeerURL: "http://127.0.0.1:2380", Token: "t", Log: logr.Discard()})
	if err != nil {
		t.Fatalf("restoring from %s: %v", store, err)
	}
	return res
}
