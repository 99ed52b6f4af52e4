package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestScheduledDefragmentationShrinksEveryMemberLeaderLast runs the defragmentation controller
// against a real kube-apiserver and three real etcd members with mTLS. The member pods are written
// as a kubelet would (IP, ready etcd container), pointing at the etcd processes. After keys are
// written, deleted and compacted, a due run must defragment every member, followers first and the
// leader last, and each member's database must shrink.
func TestScheduledDefragmentationShrinksEveryMemberLeaderLast(t *testing.T) {
	env := sharedControlPlane(t)
	ctx := context.Background()
	ns := testNamespace("defrag")
	etcd, cluster := startRealMembers(t, env, ns, func(e *druidv1alpha1.Etcd) {
		e.Spec.Etcd.DefragmentationSchedule = ptr.To("*/5 * * * *")
	})
	makeGarbage(t, cluster)
	pool := etcdclient.NewPool(etcdclient.Options{})
	t.Cleanup(pool.Close)
	sizes := func() map[string]etcdclient.MemberStatus {
		cs, err := pool.Query(ctx, "sizes", cluster.Client, cluster.Targets())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]etcdclient.MemberStatus{}
		for _, m := range cs.Members {
			out[m.Name] = m
		}
		return out
	}
	before := sizes()

	reg := prometheus.NewRegistry()
	metrics, err := defrag.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	recorder := eventRecorder(t, env)
	r := defrag.NewReconciler(defrag.Config{
		Client: env.Client(), Reader: env.Client(), Recorder: recorder, Members: pool, Metrics: metrics,
		WaitInterval: time.Second, Now: func() time.Time { return clock },
	})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Minute {
		t.Fatalf("before the schedule is due: requeue after %s, want the time to the next */5 minute", res.RequeueAfter)
	}
	clock = clock.Add(res.RequeueAfter)
	for step := 0; step < 10; step++ {
		res, err = r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if counted(t, metrics.Runs, "result", "completed") == 1 {
			break
		}
		clock = clock.Add(res.RequeueAfter)
	}
	if got := counted(t, metrics.Runs, "result", "completed"); got != 1 {
		t.Fatalf("runs completed = %v after the schedule came due", got)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Minute {
		t.Errorf("after the run: requeue after %s, want the next */5 minute", res.RequeueAfter)
	}

	// Events: one Defragmented per member, the leader's last.
	var order []string
	framework.Eventually(t, timeout, "three Defragmented Events", func(ctx context.Context) (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client().List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		order = order[:0]
		var msgs []string
		for _, e := range events.Items {
			if e.Reason == defrag.EventDefragmented {
				msgs = append(msgs, e.Message)
			}
		}
		if len(msgs) != 3 {
			return false, fmt.Sprintf("Defragmented events: %q", msgs)
		}
		order = append(order, msgs...)
		return true, ""
	})
	after := sizes()
	leader := ""
	for n, m := range after {
		if m.IsLeader() {
			leader = n
		}
	}
	leaderEvent := ""
	for _, m := range order {
		if strings.Contains(m, "[defrag/leader]") {
			leaderEvent = m
		}
	}
	if !strings.Contains(leaderEvent, leader+":") {
		t.Errorf("leader %s was not defragmented by the leader rule; events %q", leader, order)
	}
	for n, b := range before {
		a := after[n]
		t.Logf("member %s: db %d -> %d bytes (in use %d)", n, b.DBSize, a.DBSize, a.DBSizeInUse)
		if a.DBSize*2 > b.DBSize {
			t.Errorf("member %s: db %d -> %d bytes, want it at least halved", n, b.DBSize, a.DBSize)
		}
	}
	if got := counted(t, metrics.Defragmentations, "result", "succeeded"); got != 3 {
		t.Errorf("defragmentations succeeded = %v, want 3", got)
	}
}

