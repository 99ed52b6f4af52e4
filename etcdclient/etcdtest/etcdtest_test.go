package etcdtest_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

func requireBinary(t *testing.T, version string) {
	t.Helper()
	if _, err := etcdtest.EtcdBinary(version); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("etcd binary required under CI=true: %v", err)
		}
		t.Skipf("etcd binary not built: %v", err)
	}
}

// TestPeerClientSANVerification records why member pods run with
// --peer-skip-client-san-verification. etcd checks the SANs of the certificate a peer presents
// against the address the connection comes from: the IP SANs first, then a reverse DNS lookup
// of that address matched against the DNS SANs. Peer certificates with only the wildcard
// "*.<etcd>-peer.<ns>.svc" names (pod IPs are not known when they are issued) pass only where a
// PTR record maps the pod IP into that domain. Here connections come from 127.0.0.1, whose PTR is
// "localhost", just as a pod without a matching PTR record would be rejected.
func TestPeerClientSANVerification(t *testing.T) {
	const etcdName, namespace = "etcd-san", "default"
	wildcardOnly := func(ca *testpki.CA, name string, ip net.IP) (testpki.KeyPair, error) {
		dns := []string{
			"*." + etcdName + "-peer." + namespace + ".svc",
			"*." + etcdName + "-peer." + namespace + ".svc.cluster.local",
		}
		// The own IP lets peers verify this member as a server (they dial its IP URL); it
		// does not match the 127.0.0.1 the member's outgoing connections come from.
		return ca.PeerCert(name, dns, []net.IP{ip})
	}
	for _, version := range []string{"3.6.8", "3.7.3"} {
		for _, skip := range []bool{false, true} {
			name := version + "/verify"
			var args []string
			if skip {
				name = version + "/skip"
				args = []string{"--peer-skip-client-san-verification"}
			}
			t.Run(name, func(t *testing.T) {
				requireBinary(t, version)
				c := etcdtest.Start(t, etcdtest.Config{
					Version: version, EtcdName: etcdName, Namespace: namespace,
					PeerCert: wildcardOnly, ExtraArgs: args, SkipWaitHealthy: true,
				})
				if skip {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					if err := c.WaitHealthy(ctx); err != nil {
						t.Fatalf("with the SAN check skipped the cluster must form: %v", err)
					}
					return
				}
				const rejection = "does not match any of DNSNames"
				deadline := time.Now().Add(30 * time.Second)
				for !logsContain(c, rejection) {
					if time.Now().After(deadline) {
						t.Fatalf("no member logged %q", rejection)
					}
					time.Sleep(200 * time.Millisecond)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if err := c.WaitHealthy(ctx); err == nil {
					t.Fatal("cluster formed although every peer connection is rejected")
				}
			})
		}
	}
}

func logsContain(c *etcdtest.Cluster, s string) bool {
	for _, m := range c.Members {
		data, _ := os.ReadFile(m.LogFile)
		if strings.Contains(string(data), s) {
			return true
		}
	}
	return false
}

func TestStopAndRestart(t *testing.T) {
	requireBinary(t, etcdtest.DefaultVersion)
	c := etcdtest.Start(t, etcdtest.Config{Members: 1})
	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	if c.Running(0) {
		t.Fatal("member still running after Stop")
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("restarted member: %v", err)
	}
}
