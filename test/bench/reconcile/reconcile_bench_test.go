package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/ondelete"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	etcdName  = "etcd-main"
	namespace = "default"
	oldRev    = etcdName + "-old"
	newRev    = etcdName + "-new"
)

// portMapper points the controller's member targets (pod IP and the Etcd's one client port) at
// the etcdtest members, which share no port. Everything else goes to the real pool unchanged.
type portMapper struct {
	memberaccess.Pool // what the benchmark's controller does not ask: a call panics
	pool              *etcdclient.Pool
	address           map[string]string // member name → ip:port it listens on
}

func (m portMapper) Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	return m.pool.Query(ctx, cluster, creds, m.mapped(targets))
}

func (m portMapper) MoveLeader(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target, from string, to uint64) error {
	return m.pool.MoveLeader(ctx, cluster, creds, m.mapped(targets), from, to)
}

func (m portMapper) LinearizableReads(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target, names []string) ([]string, error) {
	return m.pool.LinearizableReads(ctx, cluster, creds, m.mapped(targets), names)
}

func (m portMapper) LinearizableReadsOf(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) ([]string, error) {
	return m.pool.LinearizableReadsOf(ctx, cluster, creds, m.mapped(targets))
}

func (m portMapper) mapped(targets []etcdclient.Target) []etcdclient.Target {
	out := make([]etcdclient.Target, len(targets))
	for i, t := range targets {
		out[i] = t
		if a, ok := m.address[t.Name]; ok {
			out[i].Address = a
		}
	}
	return out
}

func (m portMapper) Forget(cluster string) { m.pool.Forget(cluster) }

// BenchmarkReconcileSteadyState runs the reconcile that has to choose among participating pods
// (the one that asks the members who leads) over and over. Deletions and status writes are dry
// runs, so every iteration sees the same cluster. It fails if a warm reconcile needed a TLS
// handshake.
func BenchmarkReconcileSteadyState(b *testing.B) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("etcd binary required under CI=true: %v", err)
		}
		b.Skipf("etcd binary not built: %v", err)
	}
	members := etcdtest.Start(b, etcdtest.Config{EtcdName: etcdName, Namespace: namespace})
	env := localcluster.StartForTest(b, localcluster.Options{NoControllerManager: true, CRDs: true})
	ctx := context.Background()
	sts := createMembers(ctx, b, env.Client(), members)

	pool := etcdclient.NewPool(etcdclient.Options{})
	b.Cleanup(pool.Close)
	mapper := portMapper{pool: pool, address: map[string]string{}}
	for _, m := range members.Members {
		mapper.address[m.Name] = m.Target().Address
	}
	metrics, err := ondelete.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	r := ondelete.NewReconciler(ondelete.Config{
		Client:     client.NewDryRunClient(env.Client()),
		Reader:     env.Client(),
		Recorder:   &record.FakeRecorder{}, // no channel: events are dropped
		Members:    mapper,
		Metrics:    metrics,
		RoleSource: roles.SourcePolicyAuto,
		Access: memberaccess.New(memberaccess.Config{Reader: env.Client(),
			DefaultClientTLS: func() (conductortls.ClientMaterial, error) { return members.Client, nil }}),
	})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: sts.Name}}

	reconcile := func() {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			b.Fatalf("reconcile: %v", err)
		}
		if res.RequeueAfter == 0 {
			b.Fatalf("reconcile did not act on the outdated pods: %+v", res)
		}
	}
	reconcile() // warms the pool
	warm := pool.Handshakes()
	if warm == 0 {
		b.Fatal("the first reconcile asked no member: the benchmark would measure nothing")
	}
	for b.Loop() {
		reconcile()
	}
	b.StopTimer()
	// Every reconcile must have chosen a participating follower, which needs the members' roles.
	var counter dto.Metric
	must(b, metrics.Deletions.WithLabelValues(namespace, sts.Name, string(rollout.RuleParticipatingFollower)).Write(&counter))
	if chosen := counter.GetCounter().GetValue(); int(chosen) != b.N+1 {
		b.Fatalf("%v of %d reconciles chose a participating follower", chosen, b.N+1)
	}
	handshakes := pool.Handshakes() - warm
	b.ReportMetric(float64(handshakes)/float64(b.N), "handshakes/op")
	if handshakes != 0 {
		b.Fatalf("%d TLS handshakes in %d warm reconciles, want 0", handshakes, b.N)
	}
}

// createMembers makes the objects the controller reads: an Etcd without its own client TLS
// (the operator-wide key pair is used), an OnDelete StatefulSet whose update revision is new, and
// one participating pod per etcdtest member, all at the old revision.
func createMembers(ctx context.Context, b *testing.B, c client.Client, members *etcdtest.Cluster) *appsv1.StatefulSet {
	b.Helper()
	etcd := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: etcdName},
		Spec:       druidv1alpha1.EtcdSpec{Replicas: int32(len(members.Members)), Labels: map[string]string{"role": "bench"}},
	}
	must(b, c.Create(ctx, etcd))
	labels := resources.SelectorLabels(etcd)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: etcdName, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: etcd.Name, UID: etcd.UID, Controller: ptr.To(true),
		}}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To(int32(len(members.Members))),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:    etcdName + "-peer",
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "quay.io/coreos/etcd:v3.7.3"}}},
			},
		},
	}
	must(b, c.Create(ctx, sts))
	sts.Status = appsv1.StatefulSetStatus{Replicas: int32(len(members.Members)), UpdateRevision: newRev, CurrentRevision: oldRev, ObservedGeneration: sts.Generation}
	must(b, c.Status().Update(ctx, sts))

	for i, m := range members.Members {
		podLabels := map[string]string{appsv1.StatefulSetRevisionLabel: oldRev, appsv1.PodIndexLabel: fmt.Sprint(i)}
		for k, v := range labels {
			podLabels[k] = v
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: m.Name, Labels: podLabels, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true),
			}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: "quay.io/coreos/etcd:v3.6.8"}}},
		}
		must(b, c.Create(ctx, pod))
		host, _, err := net.SplitHostPort(m.Target().Address)
		must(b, err)
		now := metav1.Now()
		pod.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      host,
			PodIPs:     []corev1.PodIP{{IP: host}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: resources.EtcdContainerName, Ready: true, Image: "quay.io/coreos/etcd:v3.6.8",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
		}
		must(b, c.Status().Update(ctx, pod))
	}
	return sts
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