// startRealMembers starts etcd members with mTLS (three, unless mutate changes spec.replicas),
// creates the Etcd (mutated by mutate) with
// Secrets the members accept, and writes its StatefulSet and pods pointing at the members.
func startRealMembers(t *testing.T, env *localcluster.Cluster, ns string, mutate func(e *druidv1alpha1.Etcd)) (*druidv1alpha1.Etcd, *etcdtest.Cluster) {
	t.Helper()
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("etcd binary not built: %v", err)
	}
	const name = "etcd-main"
	ctx := context.Background()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	ca, err := testpki.NewCA(ns)
	if err != nil {
		t.Fatal(err)
	}
	// mutate may resize the Etcd; as many members start as it asks for.
	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage(etcdtest.DefaultVersion))
	mutate(etcd)
	cluster := etcdtest.Start(t, etcdtest.Config{Members: int(etcd.Spec.Replicas), CA: ca, EtcdName: name, Namespace: ns, SameClientPort: true})

	// The Etcd names a CA Secret and a client key pair the members accept; the server and peer
	// Secrets only have to be valid for the reconciler's checks.
	names := testpki.DefaultSecretNames(name)
	secrets := []*corev1.Secret{ca.Secret(ns, names.CA)}
	for _, n := range []string{names.Client, names.Server, names.Peer} {
		pair, err := ca.ClientCert(n)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, testpki.TLSSecret(ns, n, ca, pair))
	}
	for _, s := range secrets {
		if err := env.Client().Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	address := cluster.Members[0].Target().Address
	var clientPort int32
	if _, err := fmt.Sscanf(address[strings.LastIndex(address, ":")+1:], "%d", &clientPort); err != nil {
		t.Fatal(err)
	}
	etcd.Spec.Etcd.ClientPort = &clientPort
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	createMemberPods(t, env, etcd, cluster)
	return etcd, cluster
}

// makeGarbage writes 8 MiB, deletes and compacts it: every member's database then holds about
// 10 MB of which little is in use.
func makeGarbage(t *testing.T, cluster *etcdtest.Cluster) {
	t.Helper()
	ctx := context.Background()
	cc, err := cluster.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(cc)
	value := make([]byte, 8<<10)
	for i := 0; i < 1024; i++ {
		if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "garbage/%04d", i), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	del, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("garbage/"), RangeEnd: []byte("garbage0")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: del.GetHeader().GetRevision(), Physical: true}); err != nil {
		t.Fatal(err)
	}
}

// createMemberPods writes the StatefulSet and its pods as the StatefulSet controller and a
// kubelet would: every pod at the update revision, its etcd container ready, its IP the address
// of the matching etcd process.
func createMemberPods(t *testing.T, env *localcluster.Cluster, etcd *druidv1alpha1.Etcd, cluster *etcdtest.Cluster) {
	t.Helper()
	ctx := context.Background()
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	// Controlled by the Etcd, as the reconciler would have made it: it adopts nothing.
	if err := controllerutil.SetControllerReference(etcd, sts, env.Client().Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client().Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	n := int32(len(cluster.Members))
	sts.Status = appsv1.StatefulSetStatus{Replicas: n, ReadyReplicas: n, CurrentRevision: "rev-1", UpdateRevision: "rev-1"}
	if err := env.Client().Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	for i, m := range cluster.Members {
		labels := resources.SelectorLabels(etcd)
		labels[appsv1.StatefulSetRevisionLabel] = "rev-1"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: etcd.Namespace, Name: resources.PodName(etcd, i), Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "etcd"}}},
		}
		if err := controllerutil.SetControllerReference(sts, pod, env.Client().Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := env.Client().Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: m.IP,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		}
		if err := env.Client().Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}

// eventRecorder records Events to the apiserver, as the manager's recorder does.
func eventRecorder(t *testing.T, env *localcluster.Cluster) record.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(env.Client().Scheme(), corev1.EventSource{Component: "etcd-conductor"})
}
