package copytask

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/copytask"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupcopy"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

const ns = "shoot"

var created = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// rig is the controller on a fake apiserver with Local stores below one host directory, named by
// the Secret "local".
type rig struct {
	t        *testing.T
	c        client.Client
	r        *Reconciler
	events   *record.FakeRecorder
	hostPath string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := druidv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hostPath := t.TempDir()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"}, Data: map[string][]byte{backupstore.KeyHostPath: []byte(hostPath)}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).WithStatusSubresource(&druidv1alpha1.EtcdCopyBackupsTask{}).Build()
	events := record.NewFakeRecorder(20)
	r := NewReconciler(Config{Client: c, Recorder: events, Now: func() time.Time { return created.Add(time.Minute) },
		Backoff: backupstore.Backoff{Attempts: 2, Initial: time.Millisecond, Max: time.Millisecond},
		Reach:   backupstore.Reach{LocalRoots: []string{hostPath}}, CopyPoll: time.Millisecond})
	return &rig{t: t, c: c, r: r, events: events, hostPath: hostPath}
}

// localSpec names the Local store <ns>/etcd/<container>: a task reaches its namespace's
// directories only.
func localSpec(container, secret string) druidv1alpha1.StoreSpec {
	s := druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To(ns + "/etcd/" + container), Prefix: "etcd"}
	if secret != "" {
		s.SecretRef = &corev1.SecretReference{Name: secret}
	}
	return s
}

func (g *rig) store(container string) backupstore.Store {
	g.t.Helper()
	s, err := backupstore.NewLocal(g.hostPath, ns+"/etcd/"+container, "etcd")
	if err != nil {
		g.t.Fatal(err)
	}
	return s
}

func (g *rig) put(s backupstore.Store, key, content string) {
	g.t.Helper()
	if _, err := s.Put(context.Background(), key, strings.NewReader(content), int64(len(content)), backupstore.SHA256Hex([]byte(content))); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rig) task(name string, spec druidv1alpha1.EtcdCopyBackupsTaskSpec) *druidv1alpha1.EtcdCopyBackupsTask {
	g.t.Helper()
	task := &druidv1alpha1.EtcdCopyBackupsTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1,
		CreationTimestamp: metav1.NewTime(created)}, Spec: spec}
	if err := g.c.Create(context.Background(), task); err != nil {
		g.t.Fatal(err)
	}
	return task
}

// reconcile reconciles the task until no copy runs for it (a copy runs off the reconcile, which
// requeues to take its outcome).
func (g *rig) reconcile(task *druidv1alpha1.EtcdCopyBackupsTask) (ctrl.Result, *druidv1alpha1.EtcdCopyBackupsTask) {
	g.t.Helper()
	var res ctrl.Result
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		res, err = g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		if err != nil {
			g.t.Fatalf("Reconcile: %v", err)
		}
		if g.r.copies.job(client.ObjectKeyFromObject(task), task.UID, task.Generation) == nil {
			break
		}
		if time.Now().After(deadline) {
			g.t.Fatal("the copy did not finish in 10s")
		}
		time.Sleep(time.Millisecond)
	}
	got := &druidv1alpha1.EtcdCopyBackupsTask{}
	if err := g.c.Get(context.Background(), client.ObjectKeyFromObject(task), got); err != nil {
		g.t.Fatal(err)
	}
	return res, got
}

