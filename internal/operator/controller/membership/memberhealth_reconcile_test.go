package membership

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// stuckCluster is a 3-member Etcd in a fake apiserver whose member etcd-main-2 has been NotReady
// for an hour, its pod older than the grace; heard are the members serving a linearizable read.
func stuckCluster(t *testing.T, now time.Time, notReady ...string) (*Reconciler, *clusterView, *etcdclient.ClusterStatus, *record.FakeRecorder, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := druidv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "ns", UID: "etcd-uid"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3}}
	etcd.Status.ClusterID = "c1"
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(etcd), Namespace: "ns", UID: "sts-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "druid.gardener.cloud/v1alpha1", Kind: "Etcd", Name: etcd.Name, UID: etcd.UID, Controller: ptr.To(true)}}},
		Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: resources.SelectorLabels(etcd)}},
		Status: appsv1.StatefulSetStatus{UpdateRevision: "rev-1"}}
	objs := []client.Object{etcd, sts}
	cs := &etcdclient.ClusterStatus{}
	for i := range 3 {
		name := fmt.Sprintf("etcd-main-%d", i)
		labels := resources.SelectorLabels(etcd)
		labels[appsv1.StatefulSetRevisionLabel] = "rev-1"
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: labels,
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.0.0.%d", i+1)}}
		objs = append(objs, pod)
		m := druidv1alpha1.EtcdMemberStatus{Name: name, Status: druidv1alpha1.EtcdMemberStatusReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
		for _, n := range notReady {
			if n == name {
				m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, "ContainerNotReady"
			}
		}
		etcd.Status.Members = append(etcd.Status.Members, m)
		id := uint64(0xa + i)
		cs.Members = append(cs.Members, etcdclient.MemberStatus{Name: name, ID: id, LeaderID: 0xa, Reachable: true})
		cs.MemberList = append(cs.MemberList, etcdclient.Member{ID: id, Name: name, ClientURLs: []string{"x"}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&druidv1alpha1.Etcd{}).Build()
	events := record.NewFakeRecorder(100)
	r := NewReconciler(Config{Client: c, Reader: c, Recorder: events, Members: &readsOnly{}})
	r.now = func() time.Time { return now }
	fresh, err := r.read(context.Background(), c, client.ObjectKeyFromObject(etcd))
	if err != nil || fresh == nil {
		t.Fatalf("read: %v", err)
	}
	return r, fresh, cs, events, c
}

func podGone(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// restartStuck deletes the pod of a stuck member the leader does not hear once it has asked
// which voters the leader hears, records an Event and the MemberRestart condition; it deletes
// none when the only stuck member is heard and the leader would hear no quorum without it.
func TestRestartStuck(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	ctx := context.Background()
	restartCondition := func(c client.Client) *druidv1alpha1.Condition {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "etcd-main"}, got); err != nil {
			t.Fatal(err)
		}
		return druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeMemberRestart)
	}

	t.Run("unheard stuck member restarted", func(t *testing.T) {
		r, view, cs, events, c := stuckCluster(t, now, "etcd-main-2")
		pool := &readsOnly{serving: []string{"etcd-main-1"}}
		r.cfg.Members = pool
		if err := r.restartStuck(ctx, view, memberaccess.Targets(view.etcd, view.pods), conductortls.ClientMaterial{}, cs); err != nil {
			t.Fatal(err)
		}
		if len(pool.asked) != 1 {
			t.Errorf("asked the members %d times which the leader hears, want once before deleting", len(pool.asked))
		}
		if !podGone(t, c, "etcd-main-2") || podGone(t, c, "etcd-main-1") || podGone(t, c, "etcd-main-0") {
			t.Fatalf("want etcd-main-2's pod deleted and only it")
		}
		cond := restartCondition(c)
		if cond == nil || cond.Status != druidv1alpha1.ConditionTrue || cond.Reason != memberhealth.RuleRestartNonVoting.CamelCase() ||
			!strings.Contains(cond.Message, "the leader hears 2 of 3 voters (a quorum is 2)") {
			t.Fatalf("MemberRestart = %+v", cond)
		}
		if e := <-events.Events; !strings.Contains(e, "Normal "+memberhealth.RuleRestartNonVoting.CamelCase()+" deleting pod etcd-main-2") {
			t.Errorf("Event %q", e)
		}
	})
	t.Run("heard stuck member kept: no quorum without it", func(t *testing.T) {
		r, view, cs, events, c := stuckCluster(t, now, "etcd-main-1")
		r.cfg.Members = &readsOnly{serving: []string{"etcd-main-1"}} // etcd-main-2 is cut off from the leader
		for range 2 {
			if err := r.restartStuck(ctx, view, memberaccess.Targets(view.etcd, view.pods), conductortls.ClientMaterial{}, cs); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if podGone(t, c, fmt.Sprintf("etcd-main-%d", i)) {
				t.Fatalf("etcd-main-%d's pod deleted although deleting etcd-main-1's would leave the leader hearing 1 of 3", i)
			}
		}
		cond := restartCondition(c)
		if cond == nil || cond.Reason != memberhealth.RuleRestartUnsafe.CamelCase() || cond.Status != druidv1alpha1.ConditionTrue {
			t.Fatalf("MemberRestart = %+v", cond)
		}
		if n := len(events.Events); n != 1 {
			t.Errorf("%d Events for one reason not to restart, want 1", n)
		}
	})
	t.Run("nothing stuck: no condition added", func(t *testing.T) {
		r, view, cs, events, c := stuckCluster(t, now)
		if err := r.restartStuck(ctx, view, memberaccess.Targets(view.etcd, view.pods), conductortls.ClientMaterial{}, cs); err != nil {
			t.Fatal(err)
		}
		if cond := restartCondition(c); cond != nil || len(events.Events) != 0 {
			t.Fatalf("MemberRestart %+v and %d Events on a healthy cluster", cond, len(events.Events))
		}
	})
}
