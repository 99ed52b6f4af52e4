package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	membershipcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestClusterIDFromLeasesWithoutAPathToTheMembers: a real 3-member cluster with mTLS behind an
// Etcd on a real apiserver, each member's sidecar (agent.Agent) renewing its Lease, but no
// network path from the operator to the members (the pods' addresses answer nothing). With one
// of three Leases renewed the membership controller records no cluster ID; once a second
// member's sidecar renews, a majority of spec.replicas' Leases report the cluster's ID and it is
// recorded (status.clusterID, so the ConfigMap turns "existing" and a member without data waits
// for a leader instead of bootstrapping), with an Event naming the Leases.
func TestClusterIDFromLeasesWithoutAPathToTheMembers(t *testing.T) {
	env := sharedControlPlane(t)
	etcd, cluster := startRealMembers(t, env, testNamespace("lease-cluster-id"), func(*druidv1alpha1.Etcd) {})
	ctx := context.Background()
	c := env.Client()
	pool := etcdclient.NewPool(etcdclient.Options{DialTimeout: 500 * time.Millisecond, CallTimeout: 500 * time.Millisecond})
	t.Cleanup(pool.Close)
	cs, err := pool.Query(ctx, "check", cluster.Client, cluster.Targets())
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatUint(cs.Members[0].ClusterID, 16)

	// No path from the operator: every pod's address is one nothing listens on.
	for i := range cluster.Members {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: etcd.Namespace, Name: resources.PodName(etcd, i)}, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.PodIP = fmt.Sprintf("127.0.0.%d", 250+i)
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cluster.Members {
		lease := resources.MemberLease(etcd, resources.PodName(etcd, i))
		if err := controllerutil.SetControllerReference(etcd, lease, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	files, err := testpki.WriteFiles(t.TempDir(), cluster.CA, testpki.KeyPair{CertPEM: cluster.Client.Cert, KeyPEM: cluster.Client.Key})
	if err != nil {
		t.Fatal(err)
	}
	sidecar := func(i int) {
		t.Helper()
		m := cluster.Members[i]
		a, err := agent.New(agent.Config{Endpoint: m.ClientURL, ServerName: m.ServerName, ClientFiles: agent.ClientFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key},
			Lease: m.Name, Namespace: etcd.Namespace, Interval: 200 * time.Millisecond, CallTimeout: time.Second}, env.Clientset().CoordinationV1(), testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		agentCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(agentCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	rec := membershipcontroller.NewReconciler(membershipcontroller.Config{Client: c, Reader: c, Recorder: eventRecorder(t, env), Members: pool})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}
	get := func() *druidv1alpha1.Etcd {
		t.Helper()
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	sidecar(0)
	framework.Eventually(t, timeout, "etcd-main-0's sidecar renewing its Lease", func(ctx context.Context) (bool, string) {
		l, err := env.Clientset().CoordinationV1().Leases(etcd.Namespace).Get(ctx, "etcd-main-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil, "no holder yet"
	})
	for range 3 {
		if _, err := rec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if got := get().Status.ClusterID; got != "" {
		t.Fatalf("cluster ID %s recorded from 1 of 3 Leases and no member answering", got)
	}

	sidecar(1)
	framework.Eventually(t, timeout, "the cluster ID recorded from the Leases", func(ctx context.Context) (bool, string) {
		if _, err := rec.Reconcile(ctx, req); err != nil {
			return false, err.Error()
		}
		got := get().Status.ClusterID
		return got != "", "clusterID " + got
	})
	got := get()
	if got.Status.ClusterID != want {
		t.Errorf("recorded cluster ID %s, the members' is %s", got.Status.ClusterID, want)
	}
	if s := resources.InitialClusterState(got); s != "existing" {
		t.Errorf("ETCD_INITIAL_CLUSTER_STATE %q once recorded, want existing", s)
	}
	if len(got.Status.Voters) != 0 {
		t.Errorf("voters %+v recorded without a leader answering the operator", got.Status.Voters)
	}
	waitForEvent(t, c, etcd, "ClusterBootstrapped", "etcd cluster "+want+" formed", "the member Leases of etcd-main-0, etcd-main-1 report it")
}