func (g *rig) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-g.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestReconcile(t *testing.T) {
	full := snapshot.Full(10, created.Add(-time.Hour))
	delta := snapshot.Delta(11, 20, created.Add(-time.Hour))

	t.Run("copies, records Succeeded with the numbers, and then leaves the task alone", func(t *testing.T) {
		g := newRig(t)
		src := g.store("src")
		g.put(src, full.Key(), "full")
		g.put(src, delta.Key(), "delta")
		g.put(src, snapshot.OwnerKey, `{"etcd":"shoot/old"}`)
		task := g.task("copy", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst", "local")})
		res, got := g.reconcile(task)
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue || !strings.Contains(c.Message, "2 objects copied") || got.Status.LastError != nil ||
			ptr.Deref(got.Status.ObservedGeneration, 0) != 1 || res.RequeueAfter != 0 {
			t.Fatalf("status %+v, result %+v", got.Status, res)
		}
		if _, err := g.store("dst").Stat(context.Background(), delta.Key()); err != nil {
			t.Errorf("the delta is not in the target: %v", err)
		}
		if events := g.drainEvents(); len(events) != 2 || !strings.Contains(events[0], "CopytaskCopy") || !strings.Contains(events[1], "CopytaskCopied") {
			t.Errorf("events %q, want the copy and its success", events)
		}
		g.put(src, snapshot.Delta(21, 30, created).Key(), "later")
		if _, again := g.reconcile(got); len(again.Status.Conditions) != 1 || len(g.drainEvents()) != 0 {
			t.Errorf("a finished task was acted on again: %+v", again.Status)
		}
	})

	t.Run("a missing Secret fails the task, nothing written", func(t *testing.T) {
		g := newRig(t)
		task := g.task("nosecret", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "gone"), TargetStore: localSpec("dst", "local")})
		_, got := g.reconcile(task)
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		want := "spec.sourceStore: Secret shoot/gone named in secretRef does not exist; nothing was copied"
		if c == nil || c.Message != want || ptr.Deref(got.Status.LastError, "") != want || c.Reason != copytask.RuleFailSourceStore.CamelCase() {
			t.Fatalf("status %+v, want Failed: %s", got.Status, want)
		}
		if objs, err := g.store("dst").List(context.Background(), ""); err != nil || len(objs) != 0 {
			t.Errorf("target holds %v (%v)", objs, err)
		}
	})

	t.Run("the same store on both sides fails the task", func(t *testing.T) {
		g := newRig(t)
		task := g.task("same", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("src", "local")})
		_, got := g.reconcile(task)
		if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed); c == nil || !strings.Contains(c.Message, "same store") {
			t.Fatalf("status %+v", got.Status)
		}
	})

	t.Run("waits for a full snapshot taken since, with one Event, then copies", func(t *testing.T) {
		g := newRig(t)
		src := g.store("src")
		g.put(src, full.Key(), "full")
		task := g.task("wait", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst", "local"),
			WaitForFinalSnapshot: &druidv1alpha1.WaitForFinalSnapshotSpec{Enabled: true, Timeout: &metav1.Duration{Duration: time.Hour}}})
		res, got := g.reconcile(task)
		if res.RequeueAfter != copytask.Poll || len(got.Status.Conditions) != 0 || ptr.Deref(got.Status.ObservedGeneration, 0) != 1 {
			t.Fatalf("result %+v, status %+v; want a wait", res, got.Status)
		}
		g.reconcile(got)
		if events := g.drainEvents(); len(events) != 1 || !strings.Contains(events[0], "CopytaskWaitFinalSnapshot") {
			t.Errorf("events %q, want one wait Event", events)
		}
		g.put(src, snapshot.Full(12, created).Key(), "final")
		_, got = g.reconcile(got)
		if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded); c == nil {
			t.Fatalf("status %+v, want Succeeded", got.Status)
		}
	})
}

// blockingStore holds every Get until release is closed, counting them.
type blockingStore struct {
	backupstore.Store
	release chan struct{}
	gets    *atomic.Int32
}

func (b blockingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.gets.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Store.Get(ctx, key)
}

// TestCopyRunsOffTheReconcile: the reconcile that starts a copy returns at once and requeues; the
// copy runs on, at most Copies at once; a later reconcile takes its outcome.
func TestCopyRunsOffTheReconcile(t *testing.T) {
	g := newRig(t)
	release, gets := make(chan struct{}), &atomic.Int32{}
	g.r.cfg.Copies, g.r.copies = 1, newCopies(1)
	g.r.cfg.OpenStore = func(cfg backupstore.Config) (backupstore.Store, error) {
		s, err := backupstore.New(cfg)
		// A Local store is opened within its Etcd's directory: the container is what lies below it.
		if err != nil || cfg.Container != "src" {
			return s, err
		}
		return blockingStore{Store: s, release: release, gets: gets}, nil
	}
	full := snapshot.Full(10, created.Add(-time.Hour))
	g.put(g.store("src"), full.Key(), "full")
	first := g.task("first", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst", "local")})
	second := g.task("second", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst2", "local")})
	once := func(task *druidv1alpha1.EtcdCopyBackupsTask) (ctrl.Result, *druidv1alpha1.EtcdCopyBackupsTask) {
		t.Helper()
		start := time.Now()
		res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("the reconcile took %s: it waited for the copy", took)
		}
		got := &druidv1alpha1.EtcdCopyBackupsTask{}
		if err := g.c.Get(context.Background(), client.ObjectKeyFromObject(task), got); err != nil {
			t.Fatal(err)
		}
		return res, got
	}
	res, got := once(first)
	if res.RequeueAfter != g.r.cfg.CopyPoll || len(got.Status.Conditions) != 0 {
		t.Fatalf("result %+v, status %+v: want a requeue while the copy runs", res, got.Status)
	}
	for deadline := time.Now().Add(5 * time.Second); gets.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the copy never read its source")
		}
	}
	// Again while it runs: no second copy of the task, and the other task waits for the slot.
	if res, got = once(first); res.RequeueAfter != g.r.cfg.CopyPoll || len(got.Status.Conditions) != 0 {
		t.Fatalf("result %+v, status %+v: want a requeue while the copy runs", res, got.Status)
	}
	if res, got = once(second); res.RequeueAfter != g.r.cfg.CopyPoll || len(got.Status.Conditions) != 0 ||
		g.r.copies.job(client.ObjectKeyFromObject(second), second.UID, second.Generation) != nil {
		t.Fatalf("result %+v, status %+v: the second task should wait for the one slot", res, got.Status)
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("%d reads of the source, want the one copy's", n)
	}
	close(release)
	_, got = g.reconcile(first)
	if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded); c == nil || c.Status != druidv1alpha1.ConditionTrue {
		t.Fatalf("status %+v, want Succeeded once the copy finished", got.Status)
	}
	_, got = g.reconcile(second)
	if c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded); c == nil {
		t.Fatalf("status %+v, want the second task Succeeded once the slot was free", got.Status)
	}
}

