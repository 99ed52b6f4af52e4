package testpki_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestEtcdPKI checks the certificates are valid for every name a member is reached by, and that
// the Secrets are what the operator reads.
func TestEtcdPKI(t *testing.T) {
	p, err := testpki.NewEtcdPKI("main", "ns")
	if err != nil {
		t.Fatal(err)
	}
	server, err := firstCert(p.Server.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	for _, name := range []string{
		testpki.MemberServerName("main-0", "main", "ns"),
		"main-2.main-peer.ns.svc.cluster.local",
		"main-client.ns.svc",
		"main-client.ns.svc.cluster.local",
		"main-client",
		"localhost",
		"127.0.0.1",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := server.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := server.VerifyHostname("main-0.other-peer.ns.svc"); err == nil {
		t.Error("server certificate valid for another Etcd's member")
	}

	names := testpki.DefaultSecretNames("main")
	secrets := p.Secrets("ns", names)
	byName := map[string]int{}
	for i, s := range secrets {
		byName[s.Name] = i
	}
	m, err := conductortls.FromSecrets(secrets[byName[names.CA]], "", secrets[byName[names.Client]])
	if err != nil {
		t.Fatalf("operator cannot read the generated secrets: %v", err)
	}
	if m.Fingerprint() != p.ClientMaterial().Fingerprint() {
		t.Error("secrets hold different material than the PKI")
	}
}

func firstCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}
