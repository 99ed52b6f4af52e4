package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// DefaultValidity is long enough for any test run and the demo.
const DefaultValidity = 7 * 24 * time.Hour

// CA is a self-signed certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	key     *ecdsa.PrivateKey
}

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Request describes a leaf certificate.
type Request struct {
	CommonName string
	// Organizations become the subject's O, which Kubernetes reads as the client's groups.
	Organizations []string
	DNSNames      []string
	IPs           []net.IP
	// Usages defaults to server and client auth, which is what etcd members need.
	Usages []x509.ExtKeyUsage
	// NotBefore defaults to an hour ago (tolerates clock skew); Validity to DefaultValidity.
	NotBefore time.Time
	Validity  time.Duration
}

// NewCA creates a CA valid for DefaultValidity.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(DefaultValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA %q: %w", commonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: encodeCert(der), KeyPEM: keyPEM, key: key}, nil
}

// Issue signs a leaf certificate for req.
func (ca *CA) Issue(req Request) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key for %q: %w", req.CommonName, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return KeyPair{}, err
	}
	usages := req.Usages
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	notBefore := req.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	validity := req.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign certificate %q: %w", req.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ServerCert issues a certificate usable for serving and, as etcd members also dial each other,
// for client auth.
func (ca *CA) ServerCert(commonName string, dnsNames []string, ips []net.IP) (KeyPair, error) {
	return ca.Issue(Request{CommonName: commonName, DNSNames: dnsNames, IPs: ips})
}

// PeerCert issues a peer certificate; etcd uses it on both ends of peer connections.
func (ca *CA) PeerCert(commonName string, dnsNames []string, ips []net.IP) (KeyPair, error) {
	return ca.Issue(Request{CommonName: commonName, DNSNames: dnsNames, IPs: ips})
}

// ClientCert issues a certificate for client auth only.
func (ca *CA) ClientCert(commonName string) (KeyPair, error) {
	return ca.Issue(Request{CommonName: commonName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// ClientMaterial pairs this CA with a client key pair.
func (ca *CA) ClientMaterial(client KeyPair) conductortls.ClientMaterial {
	return conductortls.ClientMaterial{CA: ca.CertPEM, Cert: client.CertPEM, Key: client.KeyPEM}
}

// MemberServerDNSNames are the DNS SANs every member of the Etcd etcdName in namespace needs:
// each member's peer-service name (wildcard), the client service, and localhost for probes.
func MemberServerDNSNames(etcdName, namespace string) []string {
	peer := fmt.Sprintf("%s-peer.%s.svc", etcdName, namespace)
	client := fmt.Sprintf("%s-client.%s.svc", etcdName, namespace)
	return []string{
		"*." + peer,
		"*." + peer + ".cluster.local",
		client,
		client + ".cluster.local",
		etcdName + "-client",
		"localhost",
	}
}

// MemberServerIPs are the IP SANs every member certificate carries.
func MemberServerIPs() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1)} }

// MemberServerName is the TLS server name of member pod in the Etcd etcdName: the name the
// operator and the member-agent verify when they dial the pod IP.
func MemberServerName(pod, etcdName, namespace string) string {
	return fmt.Sprintf("%s.%s-peer.%s.svc", pod, etcdName, namespace)
}

// EtcdPKI is everything an Etcd with TLS on both client and peer side needs, from one CA.
type EtcdPKI struct {
	CA     *CA
	Server KeyPair
	Peer   KeyPair
	Client KeyPair
}

// NewEtcdPKI issues server and peer certificates with MemberServerDNSNames and
// MemberServerIPs plus extraIPs, and a client certificate.
func NewEtcdPKI(etcdName, namespace string, extraIPs ...net.IP) (*EtcdPKI, error) {
	ca, err := NewCA(etcdName + "-ca")
	if err != nil {
		return nil, err
	}
	dns := MemberServerDNSNames(etcdName, namespace)
	ips := append(MemberServerIPs(), extraIPs...)
	p := &EtcdPKI{CA: ca}
	if p.Server, err = ca.ServerCert(etcdName+"-server", dns, ips); err != nil {
		return nil, err
	}
	if p.Peer, err = ca.PeerCert(etcdName+"-peer", dns, ips); err != nil {
		return nil, err
	}
	if p.Client, err = ca.ClientCert(etcdName + "-client"); err != nil {
		return nil, err
	}
	return p, nil
}

// ClientMaterial is the operator's view of this PKI.
func (p *EtcdPKI) ClientMaterial() conductortls.ClientMaterial { return p.CA.ClientMaterial(p.Client) }

// SecretNames names the Secrets that Secrets builds.
type SecretNames struct{ CA, Server, Peer, Client string }

// DefaultSecretNames are "<etcd>-ca", "<etcd>-server-tls", "<etcd>-peer-tls", "<etcd>-client-tls".
func DefaultSecretNames(etcdName string) SecretNames {
	return SecretNames{
		CA:     etcdName + "-ca",
		Server: etcdName + "-server-tls",
		Peer:   etcdName + "-peer-tls",
		Client: etcdName + "-client-tls",
	}
}

// Secrets returns the CA Secret and the three certificate Secrets in cert-manager layout.
func (p *EtcdPKI) Secrets(namespace string, names SecretNames) []*corev1.Secret {
	return []*corev1.Secret{
		p.CA.Secret(namespace, names.CA),
		TLSSecret(namespace, names.Server, p.CA, p.Server),
		TLSSecret(namespace, names.Peer, p.CA, p.Peer),
		TLSSecret(namespace, names.Client, p.CA, p.Client),
	}
}

// Secret is the CA as cert-manager stores a CA issuer's secret: ca.crt, tls.crt and tls.key.
func (ca *CA) Secret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			conductortls.DefaultCADataKey: ca.CertPEM,
			corev1.TLSCertKey:             ca.CertPEM,
			corev1.TLSPrivateKeyKey:       ca.KeyPEM,
		},
	}
}

// TLSSecret is a cert-manager Certificate secret: ca.crt, tls.crt and tls.key.
func TLSSecret(namespace, name string, ca *CA, kp KeyPair) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			conductortls.DefaultCADataKey: ca.CertPEM,
			corev1.TLSCertKey:             kp.CertPEM,
			corev1.TLSPrivateKeyKey:       kp.KeyPEM,
		},
	}
}

// Files names the PEM files WriteFiles wrote.
type Files struct{ CA, Cert, Key string }

// WriteFiles writes ca.crt, tls.crt and tls.key into dir (created if needed), the layout of a
// mounted cert-manager secret.
func WriteFiles(dir string, ca *CA, kp KeyPair) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("create %s: %w", dir, err)
	}
	f := Files{
		CA:   filepath.Join(dir, conductortls.DefaultCADataKey),
		Cert: filepath.Join(dir, corev1.TLSCertKey),
		Key:  filepath.Join(dir, corev1.TLSPrivateKeyKey),
	}
	for path, data := range map[string][]byte{f.CA: ca.CertPEM, f.Cert: kp.CertPEM, f.Key: kp.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Files{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
