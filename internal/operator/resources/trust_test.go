package resources

import (
	"slices"
	"testing"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// TestCertificateNeed: the serving certificate must cover every member's DNS name (what the
// operator and the member-agents verify) and one name of the client Service; the peer certificate
// every member's peer URL hosts, the additional ones included, for every member up to the larger
// count given (a scale in flight).
func TestCertificateNeed(t *testing.T) {
	e := testEtcd(3)
	e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "etcd-main-1", URLs: []string{"https://10.0.0.7:2380", "https://etcd-main-1.example.org:2380"}}}
	need := CertificateNeed(e, 4)
	wantServer := []string{"etcd-main-0.etcd-main-peer.shoot.svc", "etcd-main-1.etcd-main-peer.shoot.svc", "etcd-main-2.etcd-main-peer.shoot.svc", "etcd-main-3.etcd-main-peer.shoot.svc"}
	if !slices.Equal(need.ServerNames, wantServer) {
		t.Errorf("ServerNames = %v, want %v", need.ServerNames, wantServer)
	}
	if !slices.Contains(need.ServerAnyOf, "etcd-main-client.shoot.svc") || !slices.Contains(need.ServerAnyOf, "etcd-main-client") {
		t.Errorf("ServerAnyOf = %v: the client Service's names are missing", need.ServerAnyOf)
	}
	for _, host := range append(wantServer, "10.0.0.7", "etcd-main-1.example.org") {
		if !slices.Contains(need.PeerNames, host) {
			t.Errorf("PeerNames = %v: %s is missing", need.PeerNames, host)
		}
	}
	if s := CertificateSecrets(e); s.Server != "client-server" || s.Client != "client-client" || s.Peer != "peer-server" {
		t.Errorf("CertificateSecrets = %+v", s)
	}
}
