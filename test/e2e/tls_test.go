package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// TestTLSAddedToRunningCluster: a 3-member cluster running on plain HTTP, as etcd-druid runs an
// Etcd without TLS, is given clientUrlTls and peerUrlTls under the writer. The members move in
// two quorum-safe rollouts (TLS material and clients on both schemes, then https only, each
// member's peer URL re-recorded as it restarts): no quorum loss, no acknowledged write lost (the
// plaintext writer's writes audited over TLS afterwards), a linearizable history, every peer URL
// https, TLSEnabled True, and the cluster serves TLS clients. Then removing TLS is refused
// (ERR_TLS_CHANGE) and changes nothing.
func TestTLSAddedToRunningCluster(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	e := &env{t: t, stack: s}
	var clientTLS *druidv1alpha1.TLSConfig
	var peerTLS *druidv1alpha1.PeerTLSConfig
	cluster := createClusterWith(ctx, e, "e2e-tls-on-", 3, func(_ context.Context, _ string, etcd *druidv1alpha1.Etcd) error {
		clientTLS, peerTLS = etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS
		etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS = nil, nil
		return nil
	})
	image := framework.EtcdImage(fromVersion)
	tlsMaterial := cluster.PKI.ClientMaterial()
	rec, err := workload.NewRecorder(cluster.Endpoints(), conductortls.PlaintextMaterial(), workload.RecorderOptions{
		Expected:   3,
		Writer:     workload.WriterOptions{Rate: 40, RequestTimeout: 200 * time.Millisecond},
		Quorum:     workload.QuorumOptions{Probe: workload.ProbeReadyz},
		AuditCreds: &tlsMaterial,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)

	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS = clientTLS, peerTLS
	changed := time.Now()
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "TLSEnabled True (the https-only template written)", tlsEnabledIs(cluster, druidv1alpha1.ConditionTrue))
	adding := time.Since(changed)
	rolloutCtx, cancelRollout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelRollout()
	if err := cluster.WaitConverged(rolloutCtx, image); err != nil {
		t.Fatalf("the https-only rollout did not complete: %v", err)
	}
	e.waitFor(ctx, "every member's peer URL on https", func(ctx context.Context) (bool, error) {
		return peerURLsAre(ctx, cluster.Endpoints()(), tlsMaterial, "https://")
	})
	moved := time.Since(changed)
	time.Sleep(time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures tls-on: adding=%s moved=%s %s", adding.Round(100*time.Millisecond), moved.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s moved=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		"tls-added-live", moved.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	// The writer speaks plain HTTP: once members serve https only its writes fail, as a client
	// that did not switch would. What it got acknowledged must all be there.
	checkWrites(t, report, recErr)
	if report.QuorumLossMs != 0 {
		t.Errorf("quorum lost for %d ms while moving to TLS", report.QuorumLossMs)
	}

	// TLS clients are served now.
	t.Logf("over TLS: %s", writeAWhile(ctx, t, cluster, tlsMaterial).Summary())
	etcd, err = cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if etcd.Status.PeerUrlTLSEnabled == nil || !*etcd.Status.PeerUrlTLSEnabled {
		t.Errorf("status.peerUrlTLSEnabled %v after the move", etcd.Status.PeerUrlTLSEnabled)
	}

	// Removing TLS again is refused, and the members keep TLS.
	patch = client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS = nil, nil
	if err := s.Client.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "ERR_TLS_CHANGE in lastErrors", func(ctx context.Context) (bool, error) {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		for _, le := range etcd.Status.LastErrors {
			if le.Code == resources.ErrTransportChange {
				return true, nil
			}
		}
		return false, fmt.Errorf("lastErrors %v", etcd.Status.LastErrors)
	})
	st, err := cluster.StatefulSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if running, _ := resources.RunningTransport(st); running != transport.Final(true, true) {
		t.Errorf("after the refused removal the template renders %v", running)
	}
}

// tlsEnabledIs polls the TLSEnabled condition.
func tlsEnabledIs(cluster interface {
	Get(context.Context) (*druidv1alpha1.Etcd, error)
}, want druidv1alpha1.ConditionStatus) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeTLSEnabled)
		if c == nil || c.Status != want {
			return false, fmt.Errorf("TLSEnabled %+v", c)
		}
		return true, nil
	}
}

// peerURLsAre asks the members for the member list and checks every peer URL's scheme.
func peerURLsAre(ctx context.Context, eps []workload.Endpoint, creds conductortls.ClientMaterial, prefix string) (bool, error) {
	for _, ep := range eps {
		conn, err := etcdclient.DialMember(creds, etcdclient.Target{Name: ep.Name, Address: ep.Address, ServerName: ep.ServerName}, etcdclient.Options{})
		if err != nil {
			return false, err
		}
		members, err := conn.MemberList(ctx)
		_ = conn.Close()
		if err != nil {
			continue
		}
		for _, m := range members {
			for _, u := range m.PeerURLs {
				if !strings.HasPrefix(u, prefix) {
					return false, fmt.Errorf("member %s is dialled at %s", m.Name, u)
				}
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("no member answered")
}
