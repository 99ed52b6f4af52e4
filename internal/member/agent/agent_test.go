package agent_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

const namespace = "agents"

// startAPIServer runs a real etcd and kube-apiserver (no controllers) and returns a Lease client.
func startAPIServer(t *testing.T) coordinationv1client.CoordinationV1Interface {
	t.Helper()
	cluster := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true})
	if _, err := framework.CreateNamespace(context.Background(), cluster.Client(), namespace, nil); err != nil {
		t.Fatal(err)
	}
	return cluster.Clientset().CoordinationV1()
}

// createLease does what the Etcd reconciler does: an empty Lease per member.
func createLease(t *testing.T, leases coordinationv1client.CoordinationV1Interface, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := leases.Leases(namespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func getLease(t *testing.T, leases coordinationv1client.CoordinationV1Interface, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := leases.Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type world struct {
	etcd    *etcdtest.Cluster
	leases  coordinationv1client.CoordinationV1Interface
	certDir string
	files   testpki.Files
}

func newWorld(t *testing.T) *world {
	w := &world{leases: startAPIServer(t)}
	w.etcd = etcdtest.Start(t, etcdtest.Config{EtcdName: "main", Namespace: namespace})
	w.certDir = t.TempDir()
	var err error
	w.files, err = testpki.WriteFiles(w.certDir, w.etcd.CA, testpki.KeyPair{CertPEM: w.etcd.Client.Cert, KeyPEM: w.etcd.Client.Key})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) agent(t *testing.T, member int, interval time.Duration) *agent.Agent {
	t.Helper()
	m := w.etcd.Members[member]
	a, err := agent.New(agent.Config{
		Endpoint:    m.ClientURL,
		ServerName:  m.ServerName,
		ClientFiles: agent.ClientFiles{CAFile: w.files.CA, CertFile: w.files.Cert, KeyFile: w.files.Key},
		Lease:       m.Name,
		Namespace:   namespace,
		Interval:    interval,
		CallTimeout: time.Second,
	}, w.leases, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// expectedHolders asks the members directly what the agents should write.
func (w *world) expectedHolders(t *testing.T) map[string]string {
	t.Helper()
	p := etcdclient.NewPool(etcdclient.Options{})
	defer p.Close()
	s, err := p.Query(context.Background(), namespace+"/main", w.etcd.Client, w.etcd.Targets())
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, m := range s.Members {
		if m.Reachable {
			holders[m.Name] = memberlease.HolderIdentity(m.ID, m.ClusterID, m.IsLeader())
		}
	}
	return holders
}

func TestAgentAgainstRealClusterAndAPIServer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, m := range w.etcd.Members {
		createLease(t, w.leases, m.Name)
	}
	bystander := createLease(t, w.leases, "main-bystander")
	agents := make([]*agent.Agent, len(w.etcd.Members))
	for i := range w.etcd.Members {
		agents[i] = w.agent(t, i, time.Hour) // rounds are driven by hand
	}

	t.Run("each agent writes its member's identity and role", func(t *testing.T) {
		for i, a := range agents {
			if err := a.Renew(ctx); err != nil {
				t.Fatalf("agent of %s: %v", w.etcd.Members[i].Name, err)
			}
		}
		want := w.expectedHolders(t)
		leaders := 0
		for _, m := range w.etcd.Members {
			l := getLease(t, w.leases, m.Name)
			got := ptr.Deref(l.Spec.HolderIdentity, "")
			if got != want[m.Name] {
				t.Errorf("lease %s holds %q, want %q", m.Name, got, want[m.Name])
			}
			if strings.HasSuffix(got, ":Leader") {
				leaders++
			}
			if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > time.Minute {
				t.Errorf("lease %s renewTime %v is not fresh", m.Name, l.Spec.RenewTime)
			}
			if ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 15 {
				t.Errorf("lease %s lost its duration: %v", m.Name, l.Spec.LeaseDurationSeconds)
			}
		}
		if leaders != 1 {
			t.Errorf("%d leases claim Leader, want 1", leaders)
		}
		if got := getLease(t, w.leases, bystander.Name); got.ResourceVersion != bystander.ResourceVersion {
			t.Errorf("agents wrote another pod's lease: %+v", got.Spec)
		}
	})

	t.Run("a moved leadership shows on the next round", func(t *testing.T) {
		before := w.expectedHolders(t)
		p := etcdclient.NewPool(etcdclient.Options{})
		defer p.Close()
		s, err := p.Query(ctx, "x", w.etcd.Client, w.etcd.Targets())
		if err != nil {
			t.Fatal(err)
		}
		leader, _ := s.Leader()
		var to etcdclient.MemberStatus
		for _, m := range s.Members {
			if m.Name != leader.Name {
				to = m
			}
		}
		if err := p.MoveLeader(ctx, "x", w.etcd.Client, w.etcd.Targets(), leader.Name, to.ID); err != nil {
			t.Fatal(err)
		}
		for _, a := range agents {
			if err := a.Renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := ptr.Deref(getLease(t, w.leases, to.Name).Spec.HolderIdentity, ""); !strings.HasSuffix(got, ":Leader") {
			t.Errorf("new leader %s's lease holds %q (before: %q)", to.Name, got, before[to.Name])
		}
		if got := ptr.Deref(getLease(t, w.leases, leader.Name).Spec.HolderIdentity, ""); !strings.HasSuffix(got, ":Member") {
			t.Errorf("old leader %s's lease holds %q", leader.Name, got)
		}
	})

	t.Run("a stopped member's lease is not renewed", func(t *testing.T) {
		const stopped = 2
		name := w.etcd.Members[stopped].Name
		if err := w.etcd.Stop(stopped); err != nil {
			t.Fatal(err)
		}
		before := getLease(t, w.leases, name)
		err := agents[stopped].Renew(ctx)
		if err == nil {
			t.Fatal("Renew succeeded for a stopped member")
		}
		if after := getLease(t, w.leases, name); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("lease of the stopped member was written: %+v", after.Spec)
		}
		// The others carry on.
		for i := 0; i < stopped; i++ {
			if err := agents[i].Renew(ctx); err != nil {
				t.Errorf("agent of %s: %v", w.etcd.Members[i].Name, err)
			}
		}
		if err := w.etcd.Restart(stopped); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for agents[stopped].Renew(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatal("agent never renewed after its member came back")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("rotated client certificates are picked up", func(t *testing.T) {
		pair, err := w.etcd.CA.ClientCert("rotated")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := testpki.WriteFiles(w.certDir, w.etcd.CA, pair); err != nil {
			t.Fatal(err)
		}
		if err := agents[0].Renew(ctx); err != nil {
			t.Fatalf("after rotation: %v", err)
		}
		// Garbage on disk stops renewals instead of reusing stale credentials.
		if err := os.WriteFile(w.files.Cert, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := agents[0].Renew(ctx); err == nil || !strings.Contains(err.Error(), w.files.Cert) {
			t.Fatalf("got %v, want an error naming %s", err, w.files.Cert)
		}
		if _, err := testpki.WriteFiles(w.certDir, w.etcd.CA, pair); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a missing lease is not created", func(t *testing.T) {
		if err := w.leases.Leases(namespace).Delete(ctx, w.etcd.Members[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := agents[0].Renew(ctx)
		if err == nil || !apierrors.IsNotFound(err) {
			t.Fatalf("got %v, want NotFound", err)
		}
		_, err = w.leases.Leases(namespace).Get(ctx, w.etcd.Members[0].Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("lease exists after the agent ran: %v", err)
		}
	})
}

func TestAgentRunRenewsUntilCancelled(t *testing.T) {
	w := newWorld(t)
	name := w.etcd.Members[0].Name
	createLease(t, w.leases, name)
	a := w.agent(t, 0, 100*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	// Two distinct renewTimes prove the loop renews repeatedly.
	var first *metav1.MicroTime
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := getLease(t, w.leases, name)
		if rt := l.Spec.RenewTime; rt != nil {
			if first == nil {
				first = rt
			} else if !rt.Equal(first) {
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("lease not renewed twice; last %+v", l.Spec)
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	_, err := agent.New(agent.Config{Endpoint: "https://10.0.0.1:2379"}, nil, testr.New(t))
	if err == nil {
		t.Fatal("New accepted a config without certificates, lease or namespace")
	}
	for _, flag := range []string{"--server-name", "--ca-file", "--cert-file", "--key-file", "--lease", "--namespace"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error %q does not mention %s", err, flag)
		}
	}
}
