package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/opstask"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestEtcdOpsTaskOnDemandSnapshots: etcd-druid's EtcdOpsTask, carried out by the operator and a
// member-agent's backup loop (run in process against a real etcd, the real snapshot Leases and a
// Local store). A full snapshot task waits InProgress until the loop runs; a second task of the
// same Etcd meanwhile is Rejected (one at a time); the full task then Succeeds with the snapshot's
// revision and object, which is in the store; a delta task after more writes Succeeds with a delta
// in the store; with the loop stopped a task fails at its timeout; a task of an Etcd without a
// backup store is Rejected and, its TTL over, deleted.
func TestEtcdOpsTaskOnDemandSnapshots(t *testing.T) {
	env := sharedControlPlane(t)
	ns, name := testNamespace("opstask"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	c := env.Client()

	etcd := framework.NewEtcd(ns, name, 1, framework.EtcdImage("3.6.8"))
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
		Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To("backups"), Prefix: name,
	}}
	if err := c.Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	fullLease, deltaLease := memberlease.FullSnapshotLeaseName(etcd), memberlease.DeltaSnapshotLeaseName(etcd)
	for _, l := range []string{fullLease, deltaLease} {
		framework.Eventually(t, timeout, "snapshot Lease "+l, func(ctx context.Context) (bool, string) {
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: l}, &coordinationv1.Lease{})
			return err == nil, fmt.Sprint(err)
		})
	}

	newTask := func(taskName, etcdName string, kind druidv1alpha1.OnDemandSnapshotType, ttl *int32) *druidv1alpha1.EtcdOpsTask {
		t.Helper()
		task := &druidv1alpha1.EtcdOpsTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: taskName},
			Spec: druidv1alpha1.EtcdOpsTaskSpec{EtcdName: ptr.To(etcdName), TTLSecondsAfterFinished: ttl,
				Config: druidv1alpha1.EtcdOpsTaskConfig{OnDemandSnapshot: &druidv1alpha1.OnDemandSnapshotConfig{Type: kind}}},
		}
		if err := c.Create(ctx, task, client.FieldValidation("Strict")); err != nil {
			t.Fatal(err)
		}
		return task
	}
	waitState := func(task *druidv1alpha1.EtcdOpsTask, want druidv1alpha1.TaskState) *druidv1alpha1.EtcdOpsTask {
		t.Helper()
		got := &druidv1alpha1.EtcdOpsTask{}
		framework.Eventually(t, timeout, fmt.Sprintf("EtcdOpsTask %s %s", task.Name, want), func(ctx context.Context) (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
				return false, err.Error()
			}
			if got.Status.State != nil && *got.Status.State == want {
				return true, ""
			}
			return false, fmt.Sprintf("status %+v, lastOperation %+v", got.Status, got.Status.LastOperation)
		})
		return got
	}
	hasError := func(task *druidv1alpha1.EtcdOpsTask, code string) {
		t.Helper()
		for _, e := range task.Status.LastErrors {
			if e.Code == code {
				return
			}
		}
		t.Errorf("EtcdOpsTask %s lastErrors %+v, want %s", task.Name, task.Status.LastErrors, code)
	}

	// The defaults are etcd-druid's, applied by the apiserver.
	full := newTask("full-1", name, druidv1alpha1.OnDemandSnapshotTypeFull, nil)
	running := waitState(full, druidv1alpha1.TaskStateInProgress)
	if cfg := running.Spec.Config.OnDemandSnapshot; ptr.Deref(running.Spec.TTLSecondsAfterFinished, 0) != 3600 ||
		ptr.Deref(cfg.TimeoutSecondsFull, 0) != 480 || ptr.Deref(cfg.TimeoutSecondsDelta, 0) != 60 {
		t.Errorf("defaults not applied: ttl %v, timeouts full %v delta %v", running.Spec.TTLSecondsAfterFinished, cfg.TimeoutSecondsFull, cfg.TimeoutSecondsDelta)
	}
	if running.Status.StartedAt == nil {
		t.Error("InProgress without startedAt")
	}

	// One task per Etcd at a time.
	dup := waitState(newTask("dup", name, druidv1alpha1.OnDemandSnapshotTypeDelta, nil), druidv1alpha1.TaskStateRejected)
	hasError(dup, opstask.ErrDuplicateTask)

	// The leading member's backup loop, in process.
	cluster := etcdtest.Start(t, etcdtest.Config{Members: 1})
	member, err := cluster.MemberConn(0, etcdclient.Options{CallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kvConn, err := cluster.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kvConn.Close() })
	kv := pb.NewKVClient(kvConn)
	write := func(n int) int64 {
		t.Helper()
		var rev int64
		for i := range n {
			resp, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k/%03d", i), Value: fmt.Appendf(nil, "v-%d", time.Now().UnixNano())})
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	fullRev := write(30)
	kube, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	flags := backupstore.Flags{Provider: "Local", Container: "backups", Prefix: name, LocalRoot: t.TempDir(), Etcd: ns + "/" + name, EtcdUID: string(etcd.UID)}
	runner, err := backup.NewRunner(backup.Config{
		Store: flags, SpoolDir: t.TempDir(), FullSchedule: "0 0 1 1 *", // full snapshots and deltas only on demand
		FullLease: fullLease, DeltaLease: deltaLease, Namespace: ns, Tick: 100 * time.Millisecond,
	}, member, kube.CoordinationV1(), backup.NewMetrics(prometheus.NewRegistry()), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); runner.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })
	store, err := flags.Open()
	if err != nil {
		t.Fatal(err)
	}
	inStore := func(lease string, kind snapshot.Kind, atLeast int64) string {
		t.Helper()
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := memberlease.ParseSnapshotLease(l.Spec.HolderIdentity, l.Spec.RenewTime, l.Annotations)
		s, err := snapshot.Parse(rec.Key)
		if err != nil || s.Kind != kind || s.EndRevision < atLeast || rec.Revision != s.EndRevision {
			t.Fatalf("Lease %s records %+v (%v): want a %s snapshot up to revision %d or later", lease, rec, err, kind, atLeast)
		}
		if _, err := store.Stat(ctx, s.Key()); err != nil {
			t.Fatalf("%s is not in the store: %v", s.Key(), err)
		}
		return s.Key()
	}

	done := waitState(full, druidv1alpha1.TaskStateSucceeded)
	key := inStore(fullLease, snapshot.KindFull, fullRev)
	if op := done.Status.LastOperation; op == nil || op.State != opstask.OpCompleted || !strings.Contains(op.Description, key) {
		t.Errorf("lastOperation %+v, want Completed naming %s", op, key)
	}

	deltaRev := write(20)
	delta := newTask("delta-1", name, druidv1alpha1.OnDemandSnapshotTypeDelta, nil)
	done = waitState(delta, druidv1alpha1.TaskStateSucceeded)
	key = inStore(deltaLease, snapshot.KindDelta, deltaRev)
	if op := done.Status.LastOperation; op == nil || !strings.Contains(op.Description, key) {
		t.Errorf("lastOperation %+v, want it to name %s", op, key)
	}

	// With no agent to answer, a task fails at its timeout, and says why.
	stop()
	wg.Wait()
	late := &druidv1alpha1.EtcdOpsTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: druidv1alpha1.EtcdOpsTaskSpec{EtcdName: ptr.To(name), Config: druidv1alpha1.EtcdOpsTaskConfig{
			OnDemandSnapshot: &druidv1alpha1.OnDemandSnapshotConfig{Type: druidv1alpha1.OnDemandSnapshotTypeDelta, TimeoutSecondsDelta: ptr.To(int32(2))}}},
	}
	if err := c.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	failed := waitState(late, druidv1alpha1.TaskStateFailed)
	hasError(failed, opstask.ErrTimeout)

	// No backup store: Rejected, and deleted once its TTL is over.
	bare := framework.NewEtcd(ns, "etcd-bare", 1, framework.EtcdImage("3.6.8"))
	if err := c.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	noStore := newTask("no-store", "etcd-bare", druidv1alpha1.OnDemandSnapshotTypeFull, ptr.To(int32(3)))
	rejected := waitState(noStore, druidv1alpha1.TaskStateRejected)
	hasError(rejected, opstask.ErrNoBackupStore)
	framework.Eventually(t, timeout, "the rejected task deleted after its TTL", func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(noStore), &druidv1alpha1.EtcdOpsTask{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