// TestCopyRefusals: a task whose stores lie outside what the operator allows, or whose source
// holds an object larger than the limit, Fails with a status that says so, and nothing is
// written.
func TestCopyRefusals(t *testing.T) {
	t.Run("an object larger than the limit", func(t *testing.T) {
		g := newRig(t)
		g.r.cfg.Limits = backupcopy.Limits{MaxObjectBytes: 1 << 20}
		src := g.store("src")
		huge := snapshot.Full(10, created.Add(-time.Hour))
		g.put(src, huge.Key(), "x")
		if err := os.Truncate(filepath.Join(g.hostPath, ns, "etcd", "src", "etcd", filepath.FromSlash(huge.Key())), 64<<20); err != nil {
			t.Fatal(err)
		}
		_, got := g.reconcile(g.task("huge", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst", "local")}))
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		if c == nil || !strings.Contains(c.Message, "is 67108864 bytes, more than the 1048576 bytes a copy takes") {
			t.Fatalf("status %+v, want Failed naming the size and the limit", got.Status)
		}
	})
	t.Run("a Local store in another namespace's directory", func(t *testing.T) {
		g := newRig(t)
		spec := localSpec("dst", "local")
		spec.Container = ptr.To("other/etcd-main/backups")
		_, got := g.reconcile(g.task("foreign", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: spec}))
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		if c == nil || !strings.Contains(c.Message, `spec.targetStore: container "other/etcd-main/backups"`) {
			t.Fatalf("status %+v, want Failed naming the container", got.Status)
		}
		if _, err := os.Stat(filepath.Join(g.hostPath, "other")); err == nil {
			t.Error("the other namespace's directory was created")
		}
	})
	t.Run("a Local root the operator does not allow", func(t *testing.T) {
		g := newRig(t)
		other := t.TempDir()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"}, Data: map[string][]byte{backupstore.KeyHostPath: []byte(other)}}
		if err := g.c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		_, got := g.reconcile(g.task("root", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: localSpec("src", "local"), TargetStore: localSpec("dst", "elsewhere")}))
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		if c == nil || !strings.Contains(c.Message, "is not one of the host directories the operator allows") {
			t.Fatalf("status %+v, want Failed naming the root", got.Status)
		}
	})
	t.Run("an S3 endpoint over http", func(t *testing.T) {
		g := newRig(t)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: map[string][]byte{
			backupstore.KeyAccessKeyID: []byte("id"), backupstore.KeySecretAccessKey: []byte("key"), backupstore.KeyEndpoint: []byte("http://198.51.100.7:9000")}}
		if err := g.c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		s3 := druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket"), SecretRef: &corev1.SecretReference{Name: "s3"}}
		_, got := g.reconcile(g.task("http", druidv1alpha1.EtcdCopyBackupsTaskSpec{SourceStore: s3, TargetStore: localSpec("dst", "local")}))
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		if c == nil || !strings.Contains(c.Message, "http://198.51.100.7:9000 is plain http") {
			t.Fatalf("status %+v, want Failed naming the endpoint", got.Status)
		}
	})
}
