package copytask

import (
	"context"
	"strings"
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
	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/copytask"
	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
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
		Backoff: backupstore.Backoff{Attempts: 2, Initial: time.Millisecond, Max: time.Millisecond}})
	return &rig{t: t, c: c, r: r, events: events, hostPath: hostPath}
}

func localSpec(container, secret string) druidv1alpha1.StoreSpec {
	s := druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To(container), Prefix: "etcd"}
	if secret != "" {
		s.SecretRef = &corev1.SecretReference{Name: secret}
	}
	return s
}

func (g *rig) store(container string) backupstore.Store {
	g.t.Helper()
	s, err := backupstore.NewLocal(g.hostPath, container, "etcd")
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

func (g *rig) reconcile(task *druidv1alpha1.EtcdCopyBackupsTask) (ctrl.Result, *druidv1alpha1.EtcdCopyBackupsTask) {
	g.t.Helper()
	res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
	if err != nil {
		g.t.Fatalf("Reconcile: %v", err)
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
